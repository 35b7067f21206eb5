// Layout of the work: the tiles of the output grid are taken in chunks small enough that a chunk's transformed
// tensors stay in cache. For each chunk, the transforms run in parallel over (channel, tile row) pairs, the
// matrix products (one per point of the transformed tile) in parallel over the points, each sgemm
// single-threaded inside the parallel loop, and the transforms back again over (channel, tile row).
// Transformed tensors are [point][channel][tile], so every transform reads and writes whole rows of consecutive
// tiles, and every product is one plain row-major sgemm.
//
// A tiling is F(m, 3) in one dimension: windows of m + 2 inputs, m outputs per tile, with the matrices
//   B^T (data), G (filter taps) and A^T (products -> outputs):  y = A^T [(G g) . (B^T d)],
// and, for the weight gradient, its transpose F(3, m), where the m outputs' gradients e play the filter:
//   z = G^T [(A e) . (B^T d)].
// Two dimensions apply a one-dimensional transform along the rows, then down the columns.
#include "libraries/cpu/winograd_convolution.h"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include <oneapi/dnnl/dnnl.h>

#include "core/thread_pool.h"

namespace metajit {
namespace {

// F(2, 3) at the points 0, 1, -1 and infinity (Lavin & Gray): only additions and halvings, so almost no rounding.
struct TwoOutputs {
  static constexpr int kOutputs = 2, kWindow = 4;
  static void data(const float* d, float* out) {  // B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1]
    out[0] = d[0] - d[2];
    out[1] = d[1] + d[2];
    out[2] = d[2] - d[1];
    out[3] = d[1] - d[3];
  }
  static void filter(const float* g, float* out) {  // G = [1 0 0; 1/2 1/2 1/2; 1/2 -1/2 1/2; 0 0 1]
    out[0] = g[0];
    out[1] = 0.5f * (g[0] + g[1] + g[2]);
    out[2] = 0.5f * (g[0] - g[1] + g[2]);
    out[3] = g[2];
  }
  static void output(const float* p, float* out) {  // A^T = [1 1 1 0; 0 1 -1 -1]
    out[0] = p[0] + p[1] + p[2];
    out[1] = p[1] - p[2] - p[3];
  }
  static void gradient(const float* e, float* out) {  // A
    out[0] = e[0];
    out[1] = e[0] + e[1];
    out[2] = e[0] - e[1];
    out[3] = -e[1];
  }
  static void weight_sum(const float* s, float* out) {  // G^T
    out[0] = s[0] + 0.5f * (s[1] + s[2]);
    out[1] = 0.5f * (s[1] - s[2]);
    out[2] = 0.5f * (s[1] + s[2]) + s[3];
  }
};

// F(4, 3) at the points 0, 1, -1, 2, -2 and infinity: 36 multiplies per 4x4 outputs instead of 144.
struct FourOutputs {
  static constexpr int kOutputs = 4, kWindow = 6;
  static void data(const float* d, float* out) {
    // B^T = [4 0 -5 0 1 0; 0 -4 -4 1 1 0; 0 4 -4 -1 1 0; 0 -2 -1 2 1 0; 0 2 -1 -2 1 0; 0 4 0 -5 0 1]
    out[0] = 4.0f * d[0] - 5.0f * d[2] + d[4];
    out[1] = (d[3] + d[4]) - 4.0f * (d[1] + d[2]);
    out[2] = (d[4] - d[3]) + 4.0f * (d[1] - d[2]);
    out[3] = (d[4] - d[2]) + 2.0f * (d[3] - d[1]);
    out[4] = (d[4] - d[2]) - 2.0f * (d[3] - d[1]);
    out[5] = 4.0f * d[1] - 5.0f * d[3] + d[5];
  }
  static void filter(const float* g, float* out) {
    // G = [1/4 0 0; -1/6 -1/6 -1/6; -1/6 1/6 -1/6; 1/24 1/12 1/6; 1/24 -1/12 1/6; 0 0 1]
    out[0] = 0.25f * g[0];
    out[1] = (-1.0f / 6.0f) * (g[0] + g[1] + g[2]);
    out[2] = (-1.0f / 6.0f) * (g[0] - g[1] + g[2]);
    out[3] = (1.0f / 24.0f) * g[0] + (1.0f / 12.0f) * g[1] + (1.0f / 6.0f) * g[2];
    out[4] = (1.0f / 24.0f) * g[0] - (1.0f / 12.0f) * g[1] + (1.0f / 6.0f) * g[2];
    out[5] = g[2];
  }
  static void output(const float* p, float* out) {
    // A^T = [1 1 1 1 1 0; 0 1 -1 2 -2 0; 0 1 1 4 4 0; 0 1 -1 8 -8 1]
    out[0] = p[0] + (p[1] + p[2]) + (p[3] + p[4]);
    out[1] = (p[1] - p[2]) + 2.0f * (p[3] - p[4]);
    out[2] = (p[1] + p[2]) + 4.0f * (p[3] + p[4]);
    out[3] = (p[1] - p[2]) + 8.0f * (p[3] - p[4]) + p[5];
  }
  static void gradient(const float* e, float* out) {  // A
    out[0] = e[0];
    out[1] = (e[0] + e[2]) + (e[1] + e[3]);
    out[2] = (e[0] + e[2]) - (e[1] + e[3]);
    out[3] = (e[0] + 4.0f * e[2]) + (2.0f * e[1] + 8.0f * e[3]);
    out[4] = (e[0] + 4.0f * e[2]) - (2.0f * e[1] + 8.0f * e[3]);
    out[5] = e[3];
  }
  static void weight_sum(const float* s, float* out) {  // G^T
    out[0] = 0.25f * s[0] - (1.0f / 6.0f) * (s[1] + s[2]) + (1.0f / 24.0f) * (s[3] + s[4]);
    out[1] = (1.0f / 6.0f) * (s[2] - s[1]) + (1.0f / 12.0f) * (s[3] - s[4]);
    out[2] = (1.0f / 6.0f) * (s[3] + s[4] - s[1] - s[2]) + s[5];
  }
};

// A chunk's transformed tensors hold about this many floats (8 MB): cached while its products run.
constexpr int64_t kChunkFloats = int64_t(2) << 20;

float& at(const WinogradTensor& tensor, int64_t a, int64_t b, int64_t c, int64_t d) {
  return tensor.data[a * tensor.strides[0] + b * tensor.strides[1] + c * tensor.strides[2] + d * tensor.strides[3]];
}

// The m x m output tiles covering a [batch, ., height, width] tensor.
struct TileGrid {
  int64_t batch, rows, columns;
  TileGrid(int64_t batch, int64_t height, int64_t width, int64_t size)
      : batch(batch), rows((height + size - 1) / size), columns((width + size - 1) / size) {}
  int64_t count() const { return batch * rows * columns; }
};

// Tiles [first, last) of a grid, a chunk: the tile rows (image, row of tiles) it touches, and for each the
// columns of tiles inside the chunk.
struct Chunk {
  int64_t first, last;
  int64_t first_row(const TileGrid& grid) const { return first / grid.columns; }
  int64_t row_count(const TileGrid& grid) const { return (last - 1) / grid.columns + 1 - first_row(grid); }
  int64_t begin_column(const TileGrid& grid, int64_t row) const {
    return std::max<int64_t>(first - row * grid.columns, 0);
  }
  int64_t end_column(const TileGrid& grid, int64_t row) const {
    return std::min<int64_t>(last - row * grid.columns, grid.columns);
  }
};

// Scratch memory of the calling thread, kept between calls so large buffers are not mapped afresh every step:
// one buffer for the transformed filters (or weight sums), one for a chunk's transformed tiles.
enum Scratch { kFilters, kTiles };
float* scratch(Scratch which, size_t floats) {
  thread_local std::vector<float> buffers[2];
  std::vector<float>& buffer = buffers[which];
  if (buffer.size() < floats) buffer.resize(floats);
  return buffer.data();
}

// A chunk's tiles, transformed: [point][channel][tile]. Rows are padded off multiples of 4 KB and points shifted
// by a few cache lines, so the streams a transform writes, and an sgemm's rows, do not share cache sets (with a
// 1024-tile chunk and 64 channels, unpadded, all 16 points of F(2x2, 3x3) were 256 KB apart: 6x slower
// transforms).
struct TileBlock {
  float* data;
  int64_t lead, point_stride;
  TileBlock(float* data, int64_t channels, int64_t tiles)
      : data(data), lead(tiles + 8), point_stride(channels * (tiles + 8) + 32) {}
  static size_t floats(int points, int64_t channels, int64_t tiles) {
    return size_t(points) * size_t(channels * (tiles + 8) + 32);
  }
  float* point(int64_t index) const { return data + index * point_stride; }
};

// Filters (or weight sums), transformed: [point][output channel][input channel], points shifted as above.
int64_t filter_point_stride(int64_t outputs, int64_t inputs) { return outputs * inputs + 32; }

int64_t chunk_tiles(int points, int64_t tiles, int64_t channels_in, int64_t channels_out) {
  int64_t size = kChunkFloats / (points * (channels_in + channels_out));
  return std::clamp<int64_t>(size / 16 * 16, 16, tiles);
}

void sgemm(char transpose_left, char transpose_right, int64_t rows, int64_t columns, int64_t inner, const float* left,
           int64_t left_lead, const float* right, int64_t right_lead, float beta, float* output, int64_t output_lead) {
  dnnl_status_t status = dnnl_sgemm(transpose_left, transpose_right, rows, columns, inner, 1.0f, left, left_lead, right,
                                    right_lead, beta, output, output_lead);
  if (status != dnnl_success) throw std::runtime_error("oneDNN sgemm failed (status " + std::to_string(status) + ")");
}

// Row y of (n, c) from column `start` on, zeros outside the image, split into `size` phases:
// phases[p][j] = row[start + size j + p] for j in [0, count). The size is a template argument so the phase loops
// unroll (as a runtime value, splitting cost as much as the transform itself).
template <int size>
void split_row(const WinogradTensor& image, int64_t n, int64_t c, int64_t y, int64_t start, int64_t count,
               float* const* phases) {
  if (y < 0 || y >= image.dims[2]) {
    for (int phase = 0; phase < size; ++phase) std::fill(phases[phase], phases[phase] + count, 0.0f);
    return;
  }
  const float* row = &at(image, n, c, y, 0);
  int64_t width = image.dims[3], stride = image.strides[3];
  // Every phase inside the image for j in [inside_begin, inside_end): no tests there.
  int64_t inside_begin = start >= 0 ? 0 : std::min<int64_t>((size - 1 - start) / size, count);
  int64_t inside_end =
      width - start >= 0 ? std::clamp<int64_t>((width - start) / size, inside_begin, count) : inside_begin;
  for (int64_t j = 0; j < count; ++j) {
    if (j == inside_begin) {
      if (stride == 1) {
        for (; j < inside_end; ++j) {
          const float* group = row + start + size * j;
#pragma GCC unroll 8
          for (int phase = 0; phase < size; ++phase) phases[phase][j] = group[phase];
        }
      } else {  // a channels-last image: its rows step by the channel count
        for (; j < inside_end; ++j) {
          const float* group = row + (start + size * j) * stride;
#pragma GCC unroll 8
          for (int phase = 0; phase < size; ++phase) phases[phase][j] = group[phase * stride];
        }
      }
      if (j == count) break;
    }
    for (int phase = 0; phase < size; ++phase) {
      int64_t x = start + size * j + phase;
      phases[phase][j] = x >= 0 && x < width ? row[x * stride] : 0.0f;
    }
  }
}

// The post-ops on `width` outputs of row y of (n, o) from column x0, written at `row` with `stride`.
void apply_post_ops(const std::vector<WinogradPostOp>& post_ops, int64_t n, int64_t o, int64_t y, int64_t x0,
                    int64_t width, float* row, int64_t stride) {
  for (const WinogradPostOp& op : post_ops) {
    const float* operand =
        op.operand ? op.operand + n * op.strides[0] + o * op.strides[1] + y * op.strides[2] + x0 * op.strides[3]
                   : nullptr;
    int64_t step = op.strides[3];
    for (int64_t x = 0; x < width; ++x) {
      float& value = row[x * stride];
      switch (op.kind) {
        case WinogradPostOp::Kind::Relu: value = value < 0.0f ? 0.0f : value; break;  // NaN stays NaN
        case WinogradPostOp::Kind::Linear: value = value * op.scale + op.shift; break;
        case WinogradPostOp::Kind::Add: value += operand[x * step]; break;
        case WinogradPostOp::Kind::Subtract: value -= operand[x * step]; break;
        case WinogradPostOp::Kind::Multiply: value *= operand[x * step]; break;
      }
    }
  }
}

// Dilation d splits a convolution into d x d undilated ones, one per residue class of output rows and columns:
// output rows y = d u + a read source rows y + d r - pad = d (u + r + base) + b, with b = (a - pad) mod d and
// base = (a - pad - b) / d. That is the source's rows of residue b, read with padding -base.
struct Residue {
  int64_t output_first, source_first, padding;
};
Residue residue(int64_t output_first, int64_t pad, int64_t dilation) {
  int64_t source_first = ((output_first - pad) % dilation + dilation) % dilation;
  return {output_first, source_first, -((output_first - pad - source_first) / dilation)};
}

// Every `step`-th row and column of a tensor from (first_row, first_column): a view, extent 0 when none is left.
WinogradTensor every(const WinogradTensor& tensor, int64_t first_row, int64_t first_column, int64_t step) {
  WinogradTensor view = tensor;
  int64_t firsts[2] = {first_row, first_column};
  for (int dim = 2; dim < 4; ++dim) {
    int64_t first = firsts[dim - 2];
    view.dims[dim] = tensor.dims[dim] > first ? (tensor.dims[dim] - first + step - 1) / step : 0;
    view.data += (view.dims[dim] > 0 ? first : 0) * tensor.strides[dim];
    view.strides[dim] = tensor.strides[dim] * step;
  }
  return view;
}

bool is_empty(const WinogradTensor& tensor) {
  for (int64_t extent : tensor.dims)
    if (extent == 0) return true;
  return false;
}

void fill_zero(const WinogradTensor& tensor) {
  for (int64_t a = 0; a < tensor.dims[0]; ++a)
    for (int64_t b = 0; b < tensor.dims[1]; ++b)
      for (int64_t c = 0; c < tensor.dims[2]; ++c)
        for (int64_t d = 0; d < tensor.dims[3]; ++d) at(tensor, a, b, c, d) = 0.0f;
}

// The post-ops of the outputs `every(output, first_row, first_column, step)`: their tensors seen the same way.
std::vector<WinogradPostOp> every(std::vector<WinogradPostOp> post_ops, int64_t first_row, int64_t first_column,
                                  int64_t step) {
  for (WinogradPostOp& op : post_ops) {
    if (!op.operand) continue;
    op.operand += first_row * op.strides[2] + first_column * op.strides[3];
    op.strides[2] *= step;
    op.strides[3] *= step;
  }
  return post_ops;
}

// A one-dimensional transform (`in` values to `out`) applied along every row of a square block, then down every
// column: out = T x T^T. Inlined with constant bounds, so the loops over tiles around it still vectorise.
template <void (*transform)(const float*, float*), int in, int out>
__attribute__((always_inline)) inline void transform_2d(const float (&block)[in][in], float (&result)[out][out]) {
  float rows_done[in][out];
#pragma GCC unroll 8
  for (int r = 0; r < in; ++r) transform(block[r], rows_done[r]);
#pragma GCC unroll 8
  for (int s = 0; s < out; ++s) {
    float column[in], done[out];
#pragma GCC unroll 8
    for (int r = 0; r < in; ++r) column[r] = rows_done[r][s];
    transform(column, done);
#pragma GCC unroll 8
    for (int a = 0; a < out; ++a) result[a][s] = done[a];
  }
}

template <typename Tiling>
struct Winograd {
  static constexpr int kOutputs = Tiling::kOutputs, kWindow = Tiling::kWindow, kPoints = kWindow * kWindow;
  // Rows of tiles are transformed in pieces of at most kSegment tiles, through split rows of a fixed length
  // (kPhase floats a phase): every load of the loop over tiles is then one base plus a constant, instead of a
  // pointer per phase that spills (10% of the data transform).
  static constexpr int kSegment = 64, kPhase = kSegment + 8;

  // body(channel, n, i, row, first, count) for every piece of at most kSegment tiles, from column `first`, of
  // every row of tiles of the chunk (tile row i of image n, row `row` of the grid), for every channel; in
  // parallel over (channel, row of tiles).
  template <typename Body>
  static void for_each_piece(int64_t channels, const TileGrid& grid, const Chunk& chunk, const Body& body) {
    int64_t rows = chunk.row_count(grid);
    parallel_for(channels * rows, 1, [&](int64_t begin, int64_t end) {
      for (int64_t item = begin; item < end; ++item) {
        int64_t channel = item / rows, row = chunk.first_row(grid) + item % rows, last = chunk.end_column(grid, row);
        for (int64_t first = chunk.begin_column(grid, row); first < last; first += kSegment)
          body(channel, row / grid.rows, row % grid.rows, row, first, std::min<int64_t>(kSegment, last - first));
      }
    });
  }

  // transformed[point][c][tile - chunk.first] = (B^T d B)[point], d the window of `image` at
  // (m i - pad_top, m j - pad_left) for tile (n, i, j).
  static void transform_data(const WinogradTensor& image, const TileGrid& grid, const Chunk& chunk, int64_t pad_top,
                             int64_t pad_left, const TileBlock& transformed) {
    int64_t point_stride = transformed.point_stride;
    for_each_piece(image.dims[1], grid, chunk,
                   [&](int64_t c, int64_t n, int64_t i, int64_t row, int64_t first, int64_t count) {
                     alignas(64) float buffer[kWindow][kOutputs][kPhase];  // window row r, split by column phase
#pragma GCC unroll 8
                     for (int r = 0; r < kWindow; ++r) {
                       float* phases[kOutputs];
#pragma GCC unroll 8
                       for (int phase = 0; phase < kOutputs; ++phase) phases[phase] = buffer[r][phase];
                       split_row<kOutputs>(image, n, c, kOutputs * i + r - pad_top, kOutputs * first - pad_left,
                                           count + 1, phases);
                     }
                     float* out = transformed.data + c * transformed.lead + row * grid.columns + first - chunk.first;
#pragma GCC ivdep
                     for (int64_t j = 0; j < count; ++j) {
                       float window[kWindow][kWindow], done[kWindow][kWindow];
#pragma GCC unroll 8
                       for (int r = 0; r < kWindow; ++r)
#pragma GCC unroll 8
                         for (int k = 0; k < kWindow; ++k) window[r][k] = buffer[r][k % kOutputs][j + k / kOutputs];
                       transform_2d<Tiling::data>(window, done);
#pragma GCC unroll 8
                       for (int a = 0; a < kWindow; ++a)
#pragma GCC unroll 8
                         for (int s = 0; s < kWindow; ++s) out[(a * kWindow + s) * point_stride + j] = done[a][s];
                     }
                   });
  }

  // transformed[point][m][k] = (G g G^T)[point] for the 3x3 filter g of output channel m and input channel k:
  // weights[m, k] as stored, or with `turned` weights[k, m] rotated 180 degrees (backward data).
  static void transform_filters(const WinogradTensor& weights, bool turned, float* transformed) {
    int64_t outputs = turned ? weights.dims[1] : weights.dims[0], inputs = turned ? weights.dims[0] : weights.dims[1];
    int64_t point_stride = filter_point_stride(outputs, inputs);
    // Tap (r, s) of filter (m, k) at origin(m) + k * step + r * row_step + s * column_step: no branch in the loop.
    int64_t step = turned ? weights.strides[0] : weights.strides[1];
    int64_t row_step = turned ? -weights.strides[2] : weights.strides[2];
    int64_t column_step = turned ? -weights.strides[3] : weights.strides[3];
    parallel_for(outputs, 1, [&](int64_t begin, int64_t end) {
      for (int64_t m = begin; m < end; ++m) {
        const float* origin = turned ? &at(weights, 0, m, 2, 2) : &at(weights, m, 0, 0, 0);
#pragma GCC ivdep
        for (int64_t k = 0; k < inputs; ++k) {
          float taps[3][3], done[kWindow][kWindow];
#pragma GCC unroll 8
          for (int r = 0; r < 3; ++r)
#pragma GCC unroll 8
            for (int s = 0; s < 3; ++s) taps[r][s] = origin[k * step + r * row_step + s * column_step];
          transform_2d<Tiling::filter>(taps, done);
          float* out = transformed + m * inputs + k;
#pragma GCC unroll 8
          for (int a = 0; a < kWindow; ++a)
#pragma GCC unroll 8
            for (int s = 0; s < kWindow; ++s) out[(a * kWindow + s) * point_stride] = done[a][s];
        }
      }
    });
  }

  // output[n, o, m i + a, m j + b] = (A^T p A)[a][b] (+ bias[o], then the post-ops) for the chunk's tiles, p the
  // products of tile (n, i, j) and channel o; outputs past the tensor's edge are dropped.
  static void transform_products(const TileBlock& products, const TileGrid& grid, const Chunk& chunk,
                                 const WinogradTensor& output, const float* bias,
                                 const std::vector<WinogradPostOp>& post_ops) {
    int64_t point_stride = products.point_stride;
    for_each_piece(
        output.dims[1], grid, chunk, [&](int64_t o, int64_t n, int64_t i, int64_t row, int64_t first, int64_t count) {
          alignas(64) float buffer[kOutputs][kOutputs][kPhase];  // output row a of the tiles, split by column phase
          float shift = bias ? bias[o] : 0.0f;
          const float* p = products.data + o * products.lead + row * grid.columns + first - chunk.first;
#pragma GCC ivdep
          for (int64_t j = 0; j < count; ++j) {
            float tile[kWindow][kWindow], done[kOutputs][kOutputs];
#pragma GCC unroll 8
            for (int r = 0; r < kWindow; ++r)
#pragma GCC unroll 8
              for (int s = 0; s < kWindow; ++s) tile[r][s] = p[(r * kWindow + s) * point_stride + j];
            transform_2d<Tiling::output>(tile, done);
#pragma GCC unroll 8
            for (int a = 0; a < kOutputs; ++a)
#pragma GCC unroll 8
              for (int b = 0; b < kOutputs; ++b) buffer[a][b][j] = done[a][b] + shift;
          }
          int64_t x0 = kOutputs * first, width = std::min<int64_t>(kOutputs * (first + count), output.dims[3]) - x0;
          int64_t stride = output.strides[3], groups = width / kOutputs;
          for (int a = 0; a < kOutputs && kOutputs * i + a < output.dims[2]; ++a) {
            float* destination = &at(output, n, o, kOutputs * i + a, x0);
            if (stride == 1) {
              for (int64_t j = 0; j < groups; ++j)
#pragma GCC unroll 8
                for (int b = 0; b < kOutputs; ++b) destination[kOutputs * j + b] = buffer[a][b][j];
            } else {
              for (int64_t j = 0; j < groups; ++j)
#pragma GCC unroll 8
                for (int b = 0; b < kOutputs; ++b) destination[(kOutputs * j + b) * stride] = buffer[a][b][j];
            }
            for (int64_t x = groups * kOutputs; x < width; ++x)
              destination[x * stride] = buffer[a][x % kOutputs][groups];
            if (!post_ops.empty()) apply_post_ops(post_ops, n, o, kOutputs * i + a, x0, width, destination, stride);
          }
        });
  }

  // out[n, m, y, x] = sum over k, r, s of image[n, k, y + r - pad_top, x + s - pad_left] * g(m, k)[r][s], with
  // the filters already transformed: filters[point][m][k].
  static void correlate(const WinogradTensor& image, const float* filters, const WinogradTensor& output,
                        int64_t pad_top, int64_t pad_left, const float* bias,
                        const std::vector<WinogradPostOp>& post_ops) {
    int64_t inputs = image.dims[1], outputs = output.dims[1];
    TileGrid grid(output.dims[0], output.dims[2], output.dims[3], kOutputs);
    int64_t tiles = grid.count(), size = chunk_tiles(kPoints, tiles, inputs, outputs);
    size_t data_floats = TileBlock::floats(kPoints, inputs, size);
    float* memory = scratch(kTiles, data_floats + TileBlock::floats(kPoints, outputs, size));
    TileBlock data(memory, inputs, size), products(memory + data_floats, outputs, size);
    int64_t filter_stride = filter_point_stride(outputs, inputs);
    for (int64_t first = 0; first < tiles; first += size) {
      Chunk chunk{first, std::min(first + size, tiles)};
      transform_data(image, grid, chunk, pad_top, pad_left, data);
      parallel_for(kPoints, 1, [&](int64_t begin, int64_t end) {
        for (int64_t point = begin; point < end; ++point)
          sgemm('N', 'N', outputs, chunk.last - chunk.first, inputs, filters + point * filter_stride, inputs,
                data.point(point), data.lead, 0.0f, products.point(point), products.lead);
      });
      transform_products(products, grid, chunk, output, bias, post_ops);
    }
  }

  // transformed[point][o][tile - chunk.first] = (A e A^T)[point], e the m x m tile of `gradient` (zeros past its
  // edge).
  static void transform_gradient_tiles(const WinogradTensor& gradient, const TileGrid& grid, const Chunk& chunk,
                                       const TileBlock& transformed) {
    int64_t point_stride = transformed.point_stride;
    for_each_piece(gradient.dims[1], grid, chunk,
                   [&](int64_t o, int64_t n, int64_t i, int64_t row, int64_t first, int64_t count) {
                     alignas(64) float buffer[kOutputs][kOutputs][kPhase];  // tile row a, split by column phase
#pragma GCC unroll 8
                     for (int a = 0; a < kOutputs; ++a) {
                       float* phases[kOutputs];
#pragma GCC unroll 8
                       for (int b = 0; b < kOutputs; ++b) phases[b] = buffer[a][b];
                       split_row<kOutputs>(gradient, n, o, kOutputs * i + a, kOutputs * first, count, phases);
                     }
                     float* out = transformed.data + o * transformed.lead + row * grid.columns + first - chunk.first;
#pragma GCC ivdep
                     for (int64_t j = 0; j < count; ++j) {
                       float tile[kOutputs][kOutputs], done[kWindow][kWindow];
#pragma GCC unroll 8
                       for (int a = 0; a < kOutputs; ++a)
#pragma GCC unroll 8
                         for (int b = 0; b < kOutputs; ++b) tile[a][b] = buffer[a][b][j];
                       transform_2d<Tiling::gradient>(tile, done);
#pragma GCC unroll 8
                       for (int q = 0; q < kWindow; ++q)
#pragma GCC unroll 8
                         for (int s = 0; s < kWindow; ++s) out[(q * kWindow + s) * point_stride + j] = done[q][s];
                     }
                   });
  }

  // diff_weights[o, c] = G^T s G, s = sums[point][o][c].
  static void transform_weight_sums(const float* sums, const WinogradTensor& diff_weights) {
    int64_t outputs = diff_weights.dims[0], inputs = diff_weights.dims[1];
    int64_t point_stride = filter_point_stride(outputs, inputs);
    parallel_for(outputs, 1, [&](int64_t begin, int64_t end) {
      for (int64_t o = begin; o < end; ++o)
#pragma GCC ivdep
        for (int64_t c = 0; c < inputs; ++c) {
          const float* s = sums + o * inputs + c;
          float block[kWindow][kWindow], done[3][3];
#pragma GCC unroll 8
          for (int r = 0; r < kWindow; ++r)
#pragma GCC unroll 8
            for (int q = 0; q < kWindow; ++q) block[r][q] = s[(r * kWindow + q) * point_stride];
          transform_2d<Tiling::weight_sum>(block, done);
#pragma GCC unroll 8
          for (int r = 0; r < 3; ++r)
#pragma GCC unroll 8
            for (int q = 0; q < 3; ++q) at(diff_weights, o, c, r, q) = done[r][q];
        }
    });
  }

  static void forward(const WinogradTensor& source, const WinogradTensor& weights, const WinogradTensor& destination,
                      int64_t pad_top, int64_t pad_left, int64_t dilation, const float* bias,
                      const std::vector<WinogradPostOp>& post_ops) {
    float* filters = scratch(kFilters, size_t(kPoints) * filter_point_stride(weights.dims[0], weights.dims[1]));
    transform_filters(weights, false, filters);
    for (int64_t row = 0; row < dilation; ++row)
      for (int64_t column = 0; column < dilation; ++column) {
        Residue rows = residue(row, pad_top, dilation), columns = residue(column, pad_left, dilation);
        WinogradTensor output = every(destination, row, column, dilation);
        if (is_empty(output)) continue;
        correlate(every(source, rows.source_first, columns.source_first, dilation), filters, output, rows.padding,
                  columns.padding, bias, every(post_ops, row, column, dilation));
      }
  }

  static void backward_data(const WinogradTensor& diff_destination, const WinogradTensor& weights,
                            const WinogradTensor& diff_source, int64_t pad_top, int64_t pad_left, int64_t dilation) {
    float* filters = scratch(kFilters, size_t(kPoints) * filter_point_stride(weights.dims[1], weights.dims[0]));
    transform_filters(weights, true, filters);
    // Each residue class of the source takes its gradient from one class of the output (the map is one to one).
    for (int64_t row = 0; row < dilation; ++row)
      for (int64_t column = 0; column < dilation; ++column) {
        Residue rows = residue(row, pad_top, dilation), columns = residue(column, pad_left, dilation);
        WinogradTensor source = every(diff_source, rows.source_first, columns.source_first, dilation);
        WinogradTensor gradient = every(diff_destination, row, column, dilation);
        if (is_empty(source)) continue;
        if (is_empty(gradient)) {
          fill_zero(source);
          continue;
        }
        // source[y] takes gradient[y - r + pad] * w[r] = gradient[y + r' - (2 - pad)] * w[2 - r']: a correlation
        // with the turned filters, padded by 2 - pad.
        correlate(gradient, filters, source, 2 - rows.padding, 2 - columns.padding, nullptr, {});
      }
  }

  static void backward_weights(const WinogradTensor& full_source, const WinogradTensor& full_gradient,
                               const WinogradTensor& diff_weights, int64_t pad_top, int64_t pad_left,
                               int64_t dilation) {
    int64_t outputs = diff_weights.dims[0], inputs = diff_weights.dims[1];
    int64_t sum_stride = filter_point_stride(outputs, inputs);
    float* sums = scratch(kFilters, size_t(kPoints) * sum_stride);
    bool summed = false;  // the sums hold something: later products add to them
    for (int64_t row = 0; row < dilation; ++row)
      for (int64_t column = 0; column < dilation; ++column) {
        Residue rows = residue(row, pad_top, dilation), columns = residue(column, pad_left, dilation);
        WinogradTensor source = every(full_source, rows.source_first, columns.source_first, dilation);
        WinogradTensor gradient = every(full_gradient, row, column, dilation);
        if (is_empty(gradient)) continue;
        TileGrid grid(gradient.dims[0], gradient.dims[2], gradient.dims[3], kOutputs);
        int64_t tiles = grid.count(), size = chunk_tiles(kPoints, tiles, inputs, outputs);
        size_t data_floats = TileBlock::floats(kPoints, inputs, size);
        float* memory = scratch(kTiles, data_floats + TileBlock::floats(kPoints, outputs, size));
        TileBlock data(memory, inputs, size), gradients(memory + data_floats, outputs, size);
        for (int64_t first = 0; first < tiles; first += size) {
          Chunk chunk{first, std::min(first + size, tiles)};
          transform_data(source, grid, chunk, rows.padding, columns.padding, data);
          transform_gradient_tiles(gradient, grid, chunk, gradients);
          float beta = summed ? 1.0f : 0.0f;
          parallel_for(kPoints, 1, [&](int64_t begin, int64_t end) {
            for (int64_t point = begin; point < end; ++point)
              sgemm('N', 'T', outputs, inputs, chunk.last - chunk.first, gradients.point(point), gradients.lead,
                    data.point(point), data.lead, beta, sums + point * sum_stride, inputs);
          });
          summed = true;
        }
      }
    if (!summed) std::fill(sums, sums + kPoints * sum_stride, 0.0f);
    transform_weight_sums(sums, diff_weights);
  }
};

void check_filter(const WinogradTensor& weights) {
  if (weights.dims[2] != 3 || weights.dims[3] != 3)
    throw std::invalid_argument("Winograd convolutions take 3x3 filters, got " + std::to_string(weights.dims[2]) + "x" +
                                std::to_string(weights.dims[3]));
}

}  // namespace

const char* winograd_tiling_name(WinogradTiling tiling) {
  return tiling == WinogradTiling::FourByFour ? "F(4x4,3x3)" : "F(2x2,3x3)";
}

bool winograd_takes(int64_t padding, int64_t dilation) {
  if (dilation < 1) return false;
  for (int64_t first = 0; first < dilation; ++first) {
    int64_t taken = residue(first, padding, dilation).padding;
    if (taken < 0 || taken > 2) return false;
  }
  return true;
}

void winograd_forward(WinogradTiling tiling, const WinogradTensor& source, const WinogradTensor& weights,
                      const WinogradTensor& destination, int64_t pad_top, int64_t pad_left, int64_t dilation,
                      const float* bias, const std::vector<WinogradPostOp>& post_ops) {
  check_filter(weights);
  if (tiling == WinogradTiling::FourByFour)
    Winograd<FourOutputs>::forward(source, weights, destination, pad_top, pad_left, dilation, bias, post_ops);
  else
    Winograd<TwoOutputs>::forward(source, weights, destination, pad_top, pad_left, dilation, bias, post_ops);
}

void winograd_backward_data(WinogradTiling tiling, const WinogradTensor& diff_destination,
                            const WinogradTensor& weights, const WinogradTensor& diff_source, int64_t pad_top,
                            int64_t pad_left, int64_t dilation) {
  check_filter(weights);
  if (tiling == WinogradTiling::FourByFour)
    Winograd<FourOutputs>::backward_data(diff_destination, weights, diff_source, pad_top, pad_left, dilation);
  else
    Winograd<TwoOutputs>::backward_data(diff_destination, weights, diff_source, pad_top, pad_left, dilation);
}

void winograd_backward_weights(WinogradTiling tiling, const WinogradTensor& source,
                               const WinogradTensor& diff_destination, const WinogradTensor& diff_weights,
                               int64_t pad_top, int64_t pad_left, int64_t dilation) {
  check_filter(diff_weights);
  if (tiling == WinogradTiling::FourByFour)
    Winograd<FourOutputs>::backward_weights(source, diff_destination, diff_weights, pad_top, pad_left, dilation);
  else
    Winograd<TwoOutputs>::backward_weights(source, diff_destination, diff_weights, pad_top, pad_left, dilation);
}

}  // namespace metajit
