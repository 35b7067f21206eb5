"""docs/operators.md lists exactly the names of metajit.__all__: a new function must be documented, and the page
must not name one that does not exist."""
import os
import re

import metajit as mj

PAGE = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "operators.md")


def documented_names():
    with open(PAGE) as page:
        text = page.read()
    return set(re.findall(r"`([A-Za-z_][A-Za-z0-9_]*)`", text))


def test_every_public_name_is_documented():
    missing = sorted(set(mj.__all__) - documented_names())
    assert not missing, f"add these to docs/operators.md: {missing}"


def test_every_documented_name_exists():
    # Names the page mentions in prose: the two it says are missing, the package and Python's None.
    prose = {"max", "min", "metajit", "None"}
    unknown = sorted(name for name in documented_names() - prose if not hasattr(mj, name))
    assert not unknown, f"docs/operators.md names functions metajit does not have: {unknown}"
