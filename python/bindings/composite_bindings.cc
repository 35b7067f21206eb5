// Bindings of ops that record many nodes in one call (batch normalization, optimizer updates): the Python layers
// check the arguments and keep their state; these only build the nodes (meta_ops/batch_norm.h,
// meta_ops/optimizer_updates.h).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "var_caster.h"

#include "meta_ops/batch_norm.h"
#include "meta_ops/optimizer_updates.h"
#include "python_call_site.h"

namespace py = pybind11;
using namespace metajit;

void bind_composites(py::module_& module) {
  module.def(
      "batch_norm",
      [](const NodePtr& input, const NodePtr& running_mean, const NodePtr& running_var, const NodePtr& weight,
         const NodePtr& bias, bool training, double momentum, double eps) {
        BatchNormNodes nodes =
            batch_norm(input, running_mean, running_var, weight, bias, training, momentum, eps, python_call_site());
        return py::make_tuple(nodes.output, nodes.running_mean, nodes.running_var);
      },
      py::arg("input"), py::arg("running_mean").none(true), py::arg("running_var").none(true),
      py::arg("weight").none(true), py::arg("bias").none(true), py::arg("training"), py::arg("momentum"),
      py::arg("eps"), "(output, new running mean, new running var) of batch normalization; see ops/normalization.py.");
  module.def(
      "adam_update",
      [](const NodePtr& param, const NodePtr& grad, const NodePtr& exp_avg, const NodePtr& exp_avg_sq,
         const NodePtr& max_exp_avg_sq, const std::vector<NodePtr>& scalars) {
        if (scalars.size() != 7) throw std::invalid_argument("adam_update: expected 7 scalars");
        AdamNodes nodes =
            adam_update(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq,
                        {scalars[0], scalars[1], scalars[2], scalars[3], scalars[4], scalars[5], scalars[6]});
        return py::make_tuple(nodes.param, nodes.exp_avg, nodes.exp_avg_sq, nodes.max_exp_avg_sq);
      },
      py::arg("param"), py::arg("grad"), py::arg("exp_avg"), py::arg("exp_avg_sq"),
      py::arg("max_exp_avg_sq").none(true), py::arg("scalars"),
      "(param, exp_avg, exp_avg_sq, max_exp_avg_sq or None) after one Adam step; scalars: beta1, 1 - beta1, "
      "beta2, 1 - beta2, sqrt of bias correction 2, eps, step size (0-d Vars); see optim/adam.py.");
  module.def(
      "sgd_update",
      [](const NodePtr& param, const NodePtr& grad, const NodePtr& weight_decay, const NodePtr& buffer,
         const NodePtr& keep, const NodePtr& take, const NodePtr& nesterov_momentum, const NodePtr& lr) {
        SgdNodes nodes = sgd_update(param, grad, weight_decay, buffer, keep, take, nesterov_momentum, lr);
        return py::make_tuple(nodes.param, nodes.momentum_buffer);
      },
      py::arg("param"), py::arg("grad"), py::arg("weight_decay").none(true), py::arg("buffer").none(true),
      py::arg("keep").none(true), py::arg("take").none(true), py::arg("nesterov_momentum").none(true), py::arg("lr"),
      "(param, momentum buffer or None) after one SGD step; see optim/sgd.py.");
}
