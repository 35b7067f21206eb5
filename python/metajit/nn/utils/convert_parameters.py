"""parameters_to_vector / vector_to_parameters: all parameters as one flat Var and back, as PyTorch's.

vector_to_parameters rebinds each parameter's values (param.data = ...) so the parameters stay the same leaf
objects an optimizer holds; it must not create new parameters."""
from ..._core import Var

__all__ = ["parameters_to_vector", "vector_to_parameters"]


def parameters_to_vector(parameters):
    """One 1-D Var: every parameter flattened, concatenated in order (differentiable, like PyTorch's view/cat)."""
    from ...ops import cat
    if isinstance(parameters, Var):
        parameters = [parameters]
    flattened = [parameter.reshape([-1]) for parameter in parameters]
    if not flattened:
        raise RuntimeError("parameters_to_vector: expected at least one parameter")
    return cat(flattened, 0)


def vector_to_parameters(vec, parameters):
    """Copies consecutive slices of the 1-D `vec` into the parameters, in order (each parameter's number of
    elements, reshaped to its shape)."""
    from ... import no_grad
    if not isinstance(vec, Var):
        raise TypeError(f"expected a metajit Var, but got: {type(vec).__name__}")
    if isinstance(parameters, Var):
        parameters = [parameters]
    parameters = list(parameters)
    needed = sum(parameter.numel() for parameter in parameters)
    if vec.ndim != 1 or vec.shape[0] != needed:
        raise RuntimeError(f"vector_to_parameters: vec must be 1-D with {needed} elements (the parameters' total), "
                           f"got shape {tuple(vec.shape)}")
    pointer = 0
    with no_grad():
        for parameter in parameters:
            count = parameter.numel()
            parameter.data = vec[pointer:pointer + count].reshape(list(parameter.shape)).detach()
            pointer += count
