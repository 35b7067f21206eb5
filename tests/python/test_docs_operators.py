"""docs/operators.md lists exactly the names of metajit.__all__ (its first part) and of metajit.nn.__all__ (its
"Layers" part): a new function or layer must be documented, and the page must not name one that does not
exist."""
import os
import re

import metajit as mj
from metajit import nn

PAGE = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "operators.md")
LAYERS_HEADING = "# Layers (`metajit.nn`)"


def documented_names():
    """(names in the functions part, names in the layers part)."""
    with open(PAGE) as page:
        text = page.read()
    functions, _, layers = text.partition(LAYERS_HEADING)
    pattern = r"`([A-Za-z_][A-Za-z0-9_]*)`"
    return set(re.findall(pattern, functions)), set(re.findall(pattern, layers))


def test_every_public_name_is_documented():
    functions, layers = documented_names()
    missing = sorted(set(mj.__all__) - functions)
    assert not missing, f"add these to docs/operators.md: {missing}"
    missing_layers = sorted(set(nn.__all__) - layers)
    assert not missing_layers, f"add these to the Layers part of docs/operators.md: {missing_layers}"


def test_every_documented_name_exists():
    functions, layers = documented_names()
    # Names the page mentions in prose: the two it says are missing, the package, Python's None and bool.
    prose = {"max", "min", "metajit", "None", "bool"}
    unknown = sorted(name for name in functions - prose if not hasattr(mj, name))
    assert not unknown, f"docs/operators.md names functions metajit does not have: {unknown}"
    prose_layers = {"state_dict"}
    unknown_layers = sorted(name for name in layers - prose_layers if not hasattr(nn, name))
    assert not unknown_layers, f"docs/operators.md names layers metajit.nn does not have: {unknown_layers}"
