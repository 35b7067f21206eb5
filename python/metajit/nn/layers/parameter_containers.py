"""ParameterList and ParameterDict: parameters held in a list or a dict, registered with the owning module under
their position or key (so state_dict names are '0', '1', ... or the keys, as in PyTorch). Values that are not
Parameters are wrapped in one when added."""
import operator

from ..module import Module
from ..parameter import Parameter

__all__ = ["ParameterList", "ParameterDict"]


def _as_parameter(value):
    return value if isinstance(value, Parameter) or value is None else Parameter(value)


class ParameterList(Module):
    """A list of parameters: index, iterate, append, extend; each is a parameter of this module."""

    def __init__(self, values=None):
        super().__init__()
        if values is not None:
            self.extend(values)

    def __len__(self):
        return len(self._parameters)

    def __iter__(self):
        return iter(self._parameters.values())

    def _position(self, index):
        index = operator.index(index)
        if not -len(self) <= index < len(self):
            raise IndexError(f"ParameterList: index {index} is out of range for {len(self)} parameters")
        return str(index % len(self))

    def __getitem__(self, index):
        if isinstance(index, slice):
            return ParameterList(list(self._parameters.values())[index])
        return self._parameters[self._position(index)]

    def __setitem__(self, index, value):
        self.register_parameter(self._position(index), _as_parameter(value))

    def append(self, value):
        self.register_parameter(str(len(self)), _as_parameter(value))
        return self

    def extend(self, values):
        for value in values:
            self.append(value)
        return self

    def __iadd__(self, values):
        return self.extend(values)

    def extra_repr(self):
        return "\n".join(f"({index}): Parameter containing: [{value.dtype} of size {'x'.join(map(str, value.shape))}]"
                         for index, value in enumerate(self))


class ParameterDict(Module):
    """A dict of parameters (insertion-ordered): [], get, keys, values, items, update, pop; each is a parameter
    of this module under its key."""

    def __init__(self, parameters=None):
        super().__init__()
        if parameters is not None:
            self.update(parameters)

    def __len__(self):
        return len(self._parameters)

    def __iter__(self):
        return iter(self._parameters)

    def __contains__(self, key):
        return key in self._parameters

    def __getitem__(self, key):
        return self._parameters[key]

    def __setitem__(self, key, value):
        self.register_parameter(key, _as_parameter(value))

    def __delitem__(self, key):
        del self._parameters[key]

    def get(self, key, default=None):
        return self._parameters.get(key, default)

    def keys(self):
        return self._parameters.keys()

    def values(self):
        return self._parameters.values()

    def items(self):
        return self._parameters.items()

    def pop(self, key):
        value = self._parameters[key]
        del self._parameters[key]
        return value

    def update(self, parameters):
        items = parameters.items() if hasattr(parameters, "items") else parameters
        for key, value in items:
            self[key] = value

    def extra_repr(self):
        return "\n".join(f"({key}): Parameter containing: [{value.dtype} of size {'x'.join(map(str, value.shape))}]"
                         for key, value in self.items())
