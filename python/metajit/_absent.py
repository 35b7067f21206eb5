"""The PyTorch names metajit deliberately does not have, each with the reason and what to use instead, so a
ported program stops at its own line with a message instead of an AttributeError deep inside
(docs/pytorch_surface.md is the list for people; tools/pytorch_surface_report.py counts what is present, absent
and missing). Only messages live here: nothing is implemented. Each namespace's module __getattr__ (and
Var.__getattr__) calls absent_name; the error is an AttributeError, so hasattr() and feature checks still work,
and a NotImplementedError, since the name is a PyTorch feature that is not implemented.
"""

_DOCS = "docs/pytorch_surface.md lists the PyTorch names metajit has"

# Reasons shared by many names.
_LINEAR_ALGEBRA = "matrix decompositions and solvers are not implemented (they need LAPACK-style kernels)"
_SPECIAL_FUNCTION = "special functions (the gamma family, erfinv, Bessel functions) are not implemented"
_INTEGER_THEORY = "integer number theory functions are not implemented"
_DATA_DEPENDENT_SHAPE = "its result's shape depends on the values, which metajit's lazy graphs cannot express"
_STRIDED = "strided views with arbitrary strides are not exposed; use reshape, narrow, unfold or reindex"
_FOURIER = "Fourier transforms (torch.fft) are not provided"
_RANDOM_DISTRIBUTION = "only uniform, normal, bernoulli and multinomial sampling exist (mj.rand, mj.randn, ...)"
_DEPRECATED = "deprecated in PyTorch; use its replacement"
_TENSOR_SUBCLASS = "tensor subclassing and dispatch overrides (__torch_function__) are not supported"

_REASONS = {
    "metajit": {
        "onnx": "metajit does not export ONNX; deploy with kernel bundles (docs/deployment.md)",
        "jit": "torch.jit (TorchScript) has no counterpart; metajit compiles every call already, and mj.trace is "
               "planned",
        "export": "torch.export has no counterpart; deploy with kernel bundles (docs/deployment.md)",
        "fx": "torch.fx graph capture has no counterpart; mj.inspect shows metajit's graphs and kernels",
        "hub": "torch.hub (downloading models) is not provided; mj.models has the model definitions, and mj.load "
               "reads PyTorch checkpoints",
        "distributions": "torch.distributions is not provided",
        "fft": "torch.fft (Fourier transforms) is not provided",
        "special": "torch.special is not provided; mj.erf, mj.sigmoid, mj.log1p, ... are top-level functions",
        "sparse": "sparse tensors are not supported; metajit tensors are dense",
        "quantization": "quantization is not supported",
        "ao": "torch.ao (quantization, pruning) is not supported",
        "multiprocessing": "torch.multiprocessing is not provided; use Python's multiprocessing (DataLoader workers "
                           "are built in)",
        "nested": "nested (ragged) tensors are not supported",
        "mps": "Apple's MPS backend does not exist here; metajit runs on 'cpu' and 'cuda'",
        "xpu": "Intel's XPU backend does not exist here; metajit runs on 'cpu' and 'cuda'",
        "bfloat16": "bfloat16 is not a metajit dtype yet; use float16 or float32",
        "complex64": "complex dtypes are not supported",
        "complex128": "complex dtypes are not supported",
        "cfloat": "complex dtypes are not supported",
        "cdouble": "complex dtypes are not supported",
        "int16": "int16 is not a metajit dtype; use int32",
        "short": "int16 (torch.short) is not a metajit dtype; use int32",
        "uint16": "uint16 is not a metajit dtype; use int32",
        "uint32": "uint32 is not a metajit dtype; use int64",
        "uint64": "uint64 is not a metajit dtype; use int64",
        "float8_e4m3fn": "float8 dtypes are not supported",
        "float8_e5m2": "float8 dtypes are not supported",
        "sparse_coo": "sparse tensors are not supported",
        "channels_last": "memory formats are not exposed; metajit chooses layouts for library calls itself",
        "ShortTensor": "int16 (torch.short) is not a metajit dtype; use mj.IntTensor",
        "BFloat16Tensor": "bfloat16 is not a metajit dtype yet; use mj.HalfTensor or mj.FloatTensor",
        "GradScaler": "torch.GradScaler is spelled mj.amp.GradScaler (PyTorch's torch.amp.GradScaler)",
        # Linear algebra
        **dict.fromkeys(["eig", "geqrf", "lstsq", "lu", "lu_solve", "lu_unpack", "matrix_exp", "matrix_power",
                         "matrix_rank", "nuclear_norm", "orgqr", "ormqr", "pinverse", "qr", "solve", "svd",
                         "svd_lowrank", "pca_lowrank", "lobpcg"], _LINEAR_ALGEBRA),
        # Special functions
        **dict.fromkeys(["digamma", "erfinv", "i0", "igamma", "igammac", "lgamma", "mvlgamma", "polygamma"],
                        _SPECIAL_FUNCTION),
        **dict.fromkeys(["gcd", "lcm"], _INTEGER_THEORY),
        **dict.fromkeys(["frexp", "ldexp", "nextafter"], "floating-point bit manipulation functions are not "
                                                        "implemented"),
        # Shapes that depend on values
        **dict.fromkeys(["bincount", "histogram", "histogramdd", "unique_consecutive", "nonzero_static"],
                        _DATA_DEPENDENT_SHAPE + "; histc counts into a fixed number of bins"),
        **dict.fromkeys(["as_strided", "empty_strided", "empty_permuted"], _STRIDED),
        **dict.fromkeys(["stft", "istft", "bartlett_window", "blackman_window", "hamming_window", "hann_window",
                         "kaiser_window"], _FOURIER + "; signal-processing windows and transforms are left out with "
                                                      "it"),
        **dict.fromkeys(["binomial", "poisson", "randint_like"], _RANDOM_DISTRIBUTION),
        "initial_seed": "the seed is not kept; mj.manual_seed sets it",
        "angle": "complex numbers are not supported (angle of a real number is 0 or pi: use mj.where(x < 0, pi, 0))",
        "mode": "mode (most frequent value) is not implemented; mj.unique gives the values on the host",
        "nanmedian": "nanmedian is not implemented; mj.median after masking NaNs with mj.nan_to_num",
        "nanquantile": "nanquantile is not implemented; mj.quantile after removing NaNs",
        "index_reduce": "index_reduce is not implemented; mj.scatter_reduce covers the same reductions",
        "put": "put (writing at flat indices) is not implemented; use x.reshape(-1).index_copy(0, index, source)",
        **dict.fromkeys(["cov", "corrcoef"], "covariance matrices are not implemented; compute them with "
                                             "(x - x.mean(1, keepdim=True)) @ ... .T"),
        **dict.fromkeys(["trapezoid", "trapz", "cumulative_trapezoid", "gradient", "vander"],
                        "numerical integration, differentiation and Vandermonde helpers are not implemented"),
        "renorm": "renorm is not implemented; scale rows by mj.norm yourself",
        "convolution": "the generic torch.convolution entry point is not exposed; use conv1d/2d/3d or "
                       "conv_transpose1d/2d/3d",
        "max_pool1d_with_indices": "use max_pool1d(..., return_indices=True)",
        "cond": "control-flow operators (torch.cond) are not provided; Python control flow records each branch",
        "vmap": "torch.vmap is not provided; write the batch dimension explicitly",
        **dict.fromkeys(["asarray", "frombuffer", "to_dlpack", "from_dlpack"],
                        "zero-copy tensor views of external memory are not supported; use mj.tensor (copies)"),
        **dict.fromkeys(["can_cast", "promote_types", "result_type"],
                        "dtype-promotion queries are not exposed; operations follow PyTorch's promotion rules"),
        **dict.fromkeys(["set_default_device", "get_default_device", "get_device"],
                        "there is no default-device setting; where kernels run is mj.flags.use_cuda "
                        "(docs/cuda.md)"),
        "set_default_tensor_type": _DEPRECATED + " (set_default_dtype, which accepts float32 only)",
        "set_printoptions": "print options are not configurable; printing uses numpy's (np.set_printoptions)",
        "set_anomaly_enabled": "anomaly detection is not provided; METAJIT_CHECK_NAN finds the first non-finite "
                               "value (docs/errors.md)",
        "fill": "torch.fill is not provided; use x.fill_(value) or mj.full_like",
        "is_signed": "is_signed is not provided; compare x.dtype with the unsigned dtype 'uint8'",
        "isin": "isin is not implemented; compare with (x.unsqueeze(-1) == values).any(-1)",
        "range": _DEPRECATED + " (mj.arange)",
        "scalar_tensor": "use mj.tensor(value)",
        "logspace": "logspace is not implemented; use base ** mj.linspace(start, end, steps)",
        "rsub": "rsub is not provided; write other - alpha * input",
        "hash_tensor": "tensor hashing is not provided",
        "unravel_index": "unravel_index is not implemented; compute (index // stride) % size per dim",
    },
    "metajit.Var": {
        "retain_grad": "gradients of non-leaf Vars are not kept; use mj.grad(output, [var]) or "
                       "mj.autograd.grad to get them",
        "register_hook": "gradient hooks are not supported; use mj.Function for a custom gradient",
        "grad_fn": "the autograd graph is not exposed as grad_fn objects; x.is_leaf and x.requires_grad are",
        "data_ptr": "raw pointers are not exposed; values live in the lazy graph until they are computed",
        "storage": "storages are not exposed; x.numpy() gives the values",
        "untyped_storage": "storages are not exposed; x.numpy() gives the values",
        "to_sparse": "sparse tensors are not supported",
        "backward_hooks": "gradient hooks are not supported",
        **{name: _LINEAR_ALGEBRA for name in ["eig", "geqrf", "lstsq", "lu", "lu_solve", "matrix_exp",
                                              "matrix_power", "orgqr", "ormqr", "pinverse", "qr", "solve", "svd",
                                              "symeig"]},
        **{name: _SPECIAL_FUNCTION for name in ["digamma", "digamma_", "erfinv", "erfinv_", "i0", "i0_", "igamma",
                                                "igamma_", "igammac", "igammac_", "lgamma", "lgamma_", "mvlgamma",
                                                "mvlgamma_", "polygamma", "polygamma_"]},
        **{name: _INTEGER_THEORY for name in ["gcd", "gcd_", "lcm", "lcm_"]},
        **dict.fromkeys(["frexp", "ldexp", "ldexp_", "nextafter", "nextafter_"],
                        "floating-point bit manipulation functions are not implemented"),
        **dict.fromkeys(["bincount", "histogram", "unique_consecutive", "nonzero_static"], _DATA_DEPENDENT_SHAPE),
        **dict.fromkeys(["as_strided", "as_strided_", "new_empty_strided"], _STRIDED),
        **dict.fromkeys(["stft", "istft"], _FOURIER),
        **dict.fromkeys(["cauchy_", "exponential_", "geometric_", "log_normal_", "random_"], _RANDOM_DISTRIBUTION),
        **dict.fromkeys(["bernoulli", "bernoulli_"], "use mj.bernoulli(x) (the function) or (mj.rand_like(x) < p)"),
        **dict.fromkeys(["squeeze_", "unsqueeze_", "t_", "transpose_", "swapaxes_", "swapdims_"],
                        "in-place shape changes are not supported; use the out-of-place method (x = x.squeeze())"),
        **dict.fromkeys(["bfloat16", "cfloat", "cdouble", "chalf", "short"],
                        "the dtype is not a metajit dtype (bfloat16, complex and int16 are left out)"),
        "char": "int8 casts are spelled x.to('int8') or x.type(mj.CharTensor)",
        "angle": "complex numbers are not supported",
        "mode": "mode (most frequent value) is not implemented",
        "nanmedian": "nanmedian is not implemented; median after nan_to_num",
        "nanquantile": "nanquantile is not implemented",
        **dict.fromkeys(["index_reduce", "index_reduce_"], "use scatter_reduce"),
        **dict.fromkeys(["put", "put_"], "use x.reshape(-1).index_copy(0, index, source)"),
        **dict.fromkeys(["cov", "corrcoef"], "covariance matrices are not implemented"),
        **dict.fromkeys(["renorm", "renorm_"], "renorm is not implemented; scale rows by mj.norm yourself"),
        "fill_diagonal_": "fill_diagonal_ is not implemented; use mj.where(mj.eye(n, m) == 1, value, x)",
        "sum_to_size": "sum_to_size is not implemented; sum over the broadcast dims with keepdim=True",
        "index": "Tensor.index is an internal dispatcher entry point; index with x[...]",
        **dict.fromkeys(["const_data_ptr", "grad_dtype", "hash_tensor", "is_xla", "volatile", "reinforce",
                         "as_subclass"], "engine internals and legacy attributes are not exposed"),
        "is_cpu": "use x.device.type == 'cpu'",
        "is_signed": "compare x.dtype with 'uint8' and 'bool'",
        "register_post_accumulate_grad_hook": "gradient hooks are not supported; read p.grad after backward",
    },
    "metajit.linalg": {
        **dict.fromkeys(["cholesky_ex", "inv_ex", "solve_ex", "ldl_factor", "ldl_factor_ex", "ldl_solve", "lu",
                         "lu_factor", "lu_factor_ex", "lu_solve", "qr", "svd", "svdvals", "eig", "eigh", "eigvals",
                         "eigvalsh", "householder_product", "matrix_exp", "matrix_power", "matrix_rank", "pinv",
                         "cond", "tensorinv", "tensorsolve"],
                        "this decomposition is not implemented; mj.linalg has solve, solve_triangular, inv, det, "
                        "slogdet, cholesky and lstsq"),
        **dict.fromkeys(["norm", "vector_norm", "matrix_norm"], "use mj.norm(x, p, dim, keepdim)"),
        "multi_dot": "use mj.chain_matmul(*matrices)",
        "vecdot": "use (x * y).sum(dim)",
        "diagonal": "use mj.diagonal(A, offset, dim1=-2, dim2=-1)",
        "vander": "Vandermonde matrices are not implemented",
    },
    "metajit.nn": {
        "AdaptiveLogSoftmaxWithLoss": "adaptive softmax is not implemented; use Linear + CrossEntropyLoss",
        "Buffer": "nn.Buffer is not provided; use module.register_buffer(name, tensor)",
        "Container": _DEPRECATED + " (nn.Module, nn.Sequential)",
        "CrossMapLRN2d": "use nn.LocalResponseNorm",
        **dict.fromkeys(["LinearCrossEntropyLoss", "LinearCrossEntropyOptions"],
                        "the fused linear + cross-entropy loss is not implemented; use Linear and CrossEntropyLoss"),
        **dict.fromkeys(["RNNBase", "RNNCellBase"], "the recurrent layers' base classes are not exposed; subclass "
                                                    "nn.Module or use nn.RNN / LSTM / GRU"),
        **dict.fromkeys(["UninitializedParameter", "UninitializedBuffer"],
                        "lazy layers hold no parameters until their first forward instead"),
    },
    "metajit.nn.functional": {
        **dict.fromkeys(["max_pool1d_with_indices", "max_pool2d_with_indices", "max_pool3d_with_indices"],
                        "use max_pool*d(..., return_indices=True)"),
        **dict.fromkeys(["adaptive_max_pool1d_with_indices", "adaptive_max_pool2d_with_indices",
                         "adaptive_max_pool3d_with_indices"], "use adaptive_max_pool*d(..., return_indices=True)"),
        **dict.fromkeys(["fractional_max_pool2d_with_indices", "fractional_max_pool3d_with_indices"],
                        "use fractional_max_pool*d(..., return_indices=True)"),
        **dict.fromkeys(["grouped_mm", "scaled_grouped_mm", "scaled_mm"],
                        "scaled and grouped (float8 / mixture-of-experts) matrix products are not implemented"),
        "linear_cross_entropy": "the fused linear + cross-entropy loss is not implemented; use linear and "
                                "cross_entropy",
        "multi_head_attention_forward": "use nn.MultiheadAttention or F.scaled_dot_product_attention",
    },
    "metajit.nn.utils": {
        **dict.fromkeys(["weight_norm", "remove_weight_norm", "spectral_norm", "remove_spectral_norm",
                         "parametrize", "parametrizations"],
                        "reparametrisations are not implemented; compute the weight in forward"),
        "prune": "pruning is not implemented",
        "stateless": "functional calls with substituted parameters are not implemented",
        "skip_init": "not provided; construct the module and overwrite its parameters",
        **dict.fromkeys(["fuse_conv_bn_eval", "fuse_conv_bn_weights", "fuse_linear_bn_eval",
                         "fuse_linear_bn_weights", "fusion"],
                        "inference-time fusion helpers are not implemented; metajit fuses kernels itself"),
        **dict.fromkeys(["convert_conv2d_weight_memory_format", "convert_conv3d_weight_memory_format",
                         "memory_format"],
                        "memory formats are not exposed; metajit chooses layouts for library calls itself"),
    },
    "metajit.nn.utils.rnn": {
        **dict.fromkeys(["PackedSequence", "pack_padded_sequence", "pad_packed_sequence", "pack_sequence",
                         "unpack_sequence", "invert_permutation"],
                        "metajit's recurrent layers take padded (L, N, H) tensors, not PackedSequence; pad with "
                        "pad_sequence and pass the padded batch (masking the padded steps in the loss)"),
    },
    "metajit.optim": {
        "SparseAdam": "sparse tensors are not supported; use Adam",
        "Adafactor": "Adafactor is not implemented yet; use AdamW",
        "Muon": "Muon is not implemented yet; use AdamW",
        "swap_in_optimizer_params_and_state": "an internal PyTorch helper; not provided",
    },
    "metajit.utils.data": {
        **dict.fromkeys(["DFIterDataPipe", "DataChunk", "IterDataPipe", "MapDataPipe", "argument_validation",
                         "functional_datapipe", "guaranteed_datapipes_determinism", "non_deterministic",
                         "runtime_validation", "runtime_validation_disabled"],
                        "DataPipes (deprecated in PyTorch) are not provided; use Dataset and IterableDataset"),
    },
}


class AbsentNameError(AttributeError, NotImplementedError):
    """A PyTorch name metajit does not have. An AttributeError, so hasattr() and feature checks still work.
    `declared` is True when the name is left out on purpose (it has a reason here)."""

    def __init__(self, message, declared=False):
        super().__init__(message)
        self.declared = declared


class AbsentImportError(ImportError, NotImplementedError):
    """The same error for `from metajit.nn import SyncBatchNorm`: Python turns an AttributeError raised there into a
    bare "cannot import name", dropping the reason, so an import gets this ImportError instead."""


def _called_by_from_import(depth):
    """Whether the frame `depth` levels above the caller is executing `from module import name` (CPython's
    IMPORT_FROM instruction), rather than an attribute read or hasattr()."""
    import dis
    import sys
    try:
        frame = sys._getframe(depth + 1)
    except ValueError:
        return False
    code = frame.f_code.co_code
    return 0 <= frame.f_lasti < len(code) and code[frame.f_lasti] == dis.opmap.get("IMPORT_FROM")


def absent_reason(name, namespace="metajit"):
    """Why `namespace`.`name` is left out, or None when it is not a declared absent name."""
    return _REASONS.get(namespace, {}).get(name)


def absent_name(name, namespace="metajit", torch_namespace="torch"):
    """The error for `namespace`.`name`: the reason when the name is a known PyTorch feature left out, else a
    plain missing-attribute message that points at the list of supported names."""
    if name.startswith("__"):
        return AttributeError(f"module {namespace!r} has no attribute {name!r}")
    reason = absent_reason(name, namespace)
    if reason:
        error = AbsentNameError(f"{namespace}.{name} (PyTorch's {torch_namespace}.{name}) is not available: {reason}",
                                declared=True)
    else:
        error = AbsentNameError(f"module {namespace!r} has no attribute {name!r}: {torch_namespace}.{name} is not "
                                f"available ({_DOCS})")
    # Frames: this function, the namespace's module __getattr__, then the code reading the name.
    if _called_by_from_import(2):
        import_error = AbsentImportError(str(error), name=name)
        import_error.declared = error.declared
        return import_error
    return error


def absent_method(name):
    """The error for a Tensor method a Var lacks (Var.__getattr__): its reason when it is left out on purpose."""
    reason = absent_reason(name, "metajit.Var")
    if reason:
        return AbsentNameError(f"metajit.Var has no '{name}' (PyTorch's Tensor.{name}): {reason}", declared=True)
    return AttributeError(f"'metajit.Var' object has no attribute '{name}'")
