// Layout of the work: the tiles of the output grid are taken in chunks small enough that a chunk's transformed
// tensors stay in cache. For each chunk, the transforms run in parallel over (channel, tile row) pairs, the 16
// matrix products in parallel over the 16 points (each sgemm single-threaded inside the parallel loop), and the
// transforms back again over (channel, tile row). Transformed tensors are [point][channel][tile], so every
// transform reads and writes whole rows of consecutive tiles, and every product is one plain row-major sgemm.
//
// The matrices (one dimension; two dimensions apply them to rows and then to columns):
//   B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1]    data (4 points)
//   G   = [1 0 0; 1/2 1/2 1/2; 1/2 -1/2 1/2; 0 0 1]  filter (3 taps)
//   A^T = [1 1 1 0; 0 1 -1 -1]                        products -> 2 outputs
// F(2, 3): y = A^T [(G g) . (B^T d)]. Its transpose F(3, 2), for the weight gradient: z = G^T [(A e) . (B^T d)].
#include "ops/winograd_convolution.h"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include <oneapi/dnnl/dnnl.h>

#include "core/thread_pool.h"

namespace metajit {
namespace {

constexpr int kPoints = 16;  // the transformed tile is 4x4
// A chunk's transformed tensors hold about this many floats (8 MB): cached while its products run.
constexpr int64_t kChunkFloats = int64_t(2) << 20;

float& at(const WinogradTensor& tensor, int64_t a, int64_t b, int64_t c, int64_t d) {
  return tensor.data[a * tensor.strides[0] + b * tensor.strides[1] + c * tensor.strides[2] + d * tensor.strides[3]];
}

// The 2x2 output tiles covering a [batch, ., height, width] tensor.
struct TileGrid {
  int64_t batch, rows, columns;
  TileGrid(int64_t batch, int64_t height, int64_t width) : batch(batch), rows((height + 1) / 2), columns((width + 1) / 2) {}
  int64_t count() const { return batch * rows * columns; }
};

// Tiles [first, last) of a grid, a chunk: the tile rows (image, row of tiles) it touches, and for each the
// columns of tiles inside the chunk.
struct Chunk {
  int64_t first, last;
  int64_t first_row(const TileGrid& grid) const { return first / grid.columns; }
  int64_t row_count(const TileGrid& grid) const { return (last - 1) / grid.columns + 1 - first_row(grid); }
  int64_t begin_column(const TileGrid& grid, int64_t row) const { return std::max<int64_t>(first - row * grid.columns, 0); }
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
// by a few cache lines, so the 16 streams a transform writes, and an sgemm's rows, do not share cache sets (with
// a 1024-tile chunk and 64 channels, unpadded, all 16 would be 256 KB apart: 6x slower transforms).
struct TileBlock {
  float* data;
  int64_t lead, point_stride;
  TileBlock(float* data, int64_t channels, int64_t tiles)
      : data(data), lead(tiles + 8), point_stride(channels * (tiles + 8) + 32) {}
  static size_t floats(int64_t channels, int64_t tiles) { return size_t(kPoints) * (channels * (tiles + 8) + 32); }
  float* point(int64_t index) const { return data + index * point_stride; }
};

// Filters (or weight sums), transformed: [point][output channel][input channel], points shifted as above.
int64_t filter_point_stride(int64_t outputs, int64_t inputs) { return outputs * inputs + 32; }

int64_t chunk_tiles(int64_t tiles, int64_t channels_in, int64_t channels_out) {
  int64_t size = kChunkFloats / (kPoints * (channels_in + channels_out));
  return std::clamp<int64_t>(size / 16 * 16, 16, tiles);
}

void sgemm(char transpose_left, char transpose_right, int64_t rows, int64_t columns, int64_t inner, const float* left,
           int64_t left_lead, const float* right, int64_t right_lead, float beta, float* output, int64_t output_lead) {
  dnnl_status_t status = dnnl_sgemm(transpose_left, transpose_right, rows, columns, inner, 1.0f, left, left_lead, right,
                                    right_lead, beta, output, output_lead);
  if (status != dnnl_success) throw std::runtime_error("oneDNN sgemm failed (status " + std::to_string(status) + ")");
}

// Copies image row y of (n, c), columns [2 * begin - pad_left, 2 * end + 2 - pad_left), zeros outside the image,
// split into even and odd columns: even[j] and odd[j] are the columns 2j and 2j + 1 of the window.
void split_row(const WinogradTensor& image, int64_t n, int64_t c, int64_t y, int64_t begin, int64_t end,
               int64_t pad_left, float* even, float* odd) {
  int64_t count = end - begin + 1;
  if (y < 0 || y >= image.dims[2]) {
    std::fill(even, even + count, 0.0f);
    std::fill(odd, odd + count, 0.0f);
    return;
  }
  const float* row = &at(image, n, c, y, 0);
  int64_t width = image.dims[3], stride = image.strides[3], start = 2 * begin - pad_left;
  // Window columns start + 2j (+ 1) inside the image for j in [inside_begin, inside_end): no tests there.
  int64_t inside_begin = std::clamp<int64_t>((-start + 1) / 2, 0, count);
  int64_t inside_end = std::clamp<int64_t>((width - start) / 2, inside_begin, count);
  for (int64_t j = 0; j < count; ++j) {
    if (j == inside_begin && stride == 1) {
      const float* pair = row + start + 2 * j;
      for (; j < inside_end; ++j, pair += 2) {
        even[j] = pair[0];
        odd[j] = pair[1];
      }
      if (j == count) break;
    }
    int64_t x = start + 2 * j;
    even[j] = x >= 0 && x < width ? row[x * stride] : 0.0f;
    odd[j] = x + 1 >= 0 && x + 1 < width ? row[(x + 1) * stride] : 0.0f;
  }
}

// transformed[point][c][tile - chunk.first] = (B^T d B)[point], d the 4x4 window of `image` at
// (2i - pad_top, 2j - pad_left) for tile (n, i, j).
void transform_data(const WinogradTensor& image, const TileGrid& grid, const Chunk& chunk, int64_t pad_top,
                    int64_t pad_left, const TileBlock& transformed) {
  int64_t channels = image.dims[1], rows = chunk.row_count(grid), point_stride = transformed.point_stride;
  parallel_for(channels * rows, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> buffer(8 * (grid.columns + 1));
    for (int64_t item = begin; item < end; ++item) {
      int64_t c = item / rows, row = chunk.first_row(grid) + item % rows, n = row / grid.rows, i = row % grid.rows;
      int64_t first = chunk.begin_column(grid, row), last = chunk.end_column(grid, row), count = last - first;
      float* halves[4][2];  // window row r split into even and odd columns
      for (int r = 0; r < 4; ++r) {
        halves[r][0] = buffer.data() + 2 * r * (grid.columns + 1);
        halves[r][1] = halves[r][0] + grid.columns + 1;
        split_row(image, n, c, 2 * i + r - pad_top, first, last, pad_left, halves[r][0], halves[r][1]);
      }
      float* out = transformed.data + c * transformed.lead + row * grid.columns + first - chunk.first;
#pragma GCC ivdep
      for (int64_t j = 0; j < count; ++j) {
        float v[4][4];
        for (int r = 0; r < 4; ++r) {  // B^T along the rows
          float d0 = halves[r][0][j], d1 = halves[r][1][j], d2 = halves[r][0][j + 1], d3 = halves[r][1][j + 1];
          v[r][0] = d0 - d2;
          v[r][1] = d1 + d2;
          v[r][2] = d2 - d1;
          v[r][3] = d1 - d3;
        }
        for (int s = 0; s < 4; ++s) {  // B^T down the columns
          out[(0 * 4 + s) * point_stride + j] = v[0][s] - v[2][s];
          out[(1 * 4 + s) * point_stride + j] = v[1][s] + v[2][s];
          out[(2 * 4 + s) * point_stride + j] = v[2][s] - v[1][s];
          out[(3 * 4 + s) * point_stride + j] = v[1][s] - v[3][s];
        }
      }
    }
  });
}

// transformed[point][m][k] = (G g G^T)[point] for the 3x3 filter g of output channel m and input channel k:
// weights[m, k] as stored, or with `turned` weights[k, m] rotated 180 degrees (backward data).
void transform_filters(const WinogradTensor& weights, bool turned, float* transformed) {
  int64_t outputs = turned ? weights.dims[1] : weights.dims[0], inputs = turned ? weights.dims[0] : weights.dims[1];
  int64_t point_stride = filter_point_stride(outputs, inputs);
  parallel_for(outputs, 1, [&](int64_t begin, int64_t end) {
    for (int64_t m = begin; m < end; ++m)
#pragma GCC ivdep
      for (int64_t k = 0; k < inputs; ++k) {
        float g[3][3], t[4][3];
        for (int r = 0; r < 3; ++r)
          for (int s = 0; s < 3; ++s) g[r][s] = turned ? at(weights, k, m, 2 - r, 2 - s) : at(weights, m, k, r, s);
        for (int s = 0; s < 3; ++s) {  // G down the columns
          t[0][s] = g[0][s];
          t[1][s] = 0.5f * (g[0][s] + g[1][s] + g[2][s]);
          t[2][s] = 0.5f * (g[0][s] - g[1][s] + g[2][s]);
          t[3][s] = g[2][s];
        }
        float* out = transformed + m * inputs + k;
        for (int r = 0; r < 4; ++r) {  // G along the rows
          out[(r * 4 + 0) * point_stride] = t[r][0];
          out[(r * 4 + 1) * point_stride] = 0.5f * (t[r][0] + t[r][1] + t[r][2]);
          out[(r * 4 + 2) * point_stride] = 0.5f * (t[r][0] - t[r][1] + t[r][2]);
          out[(r * 4 + 3) * point_stride] = t[r][2];
        }
      }
  });
}

// output[n, m, 2i + a, 2j + b] = (A^T p A)[a][b] (+ bias[m]) for the chunk's tiles, p the 4x4 products of tile
// (n, i, j) and channel m; outputs past the tensor's edge (odd sizes) are dropped.
void transform_products(const TileBlock& products, const TileGrid& grid, const Chunk& chunk,
                        const WinogradTensor& output, const float* bias) {
  int64_t channels = output.dims[1], rows = chunk.row_count(grid), point_stride = products.point_stride;
  parallel_for(channels * rows, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> buffer(4 * (grid.columns + 1));
    for (int64_t item = begin; item < end; ++item) {
      int64_t m = item / rows, row = chunk.first_row(grid) + item % rows, n = row / grid.rows, i = row % grid.rows;
      int64_t first = chunk.begin_column(grid, row), last = chunk.end_column(grid, row), count = last - first;
      const float* p = products.data + m * products.lead + row * grid.columns + first - chunk.first;
      float* halves[2][2];  // output rows 2i and 2i + 1, even and odd columns from 2 * first
      for (int a = 0; a < 2; ++a) {
        halves[a][0] = buffer.data() + 2 * a * (grid.columns + 1);
        halves[a][1] = halves[a][0] + grid.columns + 1;
      }
      float shift = bias ? bias[m] : 0.0f;
#pragma GCC ivdep
      for (int64_t j = 0; j < count; ++j) {
        float z[2][4];
        for (int s = 0; s < 4; ++s) {  // A^T down the columns
          float p0 = p[(0 * 4 + s) * point_stride + j], p1 = p[(1 * 4 + s) * point_stride + j];
          float p2 = p[(2 * 4 + s) * point_stride + j], p3 = p[(3 * 4 + s) * point_stride + j];
          z[0][s] = p0 + p1 + p2;
          z[1][s] = p1 - p2 - p3;
        }
        for (int a = 0; a < 2; ++a) {  // A^T along the rows
          halves[a][0][j] = z[a][0] + z[a][1] + z[a][2] + shift;
          halves[a][1][j] = z[a][1] - z[a][2] - z[a][3] + shift;
        }
      }
      int64_t x0 = 2 * first, width = std::min<int64_t>(2 * last, output.dims[3]) - x0, stride = output.strides[3];
      for (int a = 0; a < 2 && 2 * i + a < output.dims[2]; ++a) {
        float* destination = &at(output, n, m, 2 * i + a, x0);
        const float *even = halves[a][0], *odd = halves[a][1];
        int64_t pairs = width / 2;
        if (stride == 1) {
          for (int64_t j = 0; j < pairs; ++j) {
            destination[2 * j] = even[j];
            destination[2 * j + 1] = odd[j];
          }
        } else {
          for (int64_t j = 0; j < pairs; ++j) {
            destination[2 * j * stride] = even[j];
            destination[(2 * j + 1) * stride] = odd[j];
          }
        }
        if (width % 2) destination[(width - 1) * stride] = even[pairs];
      }
    }
  });
}

// out[n, m, y, x] = sum over k, r, s of image[n, k, y + r - pad_top, x + s - pad_left] * g(m, k)[r][s], with the
// filters already transformed: filters[point][m][k].
void correlate(const WinogradTensor& image, const float* filters, const WinogradTensor& output, int64_t pad_top,
               int64_t pad_left, const float* bias) {
  int64_t inputs = image.dims[1], outputs = output.dims[1];
  TileGrid grid(output.dims[0], output.dims[2], output.dims[3]);
  int64_t tiles = grid.count(), size = chunk_tiles(tiles, inputs, outputs);
  float* memory = scratch(kTiles, TileBlock::floats(inputs, size) + TileBlock::floats(outputs, size));
  TileBlock data(memory, inputs, size), products(memory + TileBlock::floats(inputs, size), outputs, size);
  int64_t filter_stride = filter_point_stride(outputs, inputs);
  for (int64_t first = 0; first < tiles; first += size) {
    Chunk chunk{first, std::min(first + size, tiles)};
    transform_data(image, grid, chunk, pad_top, pad_left, data);
    parallel_for(kPoints, 1, [&](int64_t begin, int64_t end) {
      for (int64_t point = begin; point < end; ++point)
        sgemm('N', 'N', outputs, chunk.last - chunk.first, inputs, filters + point * filter_stride, inputs,
              data.point(point), data.lead, 0.0f, products.point(point), products.lead);
    });
    transform_products(products, grid, chunk, output, bias);
  }
}

// transformed[point][o][tile - chunk.first] = (A e A^T)[point], e the 2x2 tile of `gradient` (zeros past its edge).
void transform_gradient_tiles(const WinogradTensor& gradient, const TileGrid& grid, const Chunk& chunk,
                              const TileBlock& transformed) {
  int64_t channels = gradient.dims[1], rows = chunk.row_count(grid), point_stride = transformed.point_stride;
  parallel_for(channels * rows, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> buffer(4 * (grid.columns + 1));
    for (int64_t item = begin; item < end; ++item) {
      int64_t o = item / rows, row = chunk.first_row(grid) + item % rows, n = row / grid.rows, i = row % grid.rows;
      int64_t first = chunk.begin_column(grid, row), last = chunk.end_column(grid, row), count = last - first;
      float* halves[2][2];
      for (int a = 0; a < 2; ++a) {
        halves[a][0] = buffer.data() + 2 * a * (grid.columns + 1);
        halves[a][1] = halves[a][0] + grid.columns + 1;
        split_row(gradient, n, o, 2 * i + a, first, last, 0, halves[a][0], halves[a][1]);
      }
      float* out = transformed.data + o * transformed.lead + row * grid.columns + first - chunk.first;
#pragma GCC ivdep
      for (int64_t j = 0; j < count; ++j) {
        float t[2][4];
        for (int a = 0; a < 2; ++a) {  // A along the rows: (e0, e0 + e1, e0 - e1, -e1)
          float e0 = halves[a][0][j], e1 = halves[a][1][j];
          t[a][0] = e0;
          t[a][1] = e0 + e1;
          t[a][2] = e0 - e1;
          t[a][3] = -e1;
        }
        for (int s = 0; s < 4; ++s) {  // A down the columns
          out[(0 * 4 + s) * point_stride + j] = t[0][s];
          out[(1 * 4 + s) * point_stride + j] = t[0][s] + t[1][s];
          out[(2 * 4 + s) * point_stride + j] = t[0][s] - t[1][s];
          out[(3 * 4 + s) * point_stride + j] = -t[1][s];
        }
      }
    }
  });
}

// diff_weights[o, c] = G^T s G, s = sums[point][o][c].
void transform_weight_sums(const float* sums, const WinogradTensor& diff_weights) {
  int64_t outputs = diff_weights.dims[0], inputs = diff_weights.dims[1];
  int64_t point_stride = filter_point_stride(outputs, inputs);
  parallel_for(outputs, 1, [&](int64_t begin, int64_t end) {
    for (int64_t o = begin; o < end; ++o)
#pragma GCC ivdep
      for (int64_t c = 0; c < inputs; ++c) {
        const float* s = sums + o * inputs + c;
        float t[3][4];
        for (int q = 0; q < 4; ++q) {  // G^T down the columns
          float s0 = s[(0 * 4 + q) * point_stride], s1 = s[(1 * 4 + q) * point_stride];
          float s2 = s[(2 * 4 + q) * point_stride], s3 = s[(3 * 4 + q) * point_stride];
          t[0][q] = s0 + 0.5f * (s1 + s2);
          t[1][q] = 0.5f * (s1 - s2);
          t[2][q] = 0.5f * (s1 + s2) + s3;
        }
        for (int r = 0; r < 3; ++r) {  // G^T along the rows
          at(diff_weights, o, c, r, 0) = t[r][0] + 0.5f * (t[r][1] + t[r][2]);
          at(diff_weights, o, c, r, 1) = 0.5f * (t[r][1] - t[r][2]);
          at(diff_weights, o, c, r, 2) = 0.5f * (t[r][1] + t[r][2]) + t[r][3];
        }
      }
  });
}

void check_filter(const WinogradTensor& weights) {
  if (weights.dims[2] != 3 || weights.dims[3] != 3)
    throw std::invalid_argument("Winograd F(2x2, 3x3) takes 3x3 filters, got " + std::to_string(weights.dims[2]) + "x" +
                                std::to_string(weights.dims[3]));
}

}  // namespace

void winograd_forward(const WinogradTensor& source, const WinogradTensor& weights, const WinogradTensor& destination,
                      int64_t pad_top, int64_t pad_left, const float* bias) {
  check_filter(weights);
  float* filters = scratch(kFilters, size_t(kPoints) * filter_point_stride(weights.dims[0], weights.dims[1]));
  transform_filters(weights, false, filters);
  correlate(source, filters, destination, pad_top, pad_left, bias);
}

void winograd_backward_data(const WinogradTensor& diff_destination, const WinogradTensor& weights,
                            const WinogradTensor& diff_source, int64_t pad_top, int64_t pad_left) {
  check_filter(weights);
  float* filters = scratch(kFilters, size_t(kPoints) * filter_point_stride(weights.dims[1], weights.dims[0]));
  transform_filters(weights, true, filters);
  // diff_source[y] takes diff_destination[y - r + pad_top] * w[r] = diff_destination[y + r' - (2 - pad_top)] *
  // w[2 - r']: a correlation with the turned filters, padded by 2 - pad.
  correlate(diff_destination, filters, diff_source, 2 - pad_top, 2 - pad_left, nullptr);
}

void winograd_backward_weights(const WinogradTensor& source, const WinogradTensor& diff_destination,
                               const WinogradTensor& diff_weights, int64_t pad_top, int64_t pad_left) {
  check_filter(diff_weights);
  int64_t outputs = diff_weights.dims[0], inputs = diff_weights.dims[1];
  TileGrid grid(diff_destination.dims[0], diff_destination.dims[2], diff_destination.dims[3]);
  int64_t tiles = grid.count(), size = chunk_tiles(tiles, inputs, outputs);
  int64_t sum_stride = filter_point_stride(outputs, inputs);
  float* sums = scratch(kFilters, size_t(kPoints) * sum_stride);
  float* memory = scratch(kTiles, TileBlock::floats(inputs, size) + TileBlock::floats(outputs, size));
  TileBlock data(memory, inputs, size), gradients(memory + TileBlock::floats(inputs, size), outputs, size);
  for (int64_t first = 0; first < tiles; first += size) {
    Chunk chunk{first, std::min(first + size, tiles)};
    transform_data(source, grid, chunk, pad_top, pad_left, data);
    transform_gradient_tiles(diff_destination, grid, chunk, gradients);
    float beta = first == 0 ? 0.0f : 1.0f;
    parallel_for(kPoints, 1, [&](int64_t begin, int64_t end) {
      for (int64_t point = begin; point < end; ++point)
        sgemm('N', 'T', outputs, inputs, chunk.last - chunk.first, gradients.point(point), gradients.lead,
              data.point(point), data.lead, beta, sums + point * sum_stride, inputs);
    });
  }
  transform_weight_sums(sums, diff_weights);
}

}  // namespace metajit
