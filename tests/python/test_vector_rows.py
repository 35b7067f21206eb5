"""Explicit SIMD (jit/codegen/cpp/vector_expression_renderer.cc): the row loops of softmax, log-softmax, layer norm and
their like, and elementwise kernels using exp, run on mj_float_vector lanes, ending in a partial vector. Checked against
numpy (float64) over lengths around the vector width and its multiples, with NaN, inf and signed zeros; the vector exp
is checked bit for bit against the scalar one at 512, 256 and 128 bits with the system Clang."""
import math
import shutil
import subprocess

import numpy as np
import pytest

import metajit as mj
import metajit.nn.functional as F
from conftest import assert_close, cpu_backend

pytestmark = cpu_backend  # the CPU backend's own kernels (conftest.cpu_backend)

# Around 16 lanes (AVX-512) and the unrolled 2 x 16 and 4 x 16 blocks, so every tail path runs.
ROW_LENGTHS = [1, 5, 15, 16, 17, 31, 32, 33, 63, 64, 65, 100, 1000, 1024]


def kernel_sources(*variables):
    return "\n".join(kernel.source for kernel in mj.inspect(*variables))


def numpy_softmax(x):
    x = x.astype(np.float64)
    shifted = np.exp(x - x.max(axis=-1, keepdims=True))
    return shifted / shifted.sum(axis=-1, keepdims=True)


@pytest.mark.parametrize("length", ROW_LENGTHS)
def test_softmax_rows_of_every_length(rng, length):
    x = (rng.standard_normal((6, length)) * 5).astype(np.float32)
    assert_close(F.softmax(mj.array(x), dim=-1), numpy_softmax(x), rtol=2e-6, atol=1e-9)


@pytest.mark.parametrize("length", [17, 64, 1000])
def test_log_softmax_and_layer_norm_rows(rng, length):
    x = (rng.standard_normal((5, length)) * 3 + 1).astype(np.float32)
    x64 = x.astype(np.float64)
    log_expected = x64 - x64.max(-1, keepdims=True)
    log_expected -= np.log(np.exp(log_expected).sum(-1, keepdims=True))
    assert_close(F.log_softmax(mj.array(x), dim=-1), log_expected, rtol=1e-5, atol=1e-5)
    weight = rng.standard_normal(length).astype(np.float32)
    bias = rng.standard_normal(length).astype(np.float32)
    mean = x64.mean(-1, keepdims=True)
    normed = (x64 - mean) / np.sqrt(((x64 - mean) ** 2).mean(-1, keepdims=True) + 1e-5)
    assert_close(F.layer_norm(mj.array(x), [length], mj.array(weight), mj.array(bias)), normed * weight + bias,
                 rtol=1e-4, atol=1e-4)


def test_element_loop_operations_on_vectors(rng):
    # Every operation with a vector form, in one row kernel's element loop (after a row max), against numpy.
    x = (rng.standard_normal((5, 70)) * 3).astype(np.float32)
    x[0, 3] = np.nan
    v = mj.array(x)
    m = v - v.amax(-1, keepdim=True)
    result = (m.sigmoid() + m.relu() * 0.5 - (-m).abs() + m.exp() * (v > 0) + mj.maximum(m, v) / 3.0
              - mj.minimum(m, v * 2.0) + mj.where((v < 1.0) & (v > -1.0), m ** 2, -m)
              + mj.where(~((v > 2.0) | (v < -2.0)) ^ (v > 0), 1.0, 0.0))
    source = kernel_sources(result)
    assert "mj_load_lanes(" in source and "mj_max(" in source and "__builtin_convertvector" in source, source
    x64 = x.astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        m64 = x64 - x64.max(-1, keepdims=True)
        expected = (1 / (1 + np.exp(-m64)) + np.maximum(m64, 0) * 0.5 - np.abs(-m64) + np.exp(m64) * (x64 > 0)
                    + np.maximum(m64, x64) / 3.0 - np.minimum(m64, x64 * 2.0)
                    + np.where((x64 < 1.0) & (x64 > -1.0), m64 ** 2, -m64)
                    + np.where(~((x64 > 2.0) | (x64 < -2.0)) ^ (x64 > 0), 1.0, 0.0))
    assert_close(result, expected, rtol=1e-5, atol=1e-5, equal_nan=True)


def test_generated_row_kernels_compile_with_gcc_too(tmp_path, rng):
    # METAJIT_COMPILER=system falls back to g++ without clang++-14: the vector types are GCC-style for that, the
    # int64 and double lanes of index values (a causal mask, an arange: tests/python/test_index_lanes.py) too.
    compiler = shutil.which("g++")
    assert compiler, "g++ is needed for this check"
    v = mj.array(rng.standard_normal((4, 300)).astype(np.float32))
    m = v - v.amax(-1, keepdim=True)
    query, key = mj.arange(0, 4, 1, "int64").reshape([4, 1]), mj.arange(0, 300, 1, "int64").reshape([1, 300])
    causal = F.softmax(mj.where(key <= query, v, float("-inf")), dim=-1)
    positions = (mj.arange(0.5, 300.5, 1.0, "float32") * v).exp()
    kernels = mj.inspect(F.softmax(v, dim=-1), F.layer_norm(v, [300]), (m.sigmoid() * (v > 0)).abs(), causal, positions)
    assert len(kernels) == 5
    # every one has index lanes: the causal mask, the arange, and the partial last vector of a row of 300
    assert all("mj_index_lanes(" in kernel.source for kernel in kernels)
    for index, kernel in enumerate(kernels):
        assert "mj_float_vector" in kernel.source
        path = tmp_path / f"kernel{index}.cc"
        path.write_text(kernel.full_source)
        for target in (["-march=native"], ["-mavx2", "-mfma"], []):
            compiled = subprocess.run([compiler, "-O2", "-c", *target, str(path), "-o", str(tmp_path / "kernel.o")],
                                      capture_output=True, text=True)
            assert compiled.returncode == 0, compiled.stderr[-3000:]


def test_softmax_kernel_is_vector_code_with_terms_in_the_output_row(rng):
    y = F.softmax(mj.array(rng.standard_normal((64, 1024)).astype(np.float32)), dim=-1)
    source = kernel_sources(y)
    assert "mj_float_vector max_0_lanes[4]" in source          # the max pass: four vector accumulators
    assert "mj_exp_lanes(sub_" in source and "mj_float_vector sub_" in source  # exp on vectors
    assert "this row of the output" in source                   # terms kept in the output row, not the stack
    assert "alignas(64)" not in source
    assert "__builtin_prefetch(&in0[(r1 + ((i0 + 2LL) * 1024LL))])" in source  # the row after next, in the exp pass


@pytest.mark.parametrize("length", [7, 40, 1024])
def test_special_values_in_rows(length):
    rows = np.zeros((6, length), np.float32)
    rows[0, length // 2] = np.nan           # NaN anywhere: the whole row is NaN
    rows[1, -1] = np.nan                    # in the vector tail's last, partial vector
    rows[2, 0] = np.inf                     # inf - inf: the whole row is NaN, as numpy
    rows[3, :] = -np.inf                    # all -inf: NaN
    rows[4, :] = np.linspace(-100, 100, length, dtype=np.float32)  # exp underflows to 0 / subnormals
    rows[5, :] = -0.0
    with np.errstate(invalid="ignore"):
        expected = numpy_softmax(rows)
    assert_close(F.softmax(mj.array(rows), dim=-1), expected, rtol=2e-6, atol=1e-30, equal_nan=True)


def test_row_max_keeps_positive_zero_and_nan(rng):
    # x - max(x) over rows of signed zeros and NaN: the max is exact (order keys across lanes), NaN wins.
    x = np.full((3, 70), -0.0, np.float32)
    x[0, ::3] = 0.0
    x[1, 5] = np.nan
    x[2, 69] = -1.0
    result = (mj.array(x) - mj.array(x).amax(-1, keepdim=True)).numpy()
    with np.errstate(invalid="ignore"):
        expected = x - x.max(-1, keepdims=True)
    np.testing.assert_array_equal(np.isnan(result), np.isnan(expected))
    np.testing.assert_array_equal(result[~np.isnan(result)], expected[~np.isnan(expected)])
    assert not np.signbit(result[0, 0])     # 0 - max(+0, -0): +0


def test_two_outputs_sharing_the_terms(rng):
    # Both outputs read the row's exp terms: they may only live in the output stored last.
    x = rng.standard_normal((8, 300)).astype(np.float32)
    v = mj.array(x)
    shifted = (v - v.amax(-1, keepdim=True)).exp()
    total = shifted.sum(-1, keepdim=True)
    first, second = shifted / total, shifted * total
    mj.sync(first, second)
    e = np.exp(x.astype(np.float64) - x.max(-1, keepdims=True))
    assert_close(first, e / e.sum(-1, keepdims=True), rtol=2e-6)
    assert_close(second, e * e.sum(-1, keepdims=True), rtol=2e-6)


@pytest.mark.parametrize("length", ROW_LENGTHS)
def test_reduction_kernels_run_on_vectors(rng, length):
    # A kernel whose output is the reduction (sum, max, min over the last dim, no elementwise consumer of the
    # row): the same vector loop and vector tail as a row kernel's, with NaN, -inf and signed zeros (which
    # zero a tie keeps is not specified, as in numpy and PyTorch).
    x = (rng.standard_normal((5, length)) * 4).astype(np.float32)
    x[1, length // 2] = np.nan
    x[2, :] = -0.0
    x[2, -1] = 0.0
    x[3, 0] = -np.inf
    v = mj.array(x)
    sums, maxima, minima = (v.exp() * 0.5).sum(-1), v.amax(-1), v.amin(-1)
    if length >= 64:  # (inspect before the values are computed)
        source = kernel_sources(sums, maxima)
        assert "mj_float_vector sum_" in source and "mj_exp_lanes(" in source and "mj_float_vector max_" in source
    x64 = x.astype(np.float64)
    with np.errstate(invalid="ignore"):
        assert_close(sums, (np.exp(x64) * 0.5).sum(-1), rtol=2e-6, equal_nan=True)
        assert_close(maxima, x64.max(-1), equal_nan=True)
        assert_close(minima, x64.min(-1), equal_nan=True)


def test_rows_that_stay_scalar_are_still_right(rng):
    # float64 and integer row reductions keep the scalar loops.
    x = rng.standard_normal((4, 50))
    assert_close(F.softmax(mj.array(x), dim=-1), numpy_softmax(x), rtol=1e-12)
    assert "mj_float_vector" not in kernel_sources(F.softmax(mj.array(x), dim=-1))
    integers = rng.integers(-50, 50, (4, 40)).astype(np.int32)
    v = mj.array(integers)
    assert_close(v - v.amax(-1, keepdim=True), integers - integers.max(-1, keepdims=True))


@pytest.mark.parametrize("shape", [(2,), (15,), (17,), (1000,), (3, 300), (2, 5, 257)])
def test_elementwise_kernels_with_exp_are_vector_code(rng, shape):
    # exp and sigmoid in a plain elementwise kernel (no row reduction): flat ranges split across threads, and
    # rows of 257 and 300 (not merged into one loop) with a broadcast operand along the last dim.
    x = (rng.standard_normal(shape) * 10).astype(np.float32)
    x.flat[0] = -np.inf
    if x.size > 2:
        x.flat[1], x.flat[2] = np.nan, 80.0  # exp(80) is near the float32 maximum
    scale = rng.uniform(0.5, 2.0, shape[-1]).astype(np.float32)  # positive: no cancellation in the sum
    v = mj.array(x)
    result = v.exp() * mj.array(scale) + v.sigmoid()
    source = kernel_sources(result)
    # one loop: the last, partial vector takes the lanes left, and no scalar copy of the body follows
    assert "mj_load_lanes(" in source and "mj_store_lanes(" in source and "const float in" not in source, source
    x64 = x.astype(np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        expected = np.exp(x64) * scale + 1 / (1 + np.exp(-x64))
    assert_close(result, expected, rtol=2e-6, atol=1e-30, equal_nan=True)


def test_elementwise_kernels_without_exp_keep_the_scalar_loop(rng):
    # LLVM vectorises these as well; explicit vectors are only for exp.
    v = mj.array(rng.standard_normal(1000).astype(np.float32))
    assert "mj_float_vector" not in kernel_sources((v * 2 + 1).relu())


@pytest.mark.parametrize("length", range(1, 35))
def test_every_partial_vector_length(rng, length):
    # Element loops end in a partial vector of 1 to MJ_LANES - 1 lanes (or none): rows of every length up to two
    # 16-lane vectors and a bit, with the row's neighbours checked for stray writes by a second output.
    x = (rng.standard_normal((3, length)) * 4).astype(np.float32)
    v = mj.array(x)
    shifted = v - v.amax(-1, keepdim=True)
    flat = mj.array(x.reshape(-1)).exp() * 0.5
    x64 = x.astype(np.float64)
    assert_close(shifted.exp() + shifted, np.exp(x64 - x64.max(-1, keepdims=True)) + (x64 - x64.max(-1, keepdims=True)),
                 rtol=2e-6, atol=1e-7)
    assert_close(flat, np.exp(x64.reshape(-1)) * 0.5, rtol=2e-6)


def test_exp_below_minus_104_is_exactly_zero_and_subnormals_stay_right():
    # x < -104 takes the vanishing path (computed on 0, selected to 0); from -104 up to about -87.3 results are
    # subnormal and must still round correctly (a row of 40: whole vectors and a partial one; then 18 values).
    arguments = np.array([-np.inf, -1e30, -200.0, -104.5, -104.0001, -104.0, -103.97, -103.9, -100.0, -95.0,
                          -90.0, -87.5, -87.3, -87.0, -50.0, -1.0, 0.0, np.nan], np.float32)
    row = np.resize(arguments, 40).astype(np.float32)
    expected = np.exp(row.astype(np.float64))
    with np.errstate(under="ignore"):
        expected32 = expected.astype(np.float32)
    for result in (mj.array(row).exp().numpy(), mj.array(arguments).exp().numpy()):
        exact = expected32[:result.size]
        finite = ~np.isnan(exact)
        # within 1 ulp of the float32 rounding of the true value (subnormal ulps included), NaN stays NaN
        spacing = np.spacing(np.abs(exact[finite]))
        assert (np.abs(result[finite].astype(np.float64) - exact[finite]) <= spacing).all()
        assert np.isnan(result[~finite]).all()
        assert (result[:result.size][row[:result.size] < -104] == 0).all()


PARTIAL_CHECK = r"""
extern "C" int printf(const char*, ...);
int main() {
  float input[40], output[40];
  for (int i = 0; i < 40; ++i) { input[i] = (float)i * 0.25f - 5.0f; output[i] = -7.0f; }
  void* buffers[2] = {output, input};
  metajit_kernel(buffers, 3, 5);    // one partial vector inside the array
  metajit_kernel(buffers, 6, 35);   // whole vectors, then a partial one (at every width)
  for (int i = 0; i < 40; ++i) printf("%.9g\n", output[i]);
  return 0;
}
"""


@pytest.mark.parametrize("target", [["-march=native"], ["-mavx2", "-mfma", "-mno-avx512f"], []],
                         ids=["native", "avx2", "sse"])
def test_partial_vectors_at_every_width(tmp_path, target):
    # The JIT only runs the host's width; the partial-vector loads and stores of the other widths (a plain lane
    # loop) run here through clang++, on ranges that start and end inside vectors; nothing outside is written.
    kernel = mj.inspect(mj.array(np.ones(40, np.float32)).exp() * 0.5)[0]
    assert "mj_store_lanes(" in kernel.source
    output = partial_check_output(tmp_path, kernel, target)
    inputs = np.arange(40) * 0.25 - 5.0
    index = np.arange(40)
    expected = np.where(((index >= 3) & (index < 5)) | ((index >= 6) & (index < 35)), np.exp(inputs) * 0.5, -7.0)
    np.testing.assert_allclose(output, expected, rtol=2e-6)


ROW_TAIL_CHECK = r"""
extern "C" int printf(const char*, ...);
extern "C" double cos(double);
int main() {
  float input[3 * 37], output[3 * 37];
  for (int i = 0; i < 3 * 37; ++i) { input[i] = (float)(cos(i * 0.37) * 5.0); output[i] = -7.0f; }
  void* buffers[2] = {output, input};
  metajit_kernel(buffers, 0, 3);
  for (int i = 0; i < 3 * 37; ++i) printf("%.9g\n", output[i]);
  return 0;
}
"""


@pytest.mark.parametrize("target", [["-march=native"], ["-mavx2", "-mfma", "-mno-avx512f"], []],
                         ids=["native", "avx2", "sse"])
def test_row_reduction_tails_at_every_width(tmp_path, target):
    # Rows of 37: the max pass's and the exp-sum pass's vector tails (partial last vectors, lanes past the end
    # set to the identity) at 16, 8 and 4 lanes, through clang++.
    kernel = mj.inspect(F.softmax(mj.array(np.ones((3, 37), np.float32)), dim=-1))[0]
    assert "mj_index_lanes(" in kernel.source and "mj_load_lanes(" in kernel.source, kernel.source
    (tmp_path / "rows.cc").write_text(kernel.full_source + ROW_TAIL_CHECK)
    binary = build_with_runtime_support(tmp_path, tmp_path / "rows.cc", target)
    output = np.array(subprocess.run([str(binary)], check=True, capture_output=True, text=True).stdout.split(),
                      dtype=np.float64).reshape(3, 37)
    inputs = (np.cos(np.arange(3 * 37) * 0.37) * 5.0).astype(np.float32).reshape(3, 37)
    np.testing.assert_allclose(output, numpy_softmax(inputs), rtol=2e-6, atol=1e-12)


EXP_CHECK = r"""
extern "C" int printf(const char*, ...);
int main() {
  long long checked = 0, mismatches = 0;
  for (unsigned long long start = 0; start < (1ull << 32); start += MJ_LANES * 4099ull) {
    mj_float_vector x;
    for (int lane = 0; lane < MJ_LANES; ++lane) x[lane] = mj_bits_to_float((uint32_t)(start + lane * 4099ull));
    mj_float_vector vector_result = mj_exp_lanes(x);
    for (int lane = 0; lane < MJ_LANES; ++lane, ++checked) {
      float scalar = mj_exp((float)x[lane]), vector = vector_result[lane];
      bool both_nan = scalar != scalar && vector != vector;
      if (!both_nan && mj_float_to_bits(scalar) != mj_float_to_bits(vector)) ++mismatches;
    }
  }
  printf("%d %lld %lld\n", MJ_LANES, checked, mismatches);
  return 0;
}
"""


def partial_check_output(tmp_path, kernel, target):
    """The 40 outputs of PARTIAL_CHECK around `kernel` (of one float32 input and output of 40 elements), built
    for `target` with clang++-14: inputs i * 0.25 - 5, outputs -7 where the two ranges leave them unwritten."""
    (tmp_path / "partial.cc").write_text(kernel.full_source + PARTIAL_CHECK)
    binary = build_with_runtime_support(tmp_path, tmp_path / "partial.cc", target)
    return np.array(subprocess.run([str(binary)], check=True, capture_output=True, text=True).stdout.split(),
                    dtype=np.float64)


def build_with_runtime_support(tmp_path, source_file, target):
    """Compiles `source_file` with clang++-14 for `target`, linked with the runtime support object (the helpers
    kernels call out of line: the vector exp's full range without AVX-512), and returns the binary's path."""
    compiler = shutil.which("clang++-14")
    assert compiler, "clang++-14 (installed by tools/install_dependencies.sh) is needed for this check"
    flags = ["-O2", "-ffp-contract=on", "-fno-math-errno", *target]  # as the JIT compiles
    (tmp_path / "support.cc").write_text(mj._core.runtime_support_source())
    # Its table-filling entry is a kernel's metajit_kernel; renamed here so a kernel can be linked beside it.
    subprocess.run([compiler, *flags, "-Dmetajit_kernel=runtime_support_table", "-c", str(tmp_path / "support.cc"),
                    "-o", str(tmp_path / "support.o")], check=True, capture_output=True)
    binary = tmp_path / source_file.stem
    subprocess.run([compiler, *flags, str(source_file), str(tmp_path / "support.o"), "-o", str(binary)],
                   check=True, capture_output=True)
    return binary


def run_prelude_check(tmp_path, check, target):
    """Compiles `check`, a C++ main, after the prelude the JIT gives a kernel naming what it names, for `target`
    with clang++-14, runs it and returns the words it printed."""
    (tmp_path / "check.cc").write_text(mj._core.cpp_prelude_for(check) + check)
    binary = build_with_runtime_support(tmp_path, tmp_path / "check.cc", target)
    return subprocess.run([str(binary)], check=True, capture_output=True, text=True).stdout.split()


@pytest.mark.parametrize("target, lanes", [(["-march=native", "-mprefer-vector-width=512"], None),
                                           (["-mavx2", "-mfma", "-mno-avx512f"], 8), ([], 4)])
def test_vector_exp_equals_scalar_exp_bit_for_bit(tmp_path, target, lanes):
    kernel = mj.inspect(F.softmax(mj.array(np.ones((2, 32), np.float32)), dim=-1))[0]
    assert "mj_exp_lanes(" in kernel.source, kernel.source
    width, checked, mismatches = map(int, run_prelude_check(tmp_path, EXP_CHECK, target))
    if lanes is not None:
        assert width == lanes
    assert checked > 1_000_000
    assert mismatches == 0


ULPS = r"""
extern "C" int printf(const char*, ...);
// ulps of `value` from the double `exact`, in units of the float spacing at exact
static double ulps(float value, double exact) {
  float rounded = (float)exact;
  uint32_t bits = mj_float_to_bits(rounded) & 0x7fffffffu;
  float next = mj_bits_to_float(bits + 1u);
  double spacing = (double)next - (double)mj_bits_to_float(bits);
  double difference = (double)value - exact;
  return (difference < 0 ? -difference : difference) / spacing;
}
// Every 1031st float32 bit pattern (4.2M of them, all exponents and both signs), MJ_LANES at a time.
template <typename Check> static void for_each_sampled_vector(Check check) {
  for (unsigned long long start = 0; start < (1ull << 32); start += MJ_LANES * 1031ull) {
    mj_float_vector x;
    for (int lane = 0; lane < MJ_LANES; ++lane) x[lane] = mj_bits_to_float((uint32_t)(start + lane * 1031ull));
    check(x);
  }
}
"""

TANH_CHECK = ULPS + r"""
extern "C" double tanh(double);
int main() {
  long long checked = 0, wrong_special = 0;
  double worst_scalar = 0, worst_vector = 0;
  for_each_sampled_vector([&](mj_float_vector x) {
    mj_float_vector vector_result = mj_tanh_lanes(x);
    for (int lane = 0; lane < MJ_LANES; ++lane, ++checked) {
      float input = x[lane], scalar = mj_tanh(input), vector = vector_result[lane];
      double exact = tanh((double)input);
      if (input != input) {
        wrong_special += (scalar == scalar) + (vector == vector);
        continue;
      }
      if (input == 0.0f) {  // the sign of zero is kept
        wrong_special += (mj_float_to_bits(scalar) != mj_float_to_bits(input)) +
                         (mj_float_to_bits(vector) != mj_float_to_bits(input));
        continue;
      }
      double scalar_error = ulps(scalar, exact), vector_error = ulps(vector, exact);
      if (scalar_error > worst_scalar) worst_scalar = scalar_error;
      if (vector_error > worst_vector) worst_vector = vector_error;
    }
  });
  const float zeros[2] = {0.0f, -0.0f};  // not among the patterns above
  for (float zero : zeros) {
    wrong_special += mj_float_to_bits(mj_tanh(zero)) != mj_float_to_bits(zero);
    wrong_special += mj_float_to_bits(mj_tanh_lanes(mj_splat(zero))[MJ_LANES - 1]) != mj_float_to_bits(zero);
  }
  printf("%d %lld %lld %.4f %.4f\n", MJ_LANES, checked, wrong_special, worst_scalar, worst_vector);
  return 0;
}
"""


@pytest.mark.parametrize("target, lanes", [(["-march=native", "-mprefer-vector-width=512"], None),
                                           (["-mavx2", "-mfma", "-mno-avx512f"], 8), ([], 4)])
def test_tanh_is_within_two_ulp_everywhere_scalar_and_vector(tmp_path, target, lanes):
    """mj_tanh (the prelude's, instead of glibc's scalar tanhf) against double tanh over float32 inputs spread
    over every bit pattern (every 1031st), at each vector width: NaN stays NaN, zeros keep their sign."""
    kernel = mj.inspect(mj.array(np.ones(40, np.float32)).tanh())[0]
    assert "mj_tanh_lanes(in0_" in kernel.source and "mj_float_vector" in kernel.source, kernel.source
    fields = run_prelude_check(tmp_path, TANH_CHECK, target)
    width, checked, wrong_special = map(int, fields[:3])
    worst_scalar, worst_vector = map(float, fields[3:])
    if lanes is not None:
        assert width == lanes
    assert checked > 4_000_000 and wrong_special == 0
    assert worst_scalar <= 2.0 and worst_vector <= 2.0, (worst_scalar, worst_vector)


SIN_COS_CHECK = ULPS + r"""
extern "C" double sin(double);
extern "C" double cos(double);
int main() {
  long long checked = 0, wrong_special = 0;
  double worst[4] = {0, 0, 0, 0};  // sin scalar, sin vector, cos scalar, cos vector
  for_each_sampled_vector([&](mj_float_vector x) {
    mj_float_vector sines = mj_sin_lanes(x), cosines = mj_cos_lanes(x);
    for (int lane = 0; lane < MJ_LANES; ++lane, ++checked) {
      float input = x[lane];
      float results[4] = {mj_sin(input), sines[lane], mj_cos(input), cosines[lane]};
      if (input != input || input - input != 0.0f) {  // NaN and inf give NaN
        for (float result : results) wrong_special += result == result;
        continue;
      }
      double exact[2] = {sin((double)input), cos((double)input)};
      for (int which = 0; which < 4; ++which) {
        double error = ulps(results[which], exact[which / 2]);
        if (error > worst[which]) worst[which] = error;
      }
    }
  });
  const float zeros[2] = {0.0f, -0.0f};  // sin keeps the sign of zero; cos of either is 1
  for (float zero : zeros) {
    wrong_special += mj_float_to_bits(mj_sin(zero)) != mj_float_to_bits(zero);
    wrong_special += mj_float_to_bits(mj_sin_lanes(mj_splat(zero))[MJ_LANES - 1]) != mj_float_to_bits(zero);
    wrong_special += mj_cos(zero) != 1.0f;
    wrong_special += mj_cos_lanes(mj_splat(zero))[0] != 1.0f;
  }
  printf("%d %lld %lld %.4f %.4f %.4f %.4f\n", MJ_LANES, checked, wrong_special, worst[0], worst[1], worst[2],
         worst[3]);
  return 0;
}
"""


@pytest.mark.parametrize("target, lanes", [(["-march=native", "-mprefer-vector-width=512"], None),
                                           (["-mavx2", "-mfma", "-mno-avx512f"], 8), ([], 4)])
def test_sin_and_cos_are_within_one_ulp_everywhere_scalar_and_vector(tmp_path, target, lanes):
    """mj_sin / mj_cos (the prelude's, instead of glibc's scalar sinf / cosf) against double sin / cos over
    float32 inputs spread over every bit pattern (every 1031st; from 2^20 on they are libm's), at each vector
    width: NaN and inf give NaN, sin keeps the sign of zero."""
    x = mj.array(np.ones(40, np.float32))
    kernel = mj.inspect(x.sin() + x.cos())[0]
    assert "mj_sin_lanes(in0_" in kernel.source and "mj_cos_lanes(in0_" in kernel.source, kernel.source
    fields = run_prelude_check(tmp_path, SIN_COS_CHECK, target)
    width, checked, wrong_special = map(int, fields[:3])
    worst = list(map(float, fields[3:]))
    if lanes is not None:
        assert width == lanes
    assert checked > 4_000_000 and wrong_special == 0
    assert max(worst) <= 1.0, worst


def test_sin_and_cos_kernels_match_numpy_at_quadrant_edges_and_large_arguments(rng):
    edges = np.pi / 4 * np.arange(-12, 13)
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-30, 1048575.9, 1048576.0, -1048576.0,
                        3e7, -1e20, 3e38], np.float32)
    data = np.concatenate([special, edges.astype(np.float32), np.nextafter(edges, 10).astype(np.float32),
                           (rng.standard_normal(1000) * 100).astype(np.float32)])
    for name in ("sin", "cos"):
        result = getattr(mj.array(data), name)().numpy()
        with np.errstate(invalid="ignore"):  # of inf
            expected = getattr(np, name)(data.astype(np.float64))
        finite = np.isfinite(expected)
        spacing = np.spacing(np.abs(expected[finite]).astype(np.float32)).astype(np.float64)
        assert np.all(np.abs(result[finite] - expected[finite]) <= spacing), name
        assert np.isnan(result[~finite]).all(), name
    np.testing.assert_array_equal(np.signbit(mj.array(data[:2]).sin().numpy()), [False, True])


ERF_CHECK = ULPS + r"""
extern "C" double erf(double);
int main() {
  long long checked = 0, wrong_special = 0;
  double worst_scalar = 0, worst_vector = 0;
  for_each_sampled_vector([&](mj_float_vector x) {
    mj_float_vector vector_result = mj_erf_lanes(x);
    for (int lane = 0; lane < MJ_LANES; ++lane, ++checked) {
      float input = x[lane], scalar = mj_erf(input), vector = vector_result[lane];
      if (input != input) {
        wrong_special += (scalar == scalar) + (vector == vector);
        continue;
      }
      wrong_special += mj_float_to_bits(scalar) != mj_float_to_bits(vector);  // the same steps on every lane
      double exact = erf((double)input);
      double scalar_error = ulps(scalar, exact), vector_error = ulps(vector, exact);
      if (scalar_error > worst_scalar) worst_scalar = scalar_error;
      if (vector_error > worst_vector) worst_vector = vector_error;
    }
  });
  // Not among the patterns above: both zeros keep their sign, infinities give +-1, and the forms' edges.
  const float specials[10] = {0.0f, -0.0f, __builtin_inff(), -__builtin_inff(), 1.0f, -1.0f, 0.99999994f,
                              3.9375f, 3.93749976f, -3.9375f};
  for (float input : specials) {
    float scalar = mj_erf(input), vector = mj_erf_lanes(mj_splat(input))[MJ_LANES - 1];
    if (input == 0.0f) {
      wrong_special += (mj_float_to_bits(scalar) != mj_float_to_bits(input)) +
                       (mj_float_to_bits(vector) != mj_float_to_bits(input));
      continue;
    }
    double exact = erf((double)input), scalar_error = ulps(scalar, exact), vector_error = ulps(vector, exact);
    if (scalar_error > worst_scalar) worst_scalar = scalar_error;
    if (vector_error > worst_vector) worst_vector = vector_error;
  }
  printf("%d %lld %lld %.4f %.4f\n", MJ_LANES, checked, wrong_special, worst_scalar, worst_vector);
  return 0;
}
"""


@pytest.mark.parametrize("target, lanes", [(["-march=native", "-mprefer-vector-width=512"], None),
                                           (["-mavx2", "-mfma", "-mno-avx512f"], 8), ([], 4)])
def test_erf_is_within_one_ulp_everywhere_scalar_and_vector(tmp_path, target, lanes):
    """mj_erf / mj_erf_lanes (the prelude's, instead of glibc's scalar erff) against double erf over float32
    inputs spread over every bit pattern (every 1031st), at each vector width, the two bit for bit equal: NaN
    stays NaN, zeros keep their sign, the infinities give +-1. (All 2^31 non-negative inputs were checked once
    with FMA: 0.991 ulp at most.)"""
    kernel = mj.inspect(mj.erf(mj.array(np.ones(40, np.float32))))[0]
    assert "mj_erf_lanes(in0_" in kernel.source, kernel.source
    fields = run_prelude_check(tmp_path, ERF_CHECK, target)
    width, checked, wrong_special = map(int, fields[:3])
    worst_scalar, worst_vector = map(float, fields[3:])
    if lanes is not None:
        assert width == lanes
    assert checked > 4_000_000 and wrong_special == 0
    bound = 1.0 if target else 1.3  # without FMA each multiply-add rounds twice
    assert worst_scalar <= bound and worst_vector <= bound, (worst_scalar, worst_vector)


def test_erf_kernels_match_libm_at_special_and_threshold_values(rng):
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-40, 1e-8, 0.99999994, 1.0, 1.0000001,
                        -1.0, 2.46875, 3.9375, 3.9374998, 3.92, 5.0, 3e38, -3e38], np.float32)
    data = np.concatenate([special, (rng.standard_normal(1000) * 2).astype(np.float32)])
    result = mj.erf(mj.array(data)).numpy()
    expected = np.array([math.erf(value) for value in data.astype(np.float64)])
    finite = ~np.isnan(expected)
    spacing = np.spacing(np.abs(expected[finite]).astype(np.float32)).astype(np.float64)
    assert np.all(np.abs(result[finite] - expected[finite]) <= spacing)
    assert np.isnan(result[~finite]).all()
    np.testing.assert_array_equal(np.signbit(result[:2]), [False, True])
    random = data[len(special):].reshape(10, 100)
    rows = mj.array(random)  # inside a row kernel's vector loop too
    in_rows = mj.erf(rows - rows.mean(-1, keepdim=True)).sum(-1).numpy()
    d64 = random.astype(np.float64)
    centred = d64 - d64.mean(-1, keepdims=True)
    np.testing.assert_allclose(in_rows, np.vectorize(math.erf)(centred).sum(-1), rtol=1e-5, atol=1e-5)


def test_tanh_kernels_match_numpy_at_special_and_threshold_values(rng):
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-40, 1e-8, 0.6249999, 0.625, 0.6250001,
                        -0.625, 9.0, 9.1, 44.0, 89.0, 3e38, -3e38], np.float32)
    data = np.concatenate([special, (rng.standard_normal(1000) * 4).astype(np.float32)])
    result = mj.array(data).tanh().numpy()
    expected = np.tanh(data.astype(np.float64))
    finite = np.isfinite(expected)
    spacing = np.spacing(np.abs(expected[finite]).astype(np.float32)).astype(np.float64)
    assert np.all(np.abs(result[finite] - expected[finite]) <= 2 * spacing)
    assert np.isnan(result[~finite]).all()
    np.testing.assert_array_equal(np.signbit(result[:2]), [False, True])
    rows = mj.array(data[:1000].reshape(10, 100))  # inside a row kernel's vector loop too
    in_rows = (rows - rows.amax(-1, keepdim=True)).tanh().sum(-1).numpy()
    d64 = data[:1000].reshape(10, 100).astype(np.float64)
    np.testing.assert_allclose(in_rows, np.tanh(d64 - d64.max(-1, keepdims=True)).sum(-1), rtol=1e-5)


LOG_CHECK = ULPS + r"""
extern "C" double log(double);
extern "C" double log1p(double);
extern "C" double expm1(double);
int main() {
  long long checked = 0, wrong_special = 0;
  double worst[3] = {0, 0, 0};  // log, log1p, expm1
  auto check = [&](int which, float input, float result, double exact) {
    if (exact != exact) { wrong_special += result == result; return; }  // NaN (log of x < 0, NaN input)
    if (exact == 0.0 || exact - exact != 0.0) {  // zeros keep their sign; infinities are exact
      wrong_special += mj_float_to_bits(result) != mj_float_to_bits((float)exact);
      return;
    }
    double error = ulps(result, exact);
    if (error > worst[which]) worst[which] = error;
  };
  for_each_sampled_vector([&](mj_float_vector x) {
    for (int lane = 0; lane < MJ_LANES; ++lane, ++checked) {
      float input = x[lane];
      check(0, input, mj_log(input), log((double)input));
      check(1, input, mj_log1p(input), log1p((double)input));
      check(2, input, mj_expm1(input), expm1((double)input));
    }
  });
  const float specials[6] = {0.0f, -0.0f, -1.0f, 1e-45f, __builtin_inff(), -__builtin_inff()};
  for (float input : specials) {
    check(0, input, mj_log(input), log((double)input));
    check(1, input, mj_log1p(input), log1p((double)input));
    check(2, input, mj_expm1(input), expm1((double)input));
  }
  printf("%lld %lld %.4f %.4f %.4f\n", checked, wrong_special, worst[0], worst[1], worst[2]);
  return 0;
}
"""


def test_log_log1p_and_expm1_are_within_one_and_a_half_ulp_everywhere(tmp_path):
    """The prelude's log, log1p and expm1 (glibc's log1pf and expm1f are scalar calls, which kept the loops around
    them 10x slower than PyTorch's) against double libm over float32 inputs spread over every bit pattern, with
    subnormals, zeros of both signs, -1 and the infinities: NaN where libm gives NaN."""
    kernels = mj.inspect(mj.array(np.ones(40, np.float32)).log1p(), mj.array(np.ones(40, np.float32)).expm1())
    source = "\n".join(kernel.source for kernel in kernels)
    assert "mj_log1p(" in source and "mj_expm1(" in source and "log1pf(" not in source, source
    checked, wrong_special, worst_log, worst_log1p, worst_expm1 = run_prelude_check(tmp_path, LOG_CHECK, [])
    assert int(checked) > 4_000_000 and int(wrong_special) == 0
    assert float(worst_log) <= 1.0 and float(worst_log1p) <= 1.0 and float(worst_expm1) <= 1.5, \
        (worst_log, worst_log1p, worst_expm1)


@pytest.mark.parametrize("function", ["log", "log1p", "expm1"])
def test_log_log1p_and_expm1_kernels_match_numpy(rng, function):
    values = np.concatenate([rng.standard_normal(5000) * 10.0, rng.uniform(-1, 1, 5000) * 1e-6,
                             [0.0, -0.0, -1.0, 1e-40, -1e-40, 88.0, 89.0, -30.0, -200.0, np.inf, -np.inf, np.nan]])
    data = values.astype(np.float32)
    if function == "log":
        data = np.abs(data)
    with np.errstate(all="ignore"):
        expected = getattr(np, function)(data.astype(np.float64)).astype(np.float32)
    result = getattr(mj.array(data), function)().numpy()
    np.testing.assert_allclose(result, expected, rtol=3e-7, atol=0, equal_nan=True)
    assert (np.signbit(result) == np.signbit(expected))[expected == 0].all()
