"""The settings registry (core/flag_table.cc): docs/configuration.md agrees with it, no C++ source outside it reads
a METAJIT_* variable, bad values name the variable, and metajit.flags / `python -m metajit flags` show it."""
import os
import pathlib
import re
import subprocess
import sys

import pytest

import metajit as mj
from metajit import _core

ROOT = pathlib.Path(__file__).resolve().parents[2]
REGISTRY = {row["name"]: row for row in _core.flag_table()}


def documented_rows():
    """(names, type, metajit.flags column, default column) of each row of the table in docs/configuration.md."""
    rows = []
    for line in (ROOT / "docs" / "configuration.md").read_text().splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if not line.startswith("| `METAJIT_") or len(cells) < 5:
            continue
        names = re.findall(r"`(METAJIT_[A-Z0-9_]+)`", cells[0])
        rows.append((names, cells[1], cells[2], cells[3]))
    return rows


def plain(cell):
    """A table cell as the registry spells it: no backticks, and a dash or nothing for none."""
    text = cell.replace("`", "").strip()
    return "" if text in ("–", "-") else text


def test_every_registered_setting_is_documented_with_its_type_default_and_setting():
    documented = {}
    for names, kind, setting, default in documented_rows():
        for name in names:
            documented[name] = (kind, plain(setting), plain(default))
    for name, row in REGISTRY.items():
        assert name in documented, f"{name} is registered but not in docs/configuration.md"
        assert documented[name] == (row["type"], row["python_setting"], row["default"]), name


def test_every_documented_setting_is_registered():
    mentioned = set(re.findall(r"METAJIT_[A-Z0-9_]+", (ROOT / "docs" / "configuration.md").read_text()))
    assert mentioned - set(REGISTRY) == set()


def test_no_cpp_source_outside_the_registry_reads_a_metajit_variable():
    pattern = re.compile(r"getenv\s*\(\s*\"METAJIT")
    offenders = []
    for folder in ("core", "meta_ops", "jit", "libraries", "cache", "python/bindings"):
        for path in (ROOT / folder).rglob("*"):
            if path.suffix in (".cc", ".h", ".cpp", ".hpp", ".cu") and pattern.search(path.read_text()):
                offenders.append(str(path.relative_to(ROOT)))
    assert offenders == [], "read METAJIT_* settings through core/flags.h"


def test_python_reads_of_metajit_variables_are_registered():
    # The package reads settings through _core.flag_value; a direct os.environ read must at least be registered.
    pattern = re.compile(r"environ(?:\.get)?\s*[\[(]\s*[\"'](METAJIT_[A-Z0-9_]+)")
    for path in (ROOT / "python" / "metajit").rglob("*.py"):
        for name in pattern.findall(path.read_text()):
            assert name in REGISTRY, f"{path.relative_to(ROOT)} reads {name}, which core/flag_table.cc lacks"


def test_table_rows_are_complete():
    for name, row in REGISTRY.items():
        assert row["type"] in ("boolean", "integer", "size", "text", "choice"), name
        assert row["documentation"] and "\n" not in row["documentation"], name
        if row["type"] == "choice":
            assert row["choices"][0] == row["default"], name
        if row["type"] == "boolean":
            assert row["default"] in ("0", "1"), name


@pytest.mark.parametrize("text, expected", [("1", True), ("0", False), ("", True), ("true", True), ("OFF", False),
                                            (" no ", False), ("yes", True)])
def test_boolean_spellings(text, expected):
    assert _core.parse_flag("METAJIT_LOWERING", text) is expected


def test_sizes():
    assert _core.parse_flag("METAJIT_CACHE_MAX_SIZE", "") == 2 << 30
    assert _core.parse_flag("METAJIT_CACHE_MAX_SIZE", "500M") == 500 << 20
    assert _core.parse_flag("METAJIT_CACHE_MAX_SIZE", "1024") == 1024
    assert _core.parse_flag("METAJIT_CACHE_MAX_SIZE", "unlimited") == 0


def test_a_bad_value_of_a_raising_setting_names_the_variable_and_the_value():
    with pytest.raises(ValueError, match=r"METAJIT_CACHE_MAX_SIZE='12 parsecs' is not a size"):
        _core.parse_flag("METAJIT_CACHE_MAX_SIZE", "12 parsecs")
    with pytest.raises(ValueError, match=r"METAJIT_COMPILER='gcc-please' is not a known compiler; use 'clang' or"):
        _core.parse_flag("METAJIT_COMPILER", "gcc-please")
    with pytest.raises(ValueError, match=r"METAJIT_DEVICE='tpu' is not a device"):
        _core.parse_flag("METAJIT_DEVICE", "tpu")
    with pytest.raises(KeyError, match="METAJIT_NOT_A_SETTING"):
        _core.flag_value("METAJIT_NOT_A_SETTING")


def test_a_bad_value_of_a_setting_read_at_load_warns_once_and_keeps_the_default(capfd):
    assert _core.parse_flag("METAJIT_CONV_ALGORITHM", "sideways") == "auto"
    assert _core.parse_flag("METAJIT_CONV_ALGORITHM", "sideways") == "auto"
    assert _core.parse_flag("METAJIT_NUM_THREADS", "four") is None
    assert _core.parse_flag("METAJIT_CHECK_NAN", "maybe") is False
    errors = capfd.readouterr().err
    assert errors.count("METAJIT_CONV_ALGORITHM='sideways' is not a convolution algorithm") == 1, errors
    assert "METAJIT_NUM_THREADS='four' is not an integer" in errors
    assert "METAJIT_CHECK_NAN='maybe' is not a boolean" in errors


def test_bad_values_at_load_do_not_stop_the_process():
    environment = dict(os.environ, METAJIT_CONV_ALGORITHM="sideways", METAJIT_LOWERING="perhaps",
                       METAJIT_LOG="loud", PYTHONPATH=os.pathsep.join(sys.path))
    program = "import metajit as mj; print(mj.flags.conv_algorithm, mj.flags.lowering, mj.flags.log)"
    result = subprocess.run([sys.executable, "-c", program], env=environment, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["auto", "True", "warning"]
    for shown in ("METAJIT_CONV_ALGORITHM='sideways'", "METAJIT_LOWERING='perhaps'", "METAJIT_LOG='loud'"):
        assert shown in result.stderr


def test_flags_table_shows_values_in_use(monkeypatch):
    monkeypatch.setenv("METAJIT_DUMP_DIR", "/tmp/somewhere")
    rows = {row["name"]: row for row in mj.flags.table()}
    assert set(rows) == set(REGISTRY)
    assert rows["METAJIT_NUM_THREADS"]["value"] == mj.flags.num_threads
    assert rows["METAJIT_CACHE_DIR"]["value"] == mj.flags.cache_dir
    assert rows["METAJIT_DUMP_DIR"]["environment"] == "/tmp/somewhere"
    assert rows["METAJIT_DUMP_DIR"]["value"] == "/tmp/somewhere"
    previous = mj.flags.lowering
    try:
        mj.flags.lowering = not previous
        assert {row["name"]: row for row in mj.flags.table()}["METAJIT_LOWERING"]["value"] is (not previous)
    finally:
        mj.flags.lowering = previous


def test_python_m_metajit_flags_prints_every_setting():
    environment = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    result = subprocess.run([sys.executable, "-m", "metajit", "flags"], env=environment, capture_output=True,
                            text=True, check=True)
    for name in REGISTRY:
        assert re.search(rf"^{name}\s", result.stdout, re.MULTILINE), name
