"""Var's Python methods are attached in one place, python/metajit/_var_method_table.py, from the tables of the
modules that define them (issue 47: they were attached in 20 places, in an order only the imports decided)."""
import ast
import pathlib

import metajit as mj
from metajit import _var_method_table
from metajit.ops import activation, reduction

PACKAGE = pathlib.Path(mj.__file__).parent


def attachments_outside_the_table():
    """(file, line) of every `setattr(Var, ...)` or `Var.name = ...` in the package but the table itself."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "_var_method_table.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "setattr" and node.args \
                    and getattr(node.args[0], "id", None) == "Var":
                found.append((path.name, node.lineno))
            if isinstance(node, (ast.Assign, ast.AugAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    if isinstance(target, ast.Attribute) and getattr(target.value, "id", None) == "Var":
                        found.append((path.name, node.lineno))
    return found


def test_no_module_attaches_methods_to_var_itself():
    assert attachments_outside_the_table() == []


def test_every_listed_table_exists_and_later_tables_win():
    for module_name, table_name in _var_method_table.SOURCES:
        module = __import__(f"metajit.{module_name}", fromlist=[table_name])
        assert hasattr(module, table_name), (module_name, table_name)
    # ops.reduction's amax replaces _var_methods' (it comes later in SOURCES); softmax is ops.activation's.
    assert mj.Var.amax is reduction.VAR_METHODS["amax"]
    assert mj.Var.softmax is activation.VAR_METHODS["softmax"]
    x = mj.array([[1.0, 3.0], [2.0, 0.5]])
    assert x.amax(1).numpy().tolist() == [3.0, 2.0]
