"""The one place Python methods are attached to Var (the C++ class exposes its own in python/bindings). Each
module that defines Tensor methods keeps them in a table beside their definitions, and this file attaches the
tables in the order below, once, when `import metajit` finishes:

- `VAR_METHODS`: attached, replacing a method of the same name from an earlier table;
- `VAR_METHODS_IF_ABSENT`: attached only under names that no earlier table filled (a function that is also a
  method, where a more specific method may already exist);
- a function returning a table, for methods derived from the ones already attached (the in-place twins of
  out-of-place methods, the methods that are top-level functions with the Var first).

So `Var.softmax` comes from the last table below that names `softmax`. This file must not define methods itself.
"""
from importlib import import_module

from ._core import Var

# (module under metajit, what to attach from it), in order.
SOURCES = (
    ("_var_methods", "VAR_METHODS"),
    ("_autograd", "VAR_METHODS"),
    ("ops.tensor", "VAR_METHODS"),
    ("ops.activation", "VAR_METHODS"),
    ("ops.bucketing", "VAR_METHODS_IF_ABSENT"),
    ("ops.layout", "VAR_METHODS"),
    ("ops.diagonals", "VAR_METHODS_IF_ABSENT"),
    ("ops.reduction", "VAR_METHODS"),
    ("ops.linalg", "VAR_METHODS"),
    ("ops.matrix_solvers", "VAR_METHODS"),
    ("ops.host", "VAR_METHODS"),
    ("ops.indexing", "VAR_METHODS"),
    ("ops.index_update", "VAR_METHODS_IF_ABSENT"),
    ("ops.rearrange", "VAR_METHODS_IF_ABSENT"),
    ("ops.math_functions", "VAR_METHODS_IF_ABSENT"),
    ("ops.sorting", "VAR_METHODS"),
    ("ops.order_statistics", "VAR_METHODS_IF_ABSENT"),
    ("ops.pointwise", "VAR_METHODS"),
    ("ops.scans", "VAR_METHODS_IF_ABSENT"),
    ("ops.stacking", "VAR_METHODS_IF_ABSENT"),
    ("ops.statistics", "VAR_METHODS"),
    ("_inplace", "in_place_var_methods"),
    ("_torch_tensor", "VAR_METHODS"),
    ("_torch_tensor", "function_var_methods"),
)


def attach():
    """Attaches every table in SOURCES to Var, in order."""
    for module_name, table_name in SOURCES:
        table = getattr(import_module(f"metajit.{module_name}"), table_name)
        if callable(table):
            table = table()
        for name, method in table.items():
            if table_name == "VAR_METHODS_IF_ABSENT" and hasattr(Var, name):
                continue
            setattr(Var, name, method)
