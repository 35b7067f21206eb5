// Bindings of model export (trace/model_export.h) and of the C++ runtime (runtime/include/metajit/runtime.h) for
// mj.export, a trace's dump() and mj.load_exported; the Python side is metajit/export.py. Values cross as Vars,
// copied into and out of the runtime's tensors.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstring>

#include "var_caster.h"

#include "core/executor.h"
#include "metajit/runtime.h"
#include "runtime/artifact.h"
#include "trace/model_export.h"

namespace py = pybind11;
using namespace metajit;

namespace {

py::dict export_to(const TracedFunction& traced, const std::vector<std::string>& input_names,
                   const std::vector<std::string>& output_names, const std::string& producer, const std::string& path) {
  Artifact artifact = export_traced_function(traced, input_names, output_names, producer);
  size_t bytes = write_artifact(path, artifact);
  size_t weight_bytes = 0, object_bytes = artifact.runtime_support.size(), library_calls = 0, kernels = 0;
  for (const std::string& weight : artifact.weights) weight_bytes += weight.size();
  for (const std::string& object : artifact.objects) object_bytes += object.size();
  for (const ArtifactStep& step : artifact.steps) {
    library_calls += step.contraction ? 1 : 0;
    kernels += step.object >= 0 ? 1 : 0;
  }
  py::dict report;
  report["path"] = path;
  report["bytes"] = bytes;
  report["kernels"] = kernels;
  report["kernel_objects"] = artifact.objects.size();
  report["library_calls"] = library_calls;
  report["weights"] = artifact.weights.size();
  report["weight_bytes"] = weight_bytes;
  report["object_bytes"] = object_bytes;
  return report;
}

py::list describe_tensors(const std::vector<TensorInfo>& tensors) {
  py::list list;
  for (const TensorInfo& tensor : tensors)
    list.append(py::make_tuple(tensor.name, data_type_name(tensor.dtype), py::tuple(py::cast(tensor.shape))));
  return list;
}

std::vector<NodePtr> run_model(const Model& model, const std::vector<NodePtr>& arguments) {
  std::vector<NodePtr> pending;
  for (const NodePtr& argument : arguments)
    if (!argument->is_computed()) pending.push_back(argument);
  if (!pending.empty()) sync(pending);
  std::vector<Tensor> inputs;
  for (const NodePtr& argument : arguments) {
    Tensor tensor(DataType(argument->dtype), argument->shape);
    if (tensor.bytes()) std::memcpy(tensor.data(), argument->storage->data(), tensor.bytes());
    inputs.push_back(std::move(tensor));
  }
  std::vector<Tensor> outputs;
  {
    py::gil_scoped_release release;
    outputs = model.run(inputs);
  }
  std::vector<NodePtr> results;
  for (const Tensor& output : outputs) {
    NodePtr node = make_data_node(DType(output.dtype()), output.shape());
    if (output.bytes()) std::memcpy(node->storage->data(), output.data(), output.bytes());
    results.push_back(std::move(node));
  }
  return results;
}

}  // namespace

void bind_runtime(py::module_& module) {
  module.def("export_traced", &export_to, py::arg("traced"), py::arg("input_names"), py::arg("output_names"),
             py::arg("producer"), py::arg("path"));
  module.def("artifact_format_version", [] { return kArtifactFormatVersion; });
  py::register_exception<ArtifactError>(module, "ArtifactError", PyExc_ValueError);
  py::class_<Model>(module, "RuntimeModel")
      .def_static("load", &Model::load, py::arg("path"))
      .def("run", &run_model, py::arg("inputs"))
      .def_property_readonly("inputs", [](const Model& model) { return describe_tensors(model.inputs()); })
      .def_property_readonly("outputs", [](const Model& model) { return describe_tensors(model.outputs()); })
      .def_property_readonly("kernels", &Model::kernel_count)
      .def_property_readonly("library_calls", &Model::library_call_count)
      .def_property_readonly("weight_bytes", &Model::weight_bytes)
      .def_property_readonly("producer", &Model::producer);
}
