"""Containers: Sequential (calls its modules in order), ModuleList and ModuleDict (hold modules so their
parameters are registered)."""
import operator
from collections import OrderedDict

from ..module import Module

__all__ = ["Sequential", "ModuleList", "ModuleDict"]


def _index(index, length, owner):
    index = operator.index(index)
    if not -length <= index < length:
        raise IndexError(f"{owner}: index {index} is out of range for {length} modules")
    return index + length if index < 0 else index


class Sequential(Module):
    """Sequential(*modules) or Sequential(OrderedDict(name=module)): forward feeds each module's output to the
    next. Modules are named '0', '1', ... unless given names."""

    def __init__(self, *args):
        super().__init__()
        if len(args) == 1 and isinstance(args[0], OrderedDict):
            for name, module in args[0].items():
                self.add_module(name, module)
        else:
            for index, module in enumerate(args):
                self.add_module(str(index), module)

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def __getitem__(self, index):
        if isinstance(index, slice):
            return type(self)(OrderedDict(list(self._modules.items())[index]))
        return list(self._modules.values())[_index(index, len(self), "Sequential")]

    def __setitem__(self, index, module):
        name = list(self._modules)[_index(index, len(self), "Sequential")]
        setattr(self, name, module)

    def __delitem__(self, index):
        names = list(self._modules)
        if isinstance(index, slice):
            for name in names[index]:
                del self._modules[name]
        else:
            del self._modules[names[_index(index, len(self), "Sequential")]]
        # Keep the names 0..n-1, as PyTorch does.
        modules = list(self._modules.values())
        if all(name.isdigit() for name in names):
            self._modules.clear()
            for position, module in enumerate(modules):
                self._modules[str(position)] = module

    def append(self, module):
        self.add_module(str(len(self)), module)
        return self

    def forward(self, input):
        for module in self._modules.values():
            input = module(input)
        return input


class ModuleList(Module):
    """A list of modules whose parameters belong to the owner; index, iterate, append, extend, insert."""

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.extend(modules)

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def __getitem__(self, index):
        if isinstance(index, slice):
            return type(self)(list(self._modules.values())[index])
        return self._modules[str(_index(index, len(self), "ModuleList"))]

    def __setitem__(self, index, module):
        self.add_module(str(_index(index, len(self), "ModuleList")), module)

    def __delitem__(self, index):
        modules = list(self._modules.values())
        if isinstance(index, slice):
            del modules[index]
        else:
            del modules[_index(index, len(self), "ModuleList")]
        self._modules.clear()
        for position, module in enumerate(modules):
            self._modules[str(position)] = module

    def __iadd__(self, modules):
        return self.extend(modules)

    def append(self, module):
        self.add_module(str(len(self)), module)
        return self

    def extend(self, modules):
        if isinstance(modules, Module) and not isinstance(modules, (ModuleList, Sequential)):
            raise TypeError("ModuleList.extend should be called with an iterable of modules, got a "
                            f"{type(modules).__name__}")
        for module in modules:
            self.append(module)
        return self

    def insert(self, index, module):
        modules = list(self._modules.values())
        modules.insert(index, module)
        self._modules.clear()
        for position, item in enumerate(modules):
            self.add_module(str(position), item)

    def forward(self, *args, **kwargs):
        raise NotImplementedError("ModuleList has no forward(); iterate over it and call the modules")


class ModuleDict(Module):
    """A dict of modules (insertion ordered) whose parameters belong to the owner."""

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __getitem__(self, key):
        return self._modules[key]

    def __setitem__(self, key, module):
        self.add_module(key, module)

    def __delitem__(self, key):
        del self._modules[key]

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules)

    def __contains__(self, key):
        return key in self._modules

    def keys(self):
        return self._modules.keys()

    def items(self):
        return self._modules.items()

    def values(self):
        return self._modules.values()

    def update(self, modules):
        items = modules.items() if hasattr(modules, "items") else modules
        for key, module in items:
            self[key] = module

    def forward(self, *args, **kwargs):
        raise NotImplementedError("ModuleDict has no forward(); look up a module and call it")
