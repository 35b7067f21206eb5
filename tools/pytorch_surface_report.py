"""Which of PyTorch's training-program names metajit has: a report for whoever extends the PyTorch surface.

For each public function and class of a curated list of PyTorch namespaces (torch, torch.nn,
torch.nn.functional, torch.nn.init, torch.nn.utils, torch.optim, torch.optim.lr_scheduler, torch.utils.data,
torch.linalg, and the methods of torch.Tensor) it says whether metajit's counterpart has the name ("present"),
declares it absent with a reason ("absent": metajit/_absent.py, an error that names it) or simply lacks it
("missing": a bare AttributeError). Families metajit leaves out as a whole (sparse, quantized, complex and named
tensors, distributed, backends other than CPU and CUDA, internal helpers) are skipped, not counted.

Needs PyTorch (a test-only dependency). Reads only; changes nothing.
    PYTHONPATH=python python tools/pytorch_surface_report.py            # counts per namespace
    PYTHONPATH=python python tools/pytorch_surface_report.py --missing  # and the missing names
    PYTHONPATH=python python tools/pytorch_surface_report.py --all      # every name with its status
"""
import argparse
import importlib
import inspect
import re
import sys

# (PyTorch namespace, metajit namespace, priority): "low" marks families training code calls rarely.
NAMESPACES = [
    ("torch", "metajit", "high"),
    ("torch.Tensor", "metajit.Var", "high"),
    ("torch.nn", "metajit.nn", "high"),
    ("torch.nn.functional", "metajit.nn.functional", "high"),
    ("torch.nn.init", "metajit.nn.init", "high"),
    ("torch.nn.utils", "metajit.nn.utils", "high"),
    ("torch.optim", "metajit.optim", "high"),
    ("torch.optim.lr_scheduler", "metajit.optim.lr_scheduler", "high"),
    ("torch.utils.data", "metajit.utils.data", "high"),
    ("torch.linalg", "metajit.linalg", "low"),
]

# Whole families skipped: metajit leaves them out as a whole (docs/pytorch_surface.md says so), so listing
# each of their hundreds of names would hide the names that matter.
SKIPPED_PATTERNS = [
    r"sparse", r"quantiz", r"^q_", r"qscheme", r"int_repr", r"^q?per_channel", r"fbgemm", r"mkldnn", r"cudnn",
    r"miopen", r"complex", r"conj", r"^real$", r"^imag$", r"view_as_real", r"view_as_complex", r"polar",
    r"^names?$", r"refine_names", r"rename", r"align_(to|as|tensors)", r"nested", r"padded_tensor", r"mps",
    r"xpu", r"hpu", r"ipu", r"vulkan", r"mtia", r"maia", r"_nnpack", r"storage", r"record_stream", r"^is_inference",
    r"distributed", r"^dsplit|^hsplit|^vsplit", r"^smm$|^sspaddmm$|^hspmm$", r"^to_(dense|mkldnn|sparse|padded)",
    r"dense_dim", r"coalesce", r"^indices$", r"^ccol|^crow|^col_indices|^row_indices", r"^values$", r"^sym_",
    r"^Sym", r"^is_nonzero$", r"^is_same_size$", r"^bitwise_left_shift|^bitwise_right_shift",
    r"^fake_quant", r"^choose_qparams", r"^dequantize", r"^segment_reduce", r"^conv_tbc", r"^cudnn", r"^batch_norm_",
    r"^native_", r"^embedding_renorm_", r"^_", r"^rnn_(tanh|relu)(_cell)?$", r"^(lstm|gru)(_cell)?$", r"^quantized_",
    r"^affine_grid_generator$", r"^constant_pad_nd$", r"^feature_(alpha_)?dropout_?$", r"^alpha_dropout_$",
    r"^slice_(inverse|scatter)$", r"^(select|diagonal|as_strided)_scatter$", r"(?<!index)_copy$", r"^resize", r"^set_$",
    r"^is_(set_to|shared|pinned|coalesced)$", r"^module_load$", r"^share_memory_$", r"^apply_$", r"^map2?_$",
    r"^new$", r"^dim_order$", r"^is_(vulkan|meta|quantized|sparse|sparse_csr|mkldnn|ipu|maia)$", r"^H$|^mH$",
    r"^itemsize$|^nbytes$", r"^layout$", r"^output_nr$", r"^retains_grad$", r"^ptr$", r"^untyped",
    r"^(adjoint|resolve_(conj|neg))$", r"^is_(neg|conj)$", r"^fix_$", r"(?i)storage", r"Type$",
    r"^has_torch_function", r"^handle_torch_function$", r"^boolean_dispatch$", r"^assert_int_or_pair$",
    r"^(Callable|DType|Optional|ScalingType|SwizzleType|LoggerBase|ParameterDict)$", r"^profiler_",
    r"^thread_safe_generator$", r"^fused_", r"^grid_sampler(_2d|_3d)?$", r"^(saddmm|dsmm|hsmm|spmm)$", r"^unsafe_",
    r"^factory_kwargs$", r"^norm_except_dim$", r"^frobenius_norm$", r"^symeig$",
]
SKIPPED_TORCH_TOP = {
    # torch.* names that are engine internals, not called by training programs.
    "Storage", "TypedStorage", "UntypedStorage", "AggregationType", "AliasDb", "Argument", "ArgumentSpec",
    "BenchmarkConfig", "BenchmarkExecutionStats", "Block", "BufferDict", "CallStack", "Capsule", "ClassType",
    "Code", "CompilationUnit", "CompleteArgumentSpec", "ConcreteModuleType", "ConcreteModuleTypeBuilder",
    "DeepCopyMemoTable", "DeserializationStorageContext", "DeviceObjType", "DictType", "DispatchKey",
    "DispatchKeySet", "EnumType", "ErrorReport", "Event", "ExcludeDispatchKeyGuard", "ExecutionPlan",
    "FatalError", "FileCheck", "FloatType", "FunctionSchema", "Future", "FutureType", "Gradient", "Graph",
    "GraphExecutorState", "IODescriptor", "InferredType", "IntType", "InterfaceType", "JITException",
    "ListType", "LiteScriptModule", "LockingLogger", "ModuleDict", "Node", "NoneType", "NoopLogger",
    "NumberType", "OperatorInfo", "OptionalType", "OutOfMemoryError", "PyObjectType", "PyTorchFileReader",
    "PyTorchFileWriter", "RRefType", "SUM", "ScriptClass", "ScriptClassFunction", "ScriptDict",
    "ScriptDictIterator", "ScriptDictKeyIterator", "ScriptFunction", "ScriptList", "ScriptListIterator",
    "ScriptMethod", "ScriptModule", "ScriptModuleSerializer", "ScriptObject", "ScriptObjectProperty",
    "SerializationStorageContext", "StaticModule", "StreamObjType", "StringType", "SymBoolType",
    "SymIntType", "TensorType", "ThroughputBenchmark", "TracingState", "TupleType", "Type", "UnionType",
    "Use", "Value", "AVG", "AcceleratorError", "DisableTorchFunction", "DisableTorchFunctionSubclass",
    "DispatchKeySetType", "Stream", "StreamContext", "Tag", "TensorSerializationType", "set_flush_denormal",
    "classproperty", "compiled_with_cxx11_abi", "get_file_path", "import_ir_module",
    "import_ir_module_from_buffer", "init_num_threads", "merge_type_from_type_comment",
    "parse_ir", "parse_schema", "parse_type_comment", "read_vitals", "set_vital", "unify_type_list",
    "vitals_enabled", "wait", "fork", "typename", "is_anomaly_enabled", "is_anomaly_check_nan_enabled",
    "is_autocast_available", "is_storage", "is_warn_always_enabled", "set_warn_always", "chunk_cat",
    "has_lapack", "has_mkl", "has_openmp", "has_spectral", "has_cuda", "has_cudnn", "has_mps", "has_mkldnn",
    "get_device_module", "from_dlpack", "from_file",
    "is_deterministic_algorithms_warn_only_enabled", "get_deterministic_debug_mode",
    "set_deterministic_debug_mode", "prepare_multiprocessing_environment",
    "while_loop", 
    "is_conj", "is_neg", "resolve_conj", "resolve_neg", "is_distributed", "sym_float", "sym_int",
    "sym_max", "sym_min", "sym_not", "sym_ite", "sym_sum", "sym_fresh_size", "is_storage",
    "ScriptModule", "SymInt", "SymFloat", "SymBool", "autocast_decrement_nesting", "autocast_increment_nesting",
    "clear_autocast_cache", "get_autocast_cpu_dtype", "get_autocast_dtype", "get_autocast_gpu_dtype",
    "get_autocast_ipu_dtype", "get_autocast_xla_dtype", "is_autocast_cache_enabled", "is_autocast_cpu_enabled",
    "is_autocast_enabled", "is_autocast_ipu_enabled", "is_autocast_xla_enabled", "set_autocast_cache_enabled",
    "set_autocast_cpu_dtype", "set_autocast_cpu_enabled", "set_autocast_dtype", "set_autocast_enabled",
    "set_autocast_gpu_dtype", "set_autocast_ipu_dtype", "set_autocast_ipu_enabled", "set_autocast_xla_dtype",
    "set_autocast_xla_enabled", "is_deterministic_algorithms_warn_only_enabled",
    "dtype", "layout", "memory_format", "qscheme",
    "e", "pi", "inf", "nan", "newaxis", "misc_ops", "library", "functional", "overrides",
    "return_types", "types", "version", "torch_version", "serialization", "storage", "random", "hub",
    "obj", "attr", "annotations", "builtins", "abs_", "sym_constrain_range", "sym_constrain_range_for_size",
}


ABSENT_NAMESPACE = object()


def skipped(name):
    return any(re.search(pattern, name) for pattern in SKIPPED_PATTERNS)


def torch_names(torch_namespace):
    """The public function and class names of one PyTorch namespace (submodules and constants left out)."""
    import torch
    if torch_namespace == "torch.Tensor":
        names = [name for name in dir(torch.Tensor) if not name.startswith("_")]
        return sorted(name for name in names if not skipped(name))
    module = importlib.import_module(torch_namespace)
    exported = getattr(module, "__all__", None)
    names = exported if exported is not None and torch_namespace != "torch" else dir(module)
    result = []
    for name in names:
        if name.startswith("_") or skipped(name):
            continue
        if torch_namespace == "torch" and name in SKIPPED_TORCH_TOP:
            continue
        value = getattr(module, name, None)
        if value is None or inspect.ismodule(value) or not callable(value):
            continue
        if torch_namespace == "torch.nn.functional" and value is torch.Tensor:
            continue  # the functional module's import of Tensor, not a function
        if torch_namespace == "torch" and isinstance(value, type) and issubclass(value, torch.Tensor):
            continue  # FloatTensor and friends: checked by tests/python/test_torch_surface.py
        if torch_namespace == "torch" and name.endswith("_") and not name.endswith("__"):
            continue  # torch.relu_ and other in-place functions: the Tensor methods are the ported spelling
        result.append(name)
    return sorted(set(result))


def metajit_namespace(metajit_name):
    import metajit
    if metajit_name == "metajit.Var":
        return metajit.zeros(2, 2)  # an instance: Var.__getattr__ (the absent-method reasons) is per instance
    try:
        return importlib.import_module(metajit_name)
    except ImportError:
        # A namespace left out as a whole (one _absent.py gives a reason for, such as metajit.onnx): every name
        # in it counts as declared absent.
        from metajit._absent import absent_reason
        parent, _, name = metajit_name.rpartition(".")
        return ABSENT_NAMESPACE if absent_reason(name, parent) else None


def status(namespace, name):
    """'present', 'absent' (an error that says it is left out on purpose) or 'missing'."""
    from metajit._absent import AbsentNameError
    if namespace is None:
        return "missing"
    if namespace is ABSENT_NAMESPACE:
        return "absent"
    try:
        getattr(namespace, name)
        return "present"
    except AbsentNameError as error:
        return "absent" if error.declared else "missing"
    except NotImplementedError:
        return "absent"
    except AttributeError:
        return "missing"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--missing", action="store_true", help="list the missing names of each namespace")
    parser.add_argument("--all", action="store_true", help="list every name with its status")
    arguments = parser.parse_args()
    totals = {"present": 0, "absent": 0, "missing": 0}
    print(f"{'PyTorch namespace':28} {'metajit namespace':28} {'present':>8} {'absent':>7} {'missing':>8}")
    details = []
    for torch_namespace, metajit_name, priority in NAMESPACES:
        namespace = metajit_namespace(metajit_name)
        counts = {"present": 0, "absent": 0, "missing": 0}
        rows = []
        for name in torch_names(torch_namespace):
            result = status(namespace, name)
            counts[result] += 1
            rows.append((name, result))
        if priority == "high":
            for key in totals:
                totals[key] += counts[key]
        label = torch_namespace + (" (low priority)" if priority == "low" else "")
        print(f"{label:28} {metajit_name:28} {counts['present']:8} {counts['absent']:7} {counts['missing']:8}")
        details.append((torch_namespace, rows))
    print(f"{'total (high priority)':57} {totals['present']:8} {totals['absent']:7} {totals['missing']:8}")
    for torch_namespace, rows in details:
        if arguments.all:
            print(f"\n{torch_namespace}:")
            for name, result in rows:
                print(f"  {result:8} {name}")
        elif arguments.missing:
            missing = [name for name, result in rows if result == "missing"]
            if missing:
                print(f"\n{torch_namespace} missing ({len(missing)}):")
                print("  " + " ".join(missing))
    return 0


if __name__ == "__main__":
    sys.exit(main())
