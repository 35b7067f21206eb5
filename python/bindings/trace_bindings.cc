// Bindings of mj.trace's recording and kept plans (trace/traced_function.h); the decorator itself, its keys and
// its guards are Python's (metajit/jit.py).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "var_caster.h"

#include "core/executor.h"
#include "meta_ops/trace_recording.h"
#include "trace/traced_function.h"

namespace py = pybind11;
using namespace metajit;

namespace {

const char* const kReadInsideTrace =
    "mj.trace: a value was read back (.item(), .numpy(), .tolist(), print, or a Python branch on a Var) inside "
    "the function being traced; a replay runs no Python, so it would keep this first value for ever. Return the "
    "value and read it after the call, or keep this function untraced";

// One recording on the calling thread, from begin() to finish() or abort().
class Recording {
 public:
  Recording() {
    recording_.first_node_id = next_node_id_value();
    previous_ = set_active_trace_recording(&recording_);
    previous_refusal_ = refuse_syncs(kReadInsideTrace);
  }
  ~Recording() { stop(); }

  std::shared_ptr<TracedFunction> finish(const std::vector<NodePtr>& arguments, const std::vector<VarPtr>& results) {
    refuse_syncs(previous_refusal_);
    stopped_ = true;
    try {
      std::shared_ptr<TracedFunction> traced = TracedFunction::capture(recording_, arguments, results);
      set_active_trace_recording(previous_);
      return traced;
    } catch (const InterruptedError&) {
      set_active_trace_recording(previous_);
      throw py::error_already_set();
    } catch (...) {
      set_active_trace_recording(previous_);
      throw;
    }
  }
  void stop() {
    if (stopped_) return;
    stopped_ = true;
    refuse_syncs(previous_refusal_);
    set_active_trace_recording(previous_);
  }

 private:
  TraceRecording recording_;
  TraceRecording* previous_ = nullptr;
  const char* previous_refusal_ = nullptr;
  bool stopped_ = false;
};

// Lets Python make a value outside the recording in the middle of it (an optimizer's scalar inputs).
class Suspension {
 public:
  void enter() {
    recording_ = set_active_trace_recording(nullptr);
    refusal_ = refuse_syncs(nullptr);
  }
  void exit() {
    refuse_syncs(refusal_);
    set_active_trace_recording(recording_);
  }

 private:
  TraceRecording* recording_ = nullptr;
  const char* refusal_ = nullptr;
};

}  // namespace

void bind_trace(py::module_& module) {
  py::class_<Recording>(module, "TraceRecording")
      .def(py::init<>())
      .def("finish", &Recording::finish, py::arg("arguments"), py::arg("results"))
      .def("stop", &Recording::stop);
  py::class_<Suspension>(module, "TraceSuspension")
      .def(py::init<>())
      .def("__enter__", [](Suspension& self) { self.enter(); })
      .def("__exit__", [](Suspension& self, py::args) { self.exit(); });
  module.def("trace_recording_active", [] { return active_trace_recording() != nullptr; });
  py::class_<TracedFunction, std::shared_ptr<TracedFunction>>(module, "TracedFunction")
      .def(
          "replay",
          [](TracedFunction& traced, const std::vector<NodePtr>& arguments) {
            try {
              // The GIL stays held: a replay makes nodes (random draws), whose provenance hook reads Python frames.
              return traced.replay(arguments);
            } catch (const InterruptedError&) {
              throw py::error_already_set();
            }
          },
          py::arg("arguments"))
      .def("check", &TracedFunction::check, py::arg("arguments"))
      .def("describe", py::overload_cast<>(&TracedFunction::describe, py::const_))
      .def_property_readonly("kernels", &TracedFunction::kernel_count)
      .def_property_readonly("state_values", &TracedFunction::state_count)
      .def_property_readonly("constants", &TracedFunction::constant_count);
}
