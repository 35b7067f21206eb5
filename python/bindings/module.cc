// pybind11 bindings: metajit._core. Thin on purpose: argument conversion, numpy interop and the provenance
// hook that records the user's file:line on every node. All semantics live in the C++ layers below.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "var_caster.h"

#include <Python.h>
#include <frameobject.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <unordered_map>

#include "cache/content_hash.h"
#include "core/executor.h"
#include "core/log.h"
#include "core/stats.h"
#include "core/thread_pool.h"
#include "jit/plan/plan_description.h"
#include "jit/plan/sibling_kernels.h"
#include "jit/run/cuda_graph_runner.h"
#include "jit/run/graph_executor.h"
#include "jit/toolchain/compiler.h"
#include "jit/toolchain/kernel_cache.h"
#include "libraries/cpu/onednn_backend.h"
#include "libraries/cpu/onednn_layout_cache.h"
#include "libraries/cuda_contraction_backend.h"
#include "meta_ops/autodiff.h"
#include "meta_ops/basic_index.h"
#include "meta_ops/broadcast.h"
#include "meta_ops/elementwise.h"
#include "meta_ops/random_values.h"
#include "meta_ops/reduce.h"
#include "meta_ops/var.h"
#include "python_call_site.h"

namespace py = pybind11;
using namespace metajit;

void bind_code(py::module_& module);   // code_bindings.cc
void bind_cache(py::module_& module);  // cache_bindings.cc
void bind_cuda(py::module_& module);   // cuda_bindings.cc
void bind_flags(py::module_& module);  // flags_bindings.cc
void bind_distributed(py::module_& module);  // distributed_bindings.cc
void bind_trace(py::module_& module);        // trace_bindings.cc
void bind_runtime(py::module_& module);      // runtime_bindings.cc
void bind_composites(py::module_& module);   // composite_bindings.cc

namespace {

// ---- provenance: the innermost Python frame outside the metajit package ----
std::string package_directory;

struct FileInfo {
  const char* interned;
  bool internal;
};

// PyFrame_GetLineNumber walks the code object's line table on every call: about a tenth of recording a small op.
// A frame's line follows from its code object and instruction offset, so lines are remembered by that pair. The
// cached code objects are kept alive, so an address is never reused by another code object while remembered; the
// cache is emptied when it grows large (code compiled in a loop by exec).
int frame_line(PyFrameObject* frame, PyCodeObject* code) {
#if PY_VERSION_HEX >= 0x030B0000
  static std::unordered_map<PyCodeObject*, std::unordered_map<int, int>> lines;
  constexpr size_t kMaximumCodeObjects = 4096;
  int offset = PyFrame_GetLasti(frame);
  auto code_lines = lines.find(code);
  if (code_lines == lines.end()) {
    if (lines.size() >= kMaximumCodeObjects) {
      for (auto& [cached, unused] : lines) Py_DECREF(cached);
      lines.clear();
    }
    Py_INCREF(code);
    code_lines = lines.emplace(code, std::unordered_map<int, int>{}).first;
  }
  auto found = code_lines->second.find(offset);
  if (found != code_lines->second.end()) return found->second;
  int line = PyFrame_GetLineNumber(frame);
  code_lines->second.emplace(offset, line);
  return line;
#else
  (void)code;
  return PyFrame_GetLineNumber(frame);
#endif
}

Provenance python_provenance() {
  static std::unordered_map<PyObject*, FileInfo> files;  // filename objects are kept alive (increfed) forever
  PyFrameObject* frame = PyEval_GetFrame();             // borrowed
  if (!frame) return {};
  Py_INCREF(frame);
  Provenance result;
  for (int depth = 0; frame && depth < 64; ++depth) {
    PyCodeObject* code = PyFrame_GetCode(frame);
    PyObject* filename = code->co_filename;
    auto found = files.find(filename);
    if (found == files.end()) {
      const char* text = PyUnicode_AsUTF8(filename);
      std::string name = text ? text : "<unknown>";
      bool internal = !package_directory.empty() && name.compare(0, package_directory.size(), package_directory) == 0;
      Py_INCREF(filename);
      found = files.emplace(filename, FileInfo{intern_string(name), internal}).first;
    }
    if (!found->second.internal) {
      result = {found->second.interned, frame_line(frame, code)};
      Py_DECREF(code);
      Py_DECREF(frame);
      return result;
    }
    Py_DECREF(code);
    PyFrameObject* back = PyFrame_GetBack(frame);
    Py_DECREF(frame);
    frame = back;
  }
  Py_XDECREF(frame);
  return result;
}

// ---- numpy interop ----
DType dtype_of_numpy(const py::dtype& dtype) {
  char kind = dtype.kind();
  int size = int(dtype.itemsize());
  if (kind == 'b') return DType::Bool;
  if (kind == 'f' && size == 2) return DType::Float16;
  if (kind == 'f' && size == 4) return DType::Float32;
  if (kind == 'f' && size == 8) return DType::Float64;
  if (kind == 'i' && size == 1) return DType::Int8;
  if (kind == 'i' && size == 4) return DType::Int32;
  if (kind == 'i' && size == 8) return DType::Int64;
  if (kind == 'u' && size == 1) return DType::UInt8;
  throw std::invalid_argument("numpy dtype " + std::string(py::str(dtype)) +
                              " is not supported (use bool, int8, uint8, int32, int64, float16, float32 or float64)");
}

py::dtype numpy_dtype(DType dtype) { return py::dtype(dtype_name(dtype)); }

NodePtr from_numpy(py::array array) {
  DType dtype = dtype_of_numpy(array.dtype());
  py::array contiguous = py::array::ensure(array, py::array::c_style);
  Shape shape(contiguous.shape(), contiguous.shape() + contiguous.ndim());
  NodePtr node = make_data_node(dtype, shape);
  if (node->numel()) std::memcpy(node->storage->data(), contiguous.data(), size_t(node->numel()) * dtype_size(dtype));
  return node;
}

// Ctrl-C during a sync: the executor asks between kernels (at most every 20 ms); Python's own handler decides.
void python_interrupt_check() {
  static std::atomic<int64_t> last_check{0};
  int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
      std::chrono::steady_clock::now().time_since_epoch()).count();
  if (now - last_check.load(std::memory_order_relaxed) < 20'000'000) return;
  last_check.store(now, std::memory_order_relaxed);
  py::gil_scoped_acquire gil;
  if (PyErr_CheckSignals() != 0) throw InterruptedError("interrupted");
}

void sync_nodes(const std::vector<NodePtr>& nodes) {
  try {
    py::gil_scoped_release release;
    sync(nodes);
  } catch (const InterruptedError&) {
    throw py::error_already_set();  // the KeyboardInterrupt (or the handler's own exception) Python now holds
  }
}

py::array to_numpy(const NodePtr& node) {
  sync_nodes({node});
  // Zero-copy: the array keeps the storage alive through a capsule and is read-only, so the Var's value can
  // never change behind its back.
  auto* keep = new StoragePtr(node->storage);
  py::capsule owner(keep, [](void* pointer) { delete static_cast<StoragePtr*>(pointer); });
  std::vector<py::ssize_t> strides(node->shape.size());
  py::ssize_t stride = dtype_size(node->dtype);
  for (int dim = int(node->shape.size()) - 1; dim >= 0; --dim) {
    strides[dim] = stride;
    stride *= node->shape[dim];
  }
  py::array result(numpy_dtype(node->dtype), node->shape, strides, node->storage->data(), owner);
  py::detail::array_proxy(result.ptr())->flags &= ~py::detail::npy_api::NPY_ARRAY_WRITEABLE_;
  return result;
}

// ---- scalars and operands ----
bool is_python_scalar(py::handle value) {
  return PyBool_Check(value.ptr()) || PyLong_Check(value.ptr()) || PyFloat_Check(value.ptr());
}

bool is_numpy_scalar(py::handle value) {
  static PyObject* generic = py::object(py::module_::import("numpy").attr("generic")).release().ptr();
  return PyObject_IsInstance(value.ptr(), generic) == 1;
}

NodePtr as_node(py::handle value) {
  if (py::isinstance<Var>(value)) return value.cast<NodePtr>();
  if (py::isinstance<py::array>(value)) return from_numpy(value.cast<py::array>());
  throw py::type_error("expected a metajit Var, a numpy array or a Python number, got " +
                       std::string(py::str(py::type::handle_of(value).attr("__name__"))));
}

// An integer-like Python value (int, bool, numpy integer) as an exact int64: false for anything else (floats);
// `overflow` is set when it is an integer outside the int64 range.
bool exact_integer(py::handle value, int64_t* result, bool* overflow) {
  if (PyFloat_Check(value.ptr()) || !PyIndex_Check(value.ptr())) return false;
  py::object index = py::reinterpret_steal<py::object>(PyNumber_Index(value.ptr()));
  if (!index) {  // __index__ refused (numpy bools): not an integer
    PyErr_Clear();
    return false;
  }
  int overflowed = 0;
  *result = PyLong_AsLongLongAndOverflow(index.ptr(), &overflowed);
  *overflow = overflowed != 0;
  return true;
}

py::object binary_dispatch(BinaryOp op, const NodePtr& self, py::handle other, bool reflected) {
  // numpy scalars (np.float32(2), np.int64(3), np.bool_(True)) act as the Python numbers they hold, as in PyTorch;
  // left to numpy, `x + np.float32(2)` would turn x into an ndarray and `np.float32(2) * x` would fail.
  if (!is_python_scalar(other) && is_numpy_scalar(other)) {
    py::object number = other.attr("item")();
    if (is_python_scalar(number)) return binary_dispatch(op, self, number, reflected);
  }
  if (is_python_scalar(other)) {
    if (PyBool_Check(other.ptr()) && self->dtype == DType::Bool)
      return py::cast(binary(op, self, constant(self->shape, DType::Bool, other.cast<bool>() ? 1 : 0)));
    int64_t integer = 0;
    bool overflow = false;
    if (exact_integer(other, &integer, &overflow) && !(overflow && is_floating(self->dtype))) {
      if (overflow) throw py::value_error("the integer " + std::string(py::str(other)) + " does not fit in int64");
      return py::cast(binary_with_integer_scalar(op, self, integer, reflected, python_call_site()));
    }
    bool is_float = PyFloat_Check(other.ptr());
    return py::cast(binary_with_scalar(op, self, other.cast<double>(), is_float, reflected, python_call_site()));
  }
  if (py::isinstance<Var>(other) || py::isinstance<py::array>(other)) {
    NodePtr operand = as_node(other);
    return py::cast(reflected ? binary(op, operand, self) : binary(op, self, operand));
  }
  return py::reinterpret_borrow<py::object>(Py_NotImplemented);
}

std::vector<int64_t> dims_argument(py::handle dims, int rank) {
  if (dims.is_none()) {
    std::vector<int64_t> all(rank);
    for (int dim = 0; dim < rank; ++dim) all[dim] = dim;
    return all;
  }
  if (PyLong_Check(dims.ptr())) return {dims.cast<int64_t>()};
  return dims.cast<std::vector<int64_t>>();
}

Shape shape_argument(py::handle shape) {
  if (PyLong_Check(shape.ptr())) return {shape.cast<int64_t>()};
  return shape.cast<Shape>();
}

// rand/randn: the engine's float64 values (meta_ops/random_values.h), cast to the dtype asked for now.
NodePtr random_node(const Shape& shape, DType dtype, RandomDistribution distribution) {
  if (!is_floating(dtype)) throw std::invalid_argument("rand/randn need a floating dtype, got " + std::string(dtype_name(dtype)));
  NodePtr node = random_values(shape, distribution);
  if (dtype == DType::Float64) return node;
  NodePtr result = cast(node, dtype);
  if (!active_trace_recording()) sync_nodes({result});  // traced: a replay draws the float64 values and casts them
  return result;
}

std::string describe(const NodePtr& node) {
  std::string text = "metajit.Var(shape=" + shape_to_string(node->shape) + ", dtype=" + dtype_name(node->dtype) +
                     ", op=" + node->op_name();
  if (!node->is_computed()) text += ", lazy";
  return text + ")";
}

}  // namespace

// The place in Python code that passes a scalar operand (meta_ops/scalar_sites.h): the calling frame's code
// object and instruction offset, so two operators on one line are two places.
uint64_t python_call_site() {
  PyFrameObject* frame = PyEval_GetFrame();  // borrowed
  if (!frame) return 0;
  PyCodeObject* code = PyFrame_GetCode(frame);  // a new reference
  uint64_t site = uint64_t(reinterpret_cast<uintptr_t>(code));
  Py_DECREF(code);
#if PY_VERSION_HEX >= 0x030B0000
  int offset = PyFrame_GetLasti(frame);
#else
  int offset = PyFrame_GetLineNumber(frame);
#endif
  return site * 1000003u + uint64_t(offset) + 1;
}

PYBIND11_MODULE(_core, module) {
  module.doc() = "metajit C++ core: lazy meta-op graph, fuser, in-process Clang JIT and kernel cache";
  register_op_names();
  install_graph_executor();
  install_onednn_backend();
  install_cuda_contraction_backend();
  set_provenance_hook(&python_provenance);
  set_interrupt_check(&python_interrupt_check);
  py::register_exception<NonFiniteError>(module, "NonFiniteError", PyExc_FloatingPointError);
  module.def("check_nan", [] { return check_non_finite(); });
  module.def("set_check_nan", [](bool enabled) { set_check_non_finite(enabled); });
  py::register_exception<CompileError>(module, "CompileError", PyExc_RuntimeError);
  bind_code(module);
  bind_cache(module);
  bind_trace(module);
  bind_runtime(module);
  bind_composites(module);
  bind_cuda(module);
  bind_flags(module);
  bind_distributed(module);

  // metajit.Var: a handle (meta_ops/var.h) whose node in-place ops rebind; methods taking a NodePtr receive its
  // current node (python/bindings/var_caster.h).
  py::class_<Var, VarPtr> var(module, "Var");
  var.def_property_readonly("shape", [](const NodePtr& node) { return py::tuple(py::cast(node->shape)); })
      .def_property_readonly("dtype", [](const NodePtr& node) { return std::string(dtype_name(node->dtype)); })
      .def_property_readonly("ndim", [](const NodePtr& node) { return node->shape.size(); })
      .def("numel", [](const NodePtr& node) { return node->numel(); })
      .def("__len__",
           [](const NodePtr& node) {
             if (node->shape.empty()) throw py::type_error("len() of a 0-d Var");
             return node->shape[0];
           })
      .def_property_readonly("is_computed", [](const NodePtr& node) { return node->is_computed(); })
      .def_property_readonly("op", [](const NodePtr& node) { return node->op_name(); })
      .def_property_readonly("created_at", [](const NodePtr& node) { return node->provenance.to_string(); })
      .def("numpy", &to_numpy, "Computes the value (if needed) and returns it as a read-only numpy array (no copy).")
      .def("sync",
           [](const VarPtr& self) {
             sync_nodes({self->node()});
             return self;
           })
      .def("item",
           [](const NodePtr& node) -> py::object {
             if (node->numel() != 1)
               throw std::invalid_argument("item() needs a Var with exactly one element, this one has shape " +
                                           shape_to_string(node->shape));
             return to_numpy(node).attr("reshape")(py::tuple()).attr("item")();
           })
      .def_property(
          "requires_grad", [](const NodePtr& node) { return node->requires_grad; },
          [](Var& self, bool value) { self.set_requires_grad(value); })
      .def_property_readonly("is_leaf", [](const NodePtr& node) { return !node->gradient_history; })
      // Which graph node a Var is now (Vars built from the same node, such as gradient_leaves' results, agree).
      .def_property_readonly("_node_id", [](const NodePtr& node) { return node->id; })
      .def_property(
          "grad", [](const NodePtr& node) { return Var::gradient_of(node); },
          [](const NodePtr& node, const VarPtr& grad) {
            if (grad && grad->shape() != node->shape)
              throw std::invalid_argument("grad of shape " + shape_to_string(grad->shape()) +
                                          " assigned to a Var of shape " + shape_to_string(node->shape));
            Var::set_gradient(node, grad);
          })
      .def("detach", &Var::detached_alias,
           "The same values without gradient history, shared with this Var: gradients do not flow through the "
           "result, and an in-place change of either is seen by the other (PyTorch's detach()).")
      .def(
          "detach_",
          [](const VarPtr& self) {
            self->detach_in_place();
            return self;
          },
          "Makes this Var a leaf holding the same value (not for views).")
      .def_property(
          "data", &Var::data_alias, [](Var& self, const NodePtr& value) { self.set_data(value); },
          "The same values, shared and without gradient history (writes through .data change this Var "
          "without recording them); assigning `x.data = y` gives x y's value (any shape), keeping x's "
          "identity, grad and requires_grad.")
      .def(
          "_write",
          [](Var& self, const NodePtr& value, const std::string& operation, uint64_t first_node_id) {
            self.write(value, operation, first_node_id);
          },
          py::arg("value"), py::arg("operation"), py::arg("first_node_id") = 0,
          "In-place update: this Var and every alias of it now hold `value` (this Var's shape). first_node_id: "
          "_core.next_node_id() before the op recorded `value` (its own reads of the old value are exempt from "
          "the version check).")
      .def("_check_writable", &Var::check_writable)
      .def("_count_write", &Var::count_write)
      .def_property_readonly("_is_view", &Var::is_view)
      .def("is_contiguous", &Var::is_contiguous)
      .def("_strides", [](const Var& self) { return py::tuple(py::cast(self.strides())); })
      .def("storage_offset", &Var::storage_offset)
      .def("_fully_overlaps", [](Var& self, Var& other) { return self.overlap_with(other) == Var::Overlap::Full; })
      .def(
          "_partially_overlaps",
          [](Var& self, Var& other) { return self.overlap_with(other) == Var::Overlap::Partial; },
          "Whether this Var and `other` share some but not all of their elements (or share them in another "
          "layout): PyTorch refuses in-place ops that write one while reading the other.")
      .def("_stop_counting_as_handle", &Var::stop_counting_as_handle)
      .def("_assign",
           [](Var& self, const NodePtr& value) {
             // assign(): this Var holds `value` from now on, computed now (optimizer updates, running statistics).
             NodePtr current = self.node();
             if (value->shape != current->shape)
               throw std::invalid_argument("assign: value of shape " + shape_to_string(value->shape) +
                                           " to a Var of shape " + shape_to_string(current->shape));
             self.write(value, "assign");
             if (!active_trace_recording()) sync_nodes({self.node()});  // a traced function's end computes it
           })
      .def("__repr__", &describe)
      .def("__hash__", [](py::handle self) { return py::int_(reinterpret_cast<uintptr_t>(self.ptr()) >> 4); });

  auto bind_binary = [&](const char* name, BinaryOp op, bool reflected) {
    var.def(name, [op, reflected](const NodePtr& self, py::handle other) { return binary_dispatch(op, self, other, reflected); },
            py::is_operator());
  };
  bind_binary("__add__", BinaryOp::Add, false);
  bind_binary("__radd__", BinaryOp::Add, true);
  bind_binary("__sub__", BinaryOp::Subtract, false);
  bind_binary("__rsub__", BinaryOp::Subtract, true);
  bind_binary("__mul__", BinaryOp::Multiply, false);
  bind_binary("__rmul__", BinaryOp::Multiply, true);
  bind_binary("__truediv__", BinaryOp::Divide, false);
  bind_binary("__rtruediv__", BinaryOp::Divide, true);
  bind_binary("__floordiv__", BinaryOp::FloorDivide, false);
  bind_binary("__rfloordiv__", BinaryOp::FloorDivide, true);
  bind_binary("__mod__", BinaryOp::Modulo, false);
  bind_binary("__rmod__", BinaryOp::Modulo, true);
  bind_binary("__pow__", BinaryOp::Power, false);
  bind_binary("__rpow__", BinaryOp::Power, true);
  bind_binary("__lt__", BinaryOp::Less, false);
  bind_binary("__le__", BinaryOp::LessEqual, false);
  bind_binary("__gt__", BinaryOp::Greater, false);
  bind_binary("__ge__", BinaryOp::GreaterEqual, false);
  bind_binary("__eq__", BinaryOp::Equal, false);
  bind_binary("__ne__", BinaryOp::NotEqual, false);
  bind_binary("__and__", BinaryOp::BitwiseAnd, false);
  bind_binary("__rand__", BinaryOp::BitwiseAnd, true);
  bind_binary("__or__", BinaryOp::BitwiseOr, false);
  bind_binary("__ror__", BinaryOp::BitwiseOr, true);
  bind_binary("__xor__", BinaryOp::BitwiseXor, false);
  bind_binary("__rxor__", BinaryOp::BitwiseXor, true);
  var.def("__neg__", [](const NodePtr& self) { return unary(UnaryOp::Negate, self); })
      .def("__abs__", [](const NodePtr& self) { return unary(UnaryOp::Abs, self); })
      .def("__invert__", [](const NodePtr& self) {
        return unary(self->dtype == DType::Bool ? UnaryOp::LogicalNot : UnaryOp::BitwiseNot, self);
      });
  // Unary methods: x.exp(), x.relu(), ...
  for (const std::string& name : unary_op_names()) {
    UnaryOp op = unary_op_from_name(name);
    var.def(name.c_str(), [op](const NodePtr& self) { return unary(op, self); });
  }
  module.def("unary_op_names", &unary_op_names, "Every elementwise unary op's name (meta_ops/elementwise.cc).");
  module.def("binary_op_names", &binary_op_names, "Every elementwise binary op's name (meta_ops/elementwise.cc).");

  module.def("array", [](py::handle value) { return as_node(value); });
  // A Var of its own holding the same node: no alias of the argument's values (a contiguous() that PyTorch copies).
  module.def("next_node_id", &next_node_id_value);
  // A new node holding `node`'s value, differentiable to it: what copy_ and x[k] = v write, so the written Var
  // never shares a node with the Var it copied (a later write to one must not count as a write to the other).
  // Its storage and version counter are its own: the version check stops at it (mutation fuzz seed 303818).
  module.def("_copy_node", [](const NodePtr& node) {
    NodePtr copy = make_node(NodeKind::View, node->dtype, node->shape, {node});
    for (int dim = 0; dim < int(node->shape.size()); ++dim) copy->view.push_back({dim, 1, 0});
    copy->own_version_counter = true;
    return copy;
  });
  module.def("_unaliased", [](const NodePtr& node) { return node; });
  module.def("unary", [](const std::string& name, const NodePtr& input) { return unary(unary_op_from_name(name), input); });
  module.def("binary", [](const std::string& name, py::handle left, py::handle right) -> py::object {
    BinaryOp op = binary_op_from_name(name);
    if (py::isinstance<Var>(left)) return binary_dispatch(op, left.cast<NodePtr>(), right, false);
    if (py::isinstance<Var>(right)) return binary_dispatch(op, right.cast<NodePtr>(), left, true);
    return py::cast(binary(op, as_node(left), as_node(right)));
  });
  module.def("where", [](const NodePtr& condition, const NodePtr& if_true, const NodePtr& if_false) {
    return where(condition, if_true, if_false);
  });
  module.def("cast", [](const NodePtr& input, const std::string& dtype) { return cast(input, dtype_from_name(dtype)); });
  module.def("constant", [](py::handle shape, const std::string& dtype_text, py::handle value) {
    DType dtype = dtype_from_name(dtype_text);
    int64_t integer = 0;
    bool overflow = false;
    if (is_integral(dtype) && exact_integer(value, &integer, &overflow)) {
      if (overflow) throw py::value_error("the integer " + std::string(py::str(value)) + " does not fit in int64");
      return integer_constant(shape_argument(shape), dtype, integer);
    }
    return constant(shape_argument(shape), dtype, value.cast<double>());
  });
  module.def("arange", [](double start, double stop, double step, const std::string& dtype) {
    return arange(start, stop, step, dtype_from_name(dtype));
  });
  module.def("seed", &seed_random);
  module.def("random_state", [] { return py::bytes(random_state()); });
  module.def("set_random_state", &set_random_state);  // std::invalid_argument becomes ValueError
  module.def("rand", [](py::handle shape, const std::string& dtype) {
    return random_node(shape_argument(shape), dtype_from_name(dtype), RandomDistribution::Uniform);
  });
  module.def("randn", [](py::handle shape, const std::string& dtype) {
    return random_node(shape_argument(shape), dtype_from_name(dtype), RandomDistribution::Normal);
  });
  module.def("reduce", [](const NodePtr& input, const std::string& op, py::handle dims, bool keepdim) {
    return reduce(input, reduce_op_from_name(op), dims_argument(dims, int(input->shape.size())), keepdim);
  }, py::arg("x"), py::arg("op"), py::arg("dims") = py::none(), py::arg("keepdim") = false);
  // The view builders return Vars that alias their input (meta_ops/var.h): writes through either are seen by both.
  module.def("broadcast", [](const VarPtr& input, py::handle shape, py::handle dims) {
    Shape target = shape_argument(shape);
    std::vector<int64_t> new_dims = dims.is_none() ? std::vector<int64_t>{} : dims_argument(dims, 0);
    return Var::view_of(input, [&](const NodePtr& node) { return broadcast(node, target, new_dims); });
  }, py::arg("x"), py::arg("shape"), py::arg("dims") = py::none());
  module.def("broadcast_to", [](const VarPtr& input, py::handle shape) {
    Shape target = shape_argument(shape);
    return Var::view_of(input, [&](const NodePtr& node) { return broadcast_to(node, target); });
  });
  module.def("permute", [](const VarPtr& input, const std::vector<int64_t>& order) {
    return Var::view_of(input, [&](const NodePtr& node) { return permute(node, order); });
  });
  module.def("transpose", [](const VarPtr& input, int64_t first, int64_t second) {
    return Var::view_of(input, [&](const NodePtr& node) { return transpose(node, first, second); });
  });
  // reshape: a view when the layout allows (PyTorch's rule), else a copy; view_reshape (x.view): a view or an error.
  module.def("reshape", [](const VarPtr& input, py::handle shape) { return Var::reshaped(input, shape_argument(shape), false); });
  module.def("view_reshape", [](const VarPtr& input, py::handle shape) { return Var::reshaped(input, shape_argument(shape), true); });
  module.def("transposed_matrix_source", &transposed_matrix_source);
  module.def("view", [](const VarPtr& input, py::handle shape, const std::vector<std::tuple<int, int64_t, int64_t>>& dims) {
    ViewStep step{ViewStep::Kind::Affine, shape_argument(shape), {}};
    for (const auto& dim : dims) step.dimensions.push_back({std::get<0>(dim), std::get<1>(dim), std::get<2>(dim)});
    return Var::view_of(input, [&](const NodePtr& node) { return view(node, step.shape, step.dimensions); });
  });
  // x[key] for a key of integers and slices: the view (meta_ops/basic_index.h), or None for any other key, which
  // metajit.ops.indexing parses in Python (and raises its errors). Converting the key is all that happens here.
  module.def("basic_view", [](const VarPtr& input, py::handle key) -> py::object {
    PyObject* whole = key.ptr();
    bool is_tuple = PyTuple_Check(whole);
    size_t count = is_tuple ? size_t(PyTuple_GET_SIZE(whole)) : 1;
    std::vector<BasicIndexItem> items(count);
    for (size_t position = 0; position < count; ++position) {
      PyObject* item = is_tuple ? PyTuple_GET_ITEM(whole, Py_ssize_t(position)) : whole;
      BasicIndexItem& converted = items[position];
      if (PyLong_CheckExact(item)) {  // bool is no exact int: it stays with the general parse
        int overflow = 0;
        converted.index = PyLong_AsLongLongAndOverflow(item, &overflow);
        if (overflow) return py::none();
      } else if (PySlice_Check(item)) {
        Py_ssize_t start, stop, step;
        if (PySlice_Unpack(item, &start, &stop, &step) < 0) {
          PyErr_Clear();
          return py::none();
        }
        converted = {BasicIndexItem::Kind::Slice, 0, int64_t(start), int64_t(stop), int64_t(step)};
      } else {
        return py::none();
      }
    }
    std::optional<ViewStep> view = basic_index_view(input->node()->shape, items);
    if (!view) return py::none();
    return py::cast(Var::view_of(input, std::move(*view)));
  });
  module.def("reindex", [](const NodePtr& input, py::handle shape, const std::vector<std::string>& indexes,
                           double overflow_value, const std::vector<std::string>& conditions,
                           const std::vector<NodePtr>& extras) {
    return reindex(input, shape_argument(shape), indexes, overflow_value, conditions, extras);
  });
  module.def("reindex_reduce", [](const NodePtr& input, const std::string& op, py::handle shape,
                                  const std::vector<std::string>& indexes, const std::vector<std::string>& conditions,
                                  const std::vector<NodePtr>& extras) {
    return reindex_reduce(input, reduce_op_from_name(op), shape_argument(shape), indexes, conditions, extras);
  });
  module.def("grad", [](const NodePtr& output, const std::vector<NodePtr>& inputs, const NodePtr& output_grad) {
    return gradients(output, inputs, output_grad);
  }, py::arg("output"), py::arg("inputs"), py::arg("output_grad") = nullptr);
  module.def("gradient_leaves", &gradient_leaves);
  module.def("mark_backward_taken", &mark_backward_taken);
  module.def("is_grad_enabled", &grad_enabled);
  module.def("set_grad_enabled", &set_grad_enabled);
  module.def("sync_all", [](const std::vector<NodePtr>& nodes) { sync_nodes(nodes); });
  module.def("plan", [](const std::vector<NodePtr>& nodes) {
    py::list kernels;
    for (const KernelDescription& kernel : describe_plan(nodes)) {
      py::dict entry;
      entry["key"] = kernel.key;
      entry["source"] = kernel.header + kernel.body;
      entry["ops"] = kernel.ops;
      entry["cached_in_memory"] = kernel.cached_in_memory;
      entry["cached"] = kernel.cached;
      entry["kind"] = kernel.kind;
      entry["header"] = kernel.header;
      entry["body"] = kernel.body;
      entry["library"] = kernel.library;
      entry["contraction"] = kernel.contraction;
      entry["stored_operands"] = kernel.stored_operands;
      entry["buffer_offsets"] = kernel.buffer_offsets;
      entry["ir"] = kernel.ir;
      kernels.append(entry);
    }
    return kernels;
  }, "The kernels that computing these Vars would launch, without running anything.");
  module.def("set_profiling", [](bool enabled) { set_kernel_profiling(enabled); });
  module.def("reset_profile", [] { reset_kernel_profile(); });
  module.def("profile", [] {
    py::list entries;
    for (const KernelProfile& entry : kernel_profile()) {
      py::dict item;
      item["name"] = entry.name;
      item["key"] = entry.key;
      item["launches"] = entry.launches;
      item["seconds"] = entry.seconds;
      item["peak_host_bytes"] = entry.peak_host_bytes;
      item["peak_device_bytes"] = entry.peak_device_bytes;
      entries.append(item);
    }
    return entries;
  }, "Per-kernel wall time collected while profiling was on, largest total first.");
  module.def(
      "profile_timeline",
      [] {
        py::list events;
        for (const ProfileEvent& event : kernel_timeline())
          events.append(py::make_tuple(event.name, event.start, event.seconds, event.host_bytes, event.device_bytes));
        return events;
      },
      "(name, start, seconds, host bytes, device bytes) per launch while profiling was on, in launch order.");
  module.def("stats", [] { return stats_snapshot(); });
  module.def("reset_stats", [] { reset_stats(); });
  module.def("gc", [] {
    drop_weight_copies();  // first: their buffers go back to the free lists released next
    release_cached_memory();
    release_cached_device_memory();
  });
  module.def("set_log_level",
             [](const std::string& level) { set_log_level(parse_log_level(level).value_or(LogLevel::Warning)); });
  module.def("thread_count", [] { return thread_count(); });
  module.def("library_lowering", [] { return library_lowering_enabled(); });
  module.def("multiple_outputs", [] { return sibling_kernels_enabled(); });
  module.def("set_multiple_outputs", [](bool enabled) { set_sibling_kernels_enabled(enabled); });
  module.def("set_library_lowering", [](bool enabled) { set_library_lowering_enabled(enabled); });
  module.def("conv_algorithm", [] { return std::string(convolution_algorithm_name(convolution_algorithm())); });
  module.def("set_conv_algorithm", [](const std::string& name) {
    auto algorithm = parse_convolution_algorithm(name);
    if (!algorithm)
      throw py::value_error("conv_algorithm must be 'auto', 'direct' or 'winograd', got '" + name + "'");
    set_convolution_algorithm(*algorithm);
  });
  module.def("set_thread_count", [](int count) { set_thread_count(count); });
  module.def("cache_dir", [] { return KernelCache::instance().directory(); });
  module.def("set_cache_dir", [](const std::string& directory) { KernelCache::instance().set_directory(directory); });
  module.def("clear_memory_cache", [] {
    KernelCache::instance().clear_memory();
    forget_cuda_kernels_in_memory();
  });
  module.def("_set_package_dir", [](const std::string& directory) { package_directory = directory; });
}
