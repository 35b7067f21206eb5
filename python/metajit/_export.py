"""mj.export, a trace's dump() and mj.load_exported: a traced function written as one artifact (".mjm") that the
C++ runtime (libmetajit_runtime, runtime/include/metajit/runtime.h) runs with no Python and no compiler.

The artifact holds the kept plan, the compiled kernels it launches (only those), the contractions its oneDNN
calls were made for, the weights (the values of the Vars the function read, as they are at export), and the
names, dtypes and shapes of its inputs and outputs; it is checksummed and versioned. See docs/export.md."""
import collections as _collections
import inspect as _inspect
import os as _os

from . import _core

ArtifactError = _core.ArtifactError  # a file that is not a model, truncated, corrupt, or of another version

ExportReport = _collections.namedtuple(
    "ExportReport", "path bytes kernels kernel_objects library_calls weights weight_bytes object_bytes")
ExportReport.__doc__ = """What mj.export wrote: the artifact's size in bytes, the generated kernels a run launches
(kernels) and the distinct compiled objects carried (kernel_objects, with object_bytes), the oneDNN calls, and the
weights (count and bytes)."""

TensorInfo = _collections.namedtuple("TensorInfo", "name dtype shape")

_VERSION = "0.1.0"


def _write(traced, path, input_names, output_names):
    path = _os.fspath(path)
    report = _core.export_traced(traced, list(input_names or []), list(output_names or []),
                                 f"metajit {_VERSION}", path)
    # Loaded back once, as the runtime will: every kernel links with the runtime's own linker and every library
    # call is made, so a file that would not run is never left behind looking fine.
    try:
        _core.RuntimeModel.load(path)
    except Exception as error:
        _os.remove(path)
        raise ArtifactError(f"mj.export: the artifact would not load in the C++ runtime, so it was not kept: "
                            f"{error}") from error
    return ExportReport(**report)


def _parameter_names(function, count):
    """The names of `function`'s first `count` positional parameters, when it has that many."""
    try:
        signature = _inspect.signature(function)
    except (TypeError, ValueError):
        return []
    names = [parameter.name for parameter in signature.parameters.values()
             if parameter.kind in (parameter.POSITIONAL_ONLY, parameter.POSITIONAL_OR_KEYWORD)]
    return names[:count] if len(names) >= count else []


def export(function, example_inputs, path, *, input_names=None, output_names=None):
    """Traces ``function`` (a Module or any function of Vars) on ``example_inputs`` (a Var or a tuple of them)
    under ``mj.no_grad()`` and writes the artifact to ``path``; returns an :class:`ExportReport`.

    The model's weights are the values the function reads now. Put a model in ``eval()`` mode first: an exported
    model may not draw random numbers (dropout in training mode) or update Vars (batch norm's running
    statistics), and is refused with a message naming the line when it does. Input names default to the
    function's parameter names, output names to ``output0``, ``output1``, ..."""
    from . import Var, array, no_grad
    from .jit import trace
    if not isinstance(example_inputs, (tuple, list)):
        example_inputs = (example_inputs,)
    inputs = tuple(value if isinstance(value, Var) else array(value) for value in example_inputs)
    if input_names is None:
        target = getattr(function, "forward", function)
        input_names = _parameter_names(target, len(inputs))

    def call(*arguments):
        return function(*arguments)

    traced = trace(call)
    with no_grad():
        traced(*inputs)
    return traced.dump(path, input_names=input_names, output_names=output_names)


class ExportedModel:
    """An exported model loaded into the C++ runtime (``mj.load_exported(path)``): calling it runs the artifact
    exactly as a C++ program would, on Vars or numpy arrays of the exported dtypes and shapes."""

    def __init__(self, path):
        self.path = _os.fspath(path)
        self._model = _core.RuntimeModel.load(self.path)

    @property
    def inputs(self):
        """TensorInfo(name, dtype, shape) per input, in call order."""
        return [TensorInfo(*entry) for entry in self._model.inputs]

    @property
    def outputs(self):
        return [TensorInfo(*entry) for entry in self._model.outputs]

    @property
    def kernels(self):
        """Generated kernels a run launches."""
        return self._model.kernels

    @property
    def library_calls(self):
        return self._model.library_calls

    @property
    def weight_bytes(self):
        return self._model.weight_bytes

    @property
    def producer(self):
        return self._model.producer

    def __call__(self, *inputs):
        from . import Var, array
        values = [value if isinstance(value, Var) else array(value) for value in inputs]
        outputs = self._model.run(values)
        return outputs[0] if len(outputs) == 1 else tuple(outputs)

    def __repr__(self):
        def describe(tensors):
            return ", ".join(f"{info.name}: {info.dtype}{list(info.shape)}" for info in tensors)
        return (f"ExportedModel({self.path!r}, inputs=({describe(self.inputs)}), outputs=({describe(self.outputs)}), "
                f"kernels={self.kernels}, library_calls={self.library_calls})")


def load_exported(path):
    """Loads an artifact written by mj.export or a trace's dump() into the C++ runtime; raises
    ``mj.ArtifactError`` (a ValueError) for a file that is not one, is truncated, corrupt or modified, or
    was written by another format version."""
    return ExportedModel(path)
