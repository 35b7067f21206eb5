// Bindings of the Code op (mj.code) and of custom-gradient functions (mj.Function). The Python side
// normalises arguments; these only build the nodes.
#include <pybind11/functional.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "var_caster.h"

#include "meta_ops/code.h"
#include "meta_ops/custom_gradient.h"

namespace py = pybind11;
using namespace metajit;

namespace {

// An mj.Function instance's backward, called while gradients are built (the GIL is held then). Nodes may be
// released by a sync running without the GIL, so the Python callable is dropped under the GIL.
class PythonFunction final : public CustomFunction {
 public:
  PythonFunction(py::function backward, std::string name)
      : backward_(new py::function(std::move(backward)), &release), name_(std::move(name)) {}

  std::vector<NodePtr> backward(const std::vector<NodePtr>& output_grads) override {
    py::gil_scoped_acquire gil;
    py::object result = (*backward_)(output_grads);
    std::vector<NodePtr> grads;
    for (py::handle item : result) grads.push_back(item.is_none() ? nullptr : item.cast<NodePtr>());
    return grads;
  }
  std::string name() const override { return name_; }

 private:
  static void release(py::function* function) {
    if (!Py_IsInitialized()) return;  // interpreter gone: leak rather than touch it
    py::gil_scoped_acquire gil;
    delete function;
  }
  std::shared_ptr<py::function> backward_;
  std::string name_;
};

}  // namespace

void bind_code(py::module_& module) {
  module.def("code", [](const std::vector<std::vector<int64_t>>& shapes, const std::vector<std::string>& dtypes,
                        const std::vector<NodePtr>& inputs, const std::string& cpu_source, const std::string& cpu_header,
                        const std::string& cuda_source, const std::string& cuda_header,
                        const std::vector<std::string>& gradient_sources, const std::vector<std::string>& data_names,
                        const std::vector<double>& data_values, int64_t cpu_work_items) {
    auto op = std::make_shared<CodeOp>();
    for (const auto& shape : shapes) op->output_shapes.push_back(Shape(shape.begin(), shape.end()));
    for (const std::string& dtype : dtypes) op->output_dtypes.push_back(dtype_from_name(dtype));
    op->cpu_source = cpu_source;
    op->cpu_header = cpu_header;
    op->cuda_source = cuda_source;
    op->cuda_header = cuda_header;
    op->gradient_sources = gradient_sources;
    op->data_names = data_names;
    op->data_values = data_values;
    op->cpu_work_items = cpu_work_items;
    return make_code_op(op, inputs);
  });
  module.def("custom_function", [](const std::vector<NodePtr>& values, const std::vector<NodePtr>& inputs,
                                   py::function backward, const std::string& name) {
    return make_custom_outputs(values, inputs, std::make_shared<PythonFunction>(std::move(backward), name));
  });
}
