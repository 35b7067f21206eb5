"""Bounded differential fuzzing (tests/python/graph_fuzzer.py): 300 random programs of meta-ops and library ops
compared with an independent numpy reference, and 60 random differentiable float64 programs whose mj.grad is
compared with central finite differences. Seeds are fixed, so a run is reproducible; a failing chunk names each
failing seed and prints a minimal reproducer (also: python tools/fuzz.py --seed N [--gradients]).

Constructs listed in graph_fuzzer.KNOWN_BUGS are not generated here; each known bug's reproducer runs as an xfail
below (strict unless the bug depends on the CPU), so fixing the bug turns that test red until its entry moves
to graph_fuzzer.FIXED_BUGS, whose reproducers and original seeds must pass. About 3 s with a warm kernel cache,
about 20 s cold (2,000 kernels)."""
import pytest

from graph_fuzzer import FIXED_BUGS, KNOWN_BUGS, run_gradient_case, run_value_case

VALUE_CASES = 300
GRADIENT_CASES = 60
CHUNK = 20


def _report(failures, first, last):
    seeds = sorted({failure.seed for failure in failures})
    lines = [f"{len(seeds)} failing seed(s) in {first}..{last}: {seeds}",
             "reproduce one with: python tools/fuzz.py --seed N" +
             (" --gradients" if failures[0].mode == "grad" else ""),
             ""]
    lines.append(str(failures[0]))
    for failure in failures[1:]:
        lines.append(f"\n[seed {failure.seed}] {failure.message}")
    return "\n".join(lines)


@pytest.mark.parametrize("first", range(0, VALUE_CASES, CHUNK), ids=lambda first: f"seeds{first}-{first + CHUNK - 1}")
def test_random_programs_match_numpy(first):
    failures = []
    for seed in range(first, first + CHUNK):
        failures += run_value_case(seed, exclude=KNOWN_BUGS)
    assert not failures, _report(failures, first, first + CHUNK - 1)


@pytest.mark.parametrize("first", range(0, GRADIENT_CASES, CHUNK),
                         ids=lambda first: f"seeds{first}-{first + CHUNK - 1}")
def test_random_gradients_match_finite_differences(first):
    failures = []
    for seed in range(first, first + CHUNK):
        failures += run_gradient_case(seed, exclude=KNOWN_BUGS)
    assert not failures, _report(failures, first, first + CHUNK - 1)


@pytest.mark.parametrize("bug", [
    pytest.param(bug, id=bug["name"], marks=pytest.mark.xfail(
        strict=bug.get("strict", True),
        reason="known bug (graph_fuzzer.KNOWN_BUGS); move the entry to FIXED_BUGS once it is fixed"))
    for bug in KNOWN_BUGS])
def test_known_bug_reproducer_still_fails(bug):
    exec(compile(bug["reproducer"], f"<known bug: {bug['name']}>", "exec"), {})


@pytest.mark.parametrize("bug", FIXED_BUGS, ids=[bug["name"] for bug in FIXED_BUGS])
def test_fixed_bug_stays_fixed(bug):
    """The reproducer passes, and the seeds that found the bug pass with nothing excluded."""
    exec(compile(bug["reproducer"], f"<fixed bug: {bug['name']}>", "exec"), {})
    failures = []
    for mode, seed in bug["seeds"]:
        failures += run_value_case(seed) if mode == "value" else run_gradient_case(seed)
    assert not failures, _report(failures, min(s for _, s in bug["seeds"]), max(s for _, s in bug["seeds"]))


def test_cases_are_reproducible_and_reproducers_are_python():
    import graph_fuzzer
    for seed in (0, 7, 123):
        first, second = graph_fuzzer.generate(seed), graph_fuzzer.generate(seed)
        assert first.source() == second.source()
        assert first.outputs == second.outputs
        text = graph_fuzzer.value_reproducer(seed, first.stmts, first.outputs[0], first.refs, "example")
        compile(text, "<reproducer>", "exec")
        gradient = graph_fuzzer.generate(seed, "grad")
        compile(graph_fuzzer.gradient_reproducer(seed, gradient, "example"), "<reproducer>", "exec")
