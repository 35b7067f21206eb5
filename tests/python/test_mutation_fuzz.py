"""Mutation semantics against PyTorch (issue 39): a bounded run of the mutation fuzzer (tests/python/mutation_fuzzer.py,
300 seeded programs of in-place ops, views, detach, .data, no_grad and backward, each run with PyTorch and with
metajit and compared value by value and gradient by gradient), and the issue's own cases as regression tests.
PyTorch's results are the expected values throughout; nothing is computed by hand.

A failing chunk lists its failing seeds and prints the first one's shrunk reproducer; rerun one with
python tools/fuzz.py --mutation --seed N --show-program."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")  # a test requirement (tools/install_dependencies.sh installs torch==2.13.0)

import metajit as mj  # noqa: E402
import mutation_fuzzer  # noqa: E402

CASES = 300
CHUNK = 20


def _report(failures, first, last):
    lines = [f"{len(failures)} failing seed(s) in {first}..{last}: {[failure.seed for failure in failures]}",
             "reproduce one with: python tools/fuzz.py --mutation --seed N --show-program", ""]
    for failure in failures:
        lines.append(f"[seed {failure.seed}] {failure.summary}")
    # only the first failure is shrunk: shrinking reruns the program many times
    lines += ["", str(mutation_fuzzer.run_case(failures[0].seed)[0])]
    return "\n".join(lines)


@pytest.mark.parametrize("first", range(0, CASES, CHUNK), ids=lambda first: f"seeds{first}-{first + CHUNK - 1}")
def test_random_mutating_programs_match_pytorch(first):
    failures = []
    for seed in range(first, first + CHUNK):
        failures += mutation_fuzzer.run_case(seed, shrink_failures=False)
    assert not failures, _report(failures, first, first + CHUNK - 1)


def test_programs_are_reproducible_and_reproducers_are_python():
    for seed in (0, 7, 123):
        first, second = mutation_fuzzer.generate(seed), mutation_fuzzer.generate(seed)
        assert first.source() == second.source()
        assert first.expected_error == second.expected_error
        compile(mutation_fuzzer.reproducer(first, "example"), "<reproducer>", "exec")


# ---------------------------------------------------------------------------------------------- the issue's cases
def _values(result):
    """numpy values of a case's results (tensors, their grads, None), for comparing the two libraries."""
    def value(item):
        if item is None:
            return None
        if isinstance(item, np.ndarray):
            return item
        return item.detach().numpy() if isinstance(item, torch.Tensor) else item.numpy()
    return {name: value(item) for name, item in result.items()}


def _assert_same(case):
    """Runs case(lib) with torch and with mj and compares what it returns, None included."""
    expected, got = _values(case(torch)), _values(case(mj))
    assert expected.keys() == got.keys()
    for name, want in expected.items():
        have = got[name]
        assert (have is None) == (want is None), f"{name}: metajit {have}, PyTorch {want}"
        if want is not None:
            np.testing.assert_allclose(have, want, rtol=1e-6, atol=1e-7, err_msg=name)


def test_the_issue_sequence_with_values_read_between_steps():
    """The issue's three writes in order, reading x after each (each read is a sync point in metajit)."""
    def case(lib):
        x = lib.zeros(2, 3)
        x.view(-1)[0] = 100
        first = x.numpy().copy() if lib is mj else x.detach().numpy().copy()
        row = x[0]
        row[1] = 9
        second = x.numpy().copy() if lib is mj else x.detach().numpy().copy()
        y = x
        y += 1
        return {"first": first, "second": second, "x": x}
    _assert_same(case)
