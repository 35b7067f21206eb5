// Matrix products: every loop variable indexes exactly two or three of the tensors; grouping them by which
// (batch: all three, rows: output+left, columns: output+right, inner: left+right) and merging each group into
// one dimension (possible when its variables nest like a row-major block in every tensor) gives the problem.
// Convolutions: exactly one tensor (the image) has a dimension indexed by stride*o + dilation*k + constant;
// its batch and channel dimensions then tell which of the other two tensors is the weight and which the
// output-side tensor, and the pass follows from which of the three the kernel writes.
#include "jit/library_call/contraction_patterns.h"

#include <algorithm>
#include <set>
#include <sstream>
#include <type_traits>

namespace metajit {
namespace {

int64_t extent_of(const Contraction& contraction, const std::string& variable) {
  auto found = contraction.extents.find(variable);
  return found == contraction.extents.end() ? 1 : found->second;
}

// A size-1 dimension's stride is never used to address anything; give it a harmless non-zero value because
// libraries validate strides.
void fill_unit_strides(TensorLayout* layout) {
  int64_t span = 1;
  for (size_t dim = 0; dim < layout->dims.size(); ++dim)
    if (layout->dims[dim] > 1) span = std::max(span, layout->strides[dim] * layout->dims[dim]);
  for (size_t dim = 0; dim < layout->dims.size(); ++dim)
    if (layout->dims[dim] == 1) layout->strides[dim] = span;
}

// Whether dimension `dim` of `access` visits each of its positions exactly once: one variable (or 0 for a
// size-1 dimension) covering it, or a split variable's k * (v / k) + v % k: variables that nest like digits, the
// smallest with coefficient 1. The variables go into `seen`; false if one is there already. With `whole` false,
// a leading part of the dimension (a slice) is enough.
bool covers_dimension(const Contraction& contraction, const TensorAccess& access, size_t dim,
                      std::set<std::string>* seen, bool whole = true) {
  const AffineIndex& index = access.coordinates[dim];
  if (access.guarded[dim] || index.constant != 0) return false;
  std::vector<std::pair<int64_t, std::string>> digits;
  for (const auto& [variable, coefficient] : index.terms) digits.emplace_back(coefficient, variable);
  std::sort(digits.begin(), digits.end());
  int64_t covered = 1;
  for (const auto& [coefficient, variable] : digits) {
    if (coefficient != covered || !seen->insert(variable).second) return false;
    covered *= extent_of(contraction, variable);
  }
  return whole ? covered == access.shape[dim] : covered <= access.shape[dim];
}

// The output must be written exactly once per element: every dimension covered, by different variables.
bool covers_output_once(const Contraction& contraction) {
  std::set<std::string> seen;
  for (size_t dim = 0; dim < contraction.output.shape.size(); ++dim)
    if (!covers_dimension(contraction, contraction.output, dim, &seen)) return false;
  return true;
}

struct MergedDimension {
  int64_t extent = 1;
  int64_t strides[3] = {0, 0, 0};  // output, left, right
};

// Merges variables into one dimension when they nest: outer coefficient == inner coefficient * inner extent
// in every tensor.
bool merge(const Contraction& contraction, std::vector<std::string> variables, const AffineIndex* flats[3],
           int order_by, MergedDimension* merged) {
  auto coefficient = [&](int tensor, const std::string& variable) {
    auto found = flats[tensor]->terms.find(variable);
    return found == flats[tensor]->terms.end() ? int64_t(0) : found->second;
  };
  std::sort(variables.begin(), variables.end(), [&](const std::string& a, const std::string& b) {
    return coefficient(order_by, a) > coefficient(order_by, b);
  });
  for (size_t position = 0; position + 1 < variables.size(); ++position) {
    const std::string& outer = variables[position];
    const std::string& inner = variables[position + 1];
    for (int tensor = 0; tensor < 3; ++tensor)
      if (coefficient(tensor, outer) != coefficient(tensor, inner) * extent_of(contraction, inner)) return false;
  }
  for (const std::string& variable : variables) merged->extent *= extent_of(contraction, variable);
  if (!variables.empty())
    for (int tensor = 0; tensor < 3; ++tensor) merged->strides[tensor] = coefficient(tensor, variables.back());
  return true;
}

bool nonnegative_offsets(const AffineIndex* flats[3]) {
  for (int tensor = 0; tensor < 3; ++tensor)
    if (flats[tensor]->constant < 0) return false;
  return true;
}

std::string layout_key(const TensorLayout& layout) {
  std::ostringstream text;
  text << layout.buffer << "+" << layout.offset << ":";
  for (size_t dim = 0; dim < layout.dims.size(); ++dim) text << layout.dims[dim] << "/" << layout.strides[dim] << ",";
  return text.str();
}

std::string post_ops_key(const std::optional<TensorLayout>& bias, const std::vector<LibraryPostOp>& post_ops) {
  std::string text = bias ? "|bias " + layout_key(*bias) : "";
  for (const LibraryPostOp& op : post_ops) {
    text += "|" + op.op.describe();
    if (op.operand) text += " as " + layout_key(*op.operand);
  }
  return text;
}

int64_t coefficient_of(const AffineIndex& flat, const std::string& variable) {
  auto found = flat.terms.find(variable);
  return found == flat.terms.end() ? 0 : found->second;
}

// A post-op's tensor laid out along the library's destination dims. `dims` lists each dim's loop variables,
// outermost first, nesting as they do in the output (flat offset `output`). Along each dim the tensor must step
// in proportion to the output (one stride for the whole dim), or not at all (it broadcasts: extent 1); null
// otherwise, or when it reads a variable the output does not.
std::optional<TensorLayout> operand_layout(const Contraction& contraction, const TensorAccess& operand,
                                           const AffineIndex& output,
                                           const std::vector<std::vector<std::string>>& dims) {
  AffineIndex flat = operand.flat_offset();
  if (flat.constant < 0) return std::nullopt;
  TensorLayout layout{operand.buffer, flat.constant, std::vector<int64_t>(dims.size(), 1),
                      std::vector<int64_t>(dims.size(), 0)};
  std::set<std::string> placed;
  for (size_t dim = 0; dim < dims.size(); ++dim) {
    std::vector<std::string> variables;
    for (const std::string& variable : dims[dim])
      if (output.uses(variable)) variables.push_back(variable);
    if (variables.empty()) continue;
    int64_t unit = output.terms.at(variables.back()), stride = coefficient_of(flat, variables.back()), extent = 1;
    if (stride < 0) return std::nullopt;
    for (const std::string& variable : variables) {
      int64_t step = output.terms.at(variable);
      if (step % unit != 0 || coefficient_of(flat, variable) != step / unit * stride) return std::nullopt;
      extent *= extent_of(contraction, variable);
      placed.insert(variable);
    }
    if (stride > 0) {
      layout.dims[dim] = extent;
      layout.strides[dim] = stride;
    }
  }
  for (const auto& [variable, coefficient] : flat.terms)
    if (!placed.count(variable)) return std::nullopt;
  fill_unit_strides(&layout);
  return layout;
}

// The contraction's post-ops as the library takes them (see operand_layout for `output` and `dims`). A first Add
// whose operand varies along dim `bias_dim` alone, with unit stride when `bias_contiguous`, becomes the library's
// bias, laid out by `as_bias`. False when a post-op's tensor does not fit.
template <typename AsBias>
bool library_post_ops(const Contraction& contraction, const AffineIndex& output,
                      const std::vector<std::vector<std::string>>& dims, size_t bias_dim, AsBias as_bias,
                      std::optional<TensorLayout>* bias, std::vector<LibraryPostOp>* post_ops) {
  for (const PostOp& op : contraction.post_ops) {
    LibraryPostOp library{op, std::nullopt};
    if (op.reads_tensor()) {
      library.operand = operand_layout(contraction, op.operand, output, dims);
      if (!library.operand) return false;
    }
    if (op.kind == PostOp::Kind::Add && post_ops->empty() && !*bias) {
      bool along_bias_dim_only = true;
      for (size_t dim = 0; dim < dims.size(); ++dim)
        along_bias_dim_only &= dim == bias_dim || library.operand->dims[dim] == 1;
      if (along_bias_dim_only && (*bias = as_bias(*library.operand))) continue;
    }
    post_ops->push_back(library);
  }
  return true;
}

std::string list_key(const std::vector<int64_t>& values) {
  std::string text;
  for (int64_t value : values) text += std::to_string(value) + ",";
  return text;
}

// Dimension `dim` of `access` as (variable, constant offset): one variable with coefficient 1 plus a constant, or a
// constant alone on a size-1 dimension (the variable then has extent 1 and is left out).
bool plain_dimension(const TensorAccess& access, size_t dim, std::string* variable, int64_t* offset) {
  const AffineIndex& index = access.coordinates[dim];
  if (access.guarded[dim]) return false;
  *offset = index.constant;
  variable->clear();
  if (index.terms.empty()) return access.shape[dim] >= 1 && index.constant >= 0 && index.constant < access.shape[dim];
  if (index.terms.size() != 1 || index.terms.begin()->second != 1) return false;
  *variable = index.terms.begin()->first;
  return index.constant >= 0;
}

// An image stored with its channels after its spatial dims (channels-last, [N, H, W, C]): the channel dim moved
// to position 1, the others kept in order, with the buffer's own strides moving along. The channel dim is the one
// indexed only by variables the output side (`result_flat`, which reads the batch) does not use. The rest of
// the classification then reads every image as [N, C, spatial...]. A grouped image (its channel index holds the
// group, which the output side reads too) stays as it is.
void move_channels_second(const AffineIndex& result_flat, TensorAccess* image, std::vector<int64_t>* strides) {
  auto is_channel = [&](size_t dim) {
    const AffineIndex& index = image->coordinates[dim];
    if (image->guarded[dim] || index.terms.empty()) return false;
    for (const auto& [variable, coefficient] : index.terms)
      if (result_flat.uses(variable)) return false;
    return true;
  };
  if (is_channel(1)) return;
  for (size_t dim = 2; dim < image->shape.size(); ++dim) {
    if (!is_channel(dim)) continue;
    auto move = [dim](auto& values) {
      typename std::decay_t<decltype(values)>::value_type value = values[dim];
      values.erase(values.begin() + dim);
      values.insert(values.begin() + 1, value);
    };
    move(image->shape);
    move(image->coordinates);
    move(image->guarded);
    move(*strides);
    return;
  }
}

// The convolution with tensor `image` (0 output, 1 left, 2 right) as its image, if it is one.
std::optional<ConvolutionProblem> convolution_with_image(const Contraction& contraction, int image) {
  const TensorAccess* tensors[3] = {&contraction.output, &contraction.left, &contraction.right};
  TensorAccess source = *tensors[image];
  std::vector<int64_t> source_strides = source.row_major_strides();
  size_t rank = source.shape.size();
  if (rank < 3 || rank > 5) return std::nullopt;
  size_t spatial = rank - 2;
  std::string batch_variable;
  int64_t batch_offset;
  if (!plain_dimension(source, 0, &batch_variable, &batch_offset)) return std::nullopt;
  // The other two are read through their flat offsets, so any layout (and a dropped size-1 dimension) works.
  int first = (image + 1) % 3, second = (image + 2) % 3;
  if (tensors[first]->any_guarded() || tensors[second]->any_guarded()) return std::nullopt;
  AffineIndex flats[3] = {tensors[0]->flat_offset(), tensors[1]->flat_offset(), tensors[2]->flat_offset()};
  move_channels_second(flats[first].uses(batch_variable) ? flats[first] : flats[second], &source, &source_strides);
  // The image's channel is c, its channel within a group (also indexing the weight), plus Cg * g in a grouped
  // convolution, where the group g also indexes the weight and the output side; depthwise is g alone (Cg = 1).
  std::string channel_variable, group_variable;
  const AffineIndex& channel_index = source.coordinates[1];
  int64_t channel_offset = channel_index.constant, group_step = 0;
  if (source.guarded[1] || channel_offset < 0) return std::nullopt;
  for (const auto& [variable, coefficient] : channel_index.terms) {
    if (flats[first].uses(variable) && flats[second].uses(variable)) {
      if (!group_variable.empty()) return std::nullopt;
      group_variable = variable;
      group_step = coefficient;
    } else {
      if (!channel_variable.empty() || coefficient != 1) return std::nullopt;
      channel_variable = variable;
    }
  }
  int64_t groups = extent_of(contraction, group_variable), channels = extent_of(contraction, channel_variable);
  if (!group_variable.empty() && group_step != channels) return std::nullopt;
  // The weight is indexed by the image's channel and not by its batch; the other is the output side.
  int weight = -1;
  if (flats[first].uses(channel_variable) || flats[second].uses(batch_variable)) weight = first;
  if (flats[second].uses(channel_variable) || flats[first].uses(batch_variable)) {
    if (weight == first) return std::nullopt;
    weight = second;
  }
  if (weight < 0) return std::nullopt;
  int result = weight == first ? second : first;
  const AffineIndex& weight_flat = flats[weight];
  const AffineIndex& result_flat = flats[result];
  if (weight_flat.constant < 0 || result_flat.constant < 0) return std::nullopt;
  if (result_flat.uses(channel_variable) || weight_flat.uses(batch_variable)) return std::nullopt;

  // The output channel (within its group): the variable other than the group shared by the weight and the
  // output side (none when there is one channel per group).
  std::string out_channel;
  for (const auto& [variable, coefficient] : weight_flat.terms) {
    if (!result_flat.uses(variable) || variable == group_variable) continue;
    if (!out_channel.empty()) return std::nullopt;
    out_channel = variable;
  }
  std::set<std::string> weight_variables{channel_variable, out_channel, group_variable},
      result_variables{batch_variable, out_channel, group_variable};
  auto stride = [](const AffineIndex& flat, const std::string& variable) {
    auto found = flat.terms.find(variable);
    return found == flat.terms.end() ? int64_t(0) : found->second;
  };
  ConvolutionProblem problem;
  problem.pass = image == 0 ? ConvolutionPass::BackwardData
                            : (weight == 0 ? ConvolutionPass::BackwardWeights : ConvolutionPass::Forward);
  int64_t batch = extent_of(contraction, batch_variable), out_channels = extent_of(contraction, out_channel);
  // The output side's channels: group-major, one stride for all of them (oneDNN's grouped layouts).
  int64_t result_channel_stride =
      out_channels > 1 ? stride(result_flat, out_channel) : stride(result_flat, group_variable);
  if (groups > 1 && out_channels > 1 && stride(result_flat, group_variable) != out_channels * result_channel_stride)
    return std::nullopt;
  problem.groups = groups;
  problem.source = {source.buffer,
                    batch_offset * source_strides[0] + channel_offset * source_strides[1],
                    {batch, groups * channels},
                    {source_strides[0], source_strides[1]}};
  problem.weights = {tensors[weight]->buffer,
                     weight_flat.constant,
                     {out_channels, channels},
                     {stride(weight_flat, out_channel), stride(weight_flat, channel_variable)}};
  if (groups > 1) {  // [G, O/G, C/G, kernel...]
    problem.weights.dims.insert(problem.weights.dims.begin(), groups);
    problem.weights.strides.insert(problem.weights.strides.begin(), stride(weight_flat, group_variable));
  }
  problem.destination = {tensors[result]->buffer,
                         result_flat.constant,
                         {batch, groups * out_channels},
                         {stride(result_flat, batch_variable), result_channel_stride}};
  bool partial_output = false;
  std::vector<std::string> spatial_outputs;  // the output-side variable of each spatial dim
  for (size_t j = 0; j < spatial; ++j) {
    size_t dim = 2 + j;
    const AffineIndex& index = source.coordinates[dim];
    std::string kernel_variable, output_variable;
    int64_t step = 1, dilation = 1;
    for (const auto& [variable, coefficient] : index.terms) {
      if (coefficient <= 0) return std::nullopt;
      bool in_weight = weight_flat.uses(variable), in_result = result_flat.uses(variable);
      if (in_result && !in_weight && output_variable.empty()) {
        output_variable = variable;
        step = coefficient;
      } else if (in_weight && !in_result && kernel_variable.empty()) {
        kernel_variable = variable;
        dilation = coefficient;
      } else {
        return std::nullopt;
      }
    }
    weight_variables.insert(kernel_variable);
    result_variables.insert(output_variable);
    spatial_outputs.push_back(output_variable);
    int64_t outputs = extent_of(contraction, output_variable), kernel = extent_of(contraction, kernel_variable);
    // The image rows this dimension touches, [low, high]; outside the tensor they read zero.
    int64_t low = index.constant;
    int64_t high = low + step * (outputs - 1) + dilation * (kernel - 1);
    int64_t first_row = std::max<int64_t>(low, 0), last_row = std::min<int64_t>(high, source.shape[dim] - 1);
    if (last_row < first_row) return std::nullopt;
    if (!source.guarded[dim] && (low < 0 || high >= source.shape[dim])) return std::nullopt;
    // Fewer unread rows at the end than one step (a stride-2 window over an even extent): the whole extent
    // gives the same outputs under oneDNN's rounding down, with no right padding. The image then needs no
    // cropped view (and its reorder), and oneDNN's 1x1 kernels take strided convolutions, which they refused for
    // the cropped extent (ResNet's 1x1 stride-2 shortcut, 256 -> 512 at 8x8, batch 32, AVX2: 5.1 -> 0.95 ms
    // forward, 3.6 -> 0.96 backward data, 5.0 -> 1.2 backward weights).
    int64_t high_in_extent = high;
    if (high < source.shape[dim] - 1 && source.shape[dim] - 1 - high < step) {
      last_row = source.shape[dim] - 1;
      high_in_extent = last_row;
    }
    if (first_row > 0 || last_row < source.shape[dim] - 1) partial_output = true;
    problem.source.offset += first_row * source_strides[dim];
    problem.source.dims.push_back(last_row - first_row + 1);
    problem.source.strides.push_back(source_strides[dim]);
    problem.weights.dims.push_back(kernel);
    problem.weights.strides.push_back(stride(weight_flat, kernel_variable));
    problem.destination.dims.push_back(outputs);
    problem.destination.strides.push_back(stride(result_flat, output_variable));
    problem.stride.push_back(step);
    problem.dilation.push_back(dilation);
    problem.padding_before.push_back(first_row - low);
    problem.padding_after.push_back(high_in_extent - last_row);
  }
  // Every variable has its role, and the weight and output side use no others (a further sum, a diagonal).
  std::set<std::string> accounted{batch_variable, channel_variable, group_variable};
  accounted.insert(weight_variables.begin(), weight_variables.end());
  accounted.insert(result_variables.begin(), result_variables.end());
  accounted.erase("");
  for (const auto& [variable, extent] : contraction.extents)
    if (!accounted.count(variable)) return std::nullopt;
  for (const auto& [variable, coefficient] : weight_flat.terms)
    if (!weight_variables.count(variable)) return std::nullopt;
  for (const auto& [variable, coefficient] : result_flat.terms)
    if (!result_variables.count(variable)) return std::nullopt;
  // One channel in and one out per group and a 1x1 window: one multiply per element, a per-channel scale
  // (forward, data gradient) or a per-channel sum of products (weight gradient: batch norm's statistics and
  // weight gradient have this form). A generated kernel fuses it with the elementwise work around it; oneDNN's
  // depthwise kernel took 0.8 ms a call for these in the ResNet-18 step, which went from 316 to 390 ms.
  bool single_tap = std::all_of(problem.weights.dims.end() - spatial, problem.weights.dims.end(),
                                [](int64_t extent) { return extent == 1; });
  if (channels == 1 && out_channels == 1 && single_tap) return std::nullopt;
  // A generated kernel's output is written once per element; backward data may cover a window of the image
  // (zero elsewhere).
  if (problem.pass != ConvolutionPass::BackwardData && !covers_output_once(contraction)) return std::nullopt;
  int64_t covered = 1;
  for (int64_t extent : problem.source.dims) covered *= extent;
  if (covered != shape_numel(source.shape)) partial_output = true;
  problem.zero_output_first = problem.pass == ConvolutionPass::BackwardData && partial_output;
  for (TensorLayout* layout : {&problem.source, &problem.weights, &problem.destination}) fill_unit_strides(layout);
  if (!contraction.post_ops.empty()) {
    if (problem.pass != ConvolutionPass::Forward) return std::nullopt;
    // Destination dims [N, G * O/G, spatial...]: the group is the channel's outer digit.
    std::vector<std::vector<std::string>> dims{{batch_variable}, {group_variable, out_channel}};
    for (const std::string& variable : spatial_outputs) dims.push_back({variable});
    int64_t all_out_channels = groups * out_channels;
    auto as_bias = [&](const TensorLayout& operand) -> std::optional<TensorLayout> {
      // oneDNN takes a dense [O] bias
      if (operand.dims[1] != all_out_channels || operand.strides[1] != 1) return std::nullopt;
      return TensorLayout{operand.buffer, operand.offset, {operand.dims[1]}, {1}};
    };
    if (!library_post_ops(contraction, result_flat, dims, 1, as_bias, &problem.bias, &problem.post_ops))
      return std::nullopt;
  }
  return problem;
}

}  // namespace

std::string TensorLayout::describe() const { return layout_key(*this); }

// " + bias + relu" for a call's name.
std::string post_ops_text(bool bias, const std::vector<LibraryPostOp>& post_ops) {
  std::string text = bias ? " + bias" : "";
  for (const LibraryPostOp& library : post_ops) {
    switch (library.op.kind) {
      case PostOp::Kind::Relu: text += " + relu"; break;
      case PostOp::Kind::Linear: text += " + scale"; break;
      case PostOp::Kind::Add: text += " + add"; break;
      case PostOp::Kind::Subtract: text += " + subtract"; break;
      case PostOp::Kind::Multiply: text += " + multiply"; break;
    }
  }
  return text;
}

std::string MatmulProblem::key() const {
  return "matmul|" + layout_key(left) + "|" + layout_key(right) + "|" + layout_key(output) +
         post_ops_key(bias, post_ops);
}

const char* convolution_pass_name(ConvolutionPass pass) {
  switch (pass) {
    case ConvolutionPass::Forward: return "forward";
    case ConvolutionPass::BackwardData: return "backward data";
    case ConvolutionPass::BackwardWeights: return "backward weights";
  }
  return "?";
}

std::string ConvolutionProblem::key() const {
  return std::string("convolution|") + convolution_pass_name(pass) + "|g" + std::to_string(groups) + "|" +
         layout_key(source) + "|" + layout_key(weights) + "|" + layout_key(destination) + "|" + list_key(stride) + "|" +
         list_key(dilation) + "|" + list_key(padding_before) + "|" + list_key(padding_after) +
         (zero_output_first ? "|zero" : "") + post_ops_key(bias, post_ops);
}

std::optional<MatmulProblem> as_matmul(const Contraction& contraction) {
  const TensorAccess* tensors[3] = {&contraction.output, &contraction.left, &contraction.right};
  for (const TensorAccess* tensor : tensors)
    if (tensor->any_guarded()) return std::nullopt;
  if (!covers_output_once(contraction)) return std::nullopt;
  AffineIndex flat_values[3] = {contraction.output.flat_offset(), contraction.left.flat_offset(),
                                contraction.right.flat_offset()};
  const AffineIndex* flats[3] = {&flat_values[0], &flat_values[1], &flat_values[2]};
  if (!nonnegative_offsets(flats)) return std::nullopt;
  std::vector<std::string> batch, rows, columns, inner;
  for (const auto& [variable, extent] : contraction.extents) {
    bool in_output = flats[0]->uses(variable), in_left = flats[1]->uses(variable), in_right = flats[2]->uses(variable);
    if (in_output && in_left && in_right)
      batch.push_back(variable);
    else if (in_output && in_left)
      rows.push_back(variable);
    else if (in_output && in_right)
      columns.push_back(variable);
    else if (in_left && in_right)
      inner.push_back(variable);
    else
      return std::nullopt;  // a sum over one operand alone, or an output repeated along a variable
  }
  if (inner.empty()) return std::nullopt;  // an outer product is elementwise work, not a matrix product
  MergedDimension m, n, k;
  if (!merge(contraction, inner, flats, 1, &k)) return std::nullopt;
  // Rows (and columns) are the innermost variables of their group that nest; outer ones that do not (x[n] @ w,
  // a 1x1 convolution's w @ x[n]) become batch dimensions the other operand broadcasts over.
  // Each library dimension's variables, outermost first (for post-op tensors).
  std::vector<std::string> m_variables, n_variables;
  auto split = [&](std::vector<std::string> group, MergedDimension* merged, std::vector<std::string>* variables) {
    std::sort(group.begin(), group.end(), [&](const std::string& a, const std::string& c) {
      return flats[0]->terms.at(a) > flats[0]->terms.at(c);
    });
    for (size_t first = 0; first <= group.size(); ++first) {
      *merged = MergedDimension();
      *variables = std::vector<std::string>(group.begin() + first, group.end());
      if (merge(contraction, *variables, flats, 0, merged)) {
        batch.insert(batch.end(), group.begin(), group.begin() + first);
        return;
      }
    }
  };
  split(rows, &m, &m_variables);
  split(columns, &n, &n_variables);
  // Batched dot products are a plain reduction: memory-bound, and the generated kernel fuses around them.
  if (m.extent == 1 && n.extent == 1) return std::nullopt;
  std::sort(batch.begin(), batch.end(),
            [&](const std::string& a, const std::string& c) { return flats[0]->terms.at(a) > flats[0]->terms.at(c); });
  // Adjacent batch variables that nest in all three tensors are one dimension.
  std::vector<MergedDimension> batches;
  std::vector<std::vector<std::string>> dimension_variables;
  for (size_t first = 0; first < batch.size();) {
    size_t last = batch.size();
    MergedDimension merged;
    while (
        !merge(contraction, std::vector<std::string>(batch.begin() + first, batch.begin() + last), flats, 0, &merged)) {
      merged = MergedDimension();
      --last;
    }
    batches.push_back(merged);
    dimension_variables.emplace_back(batch.begin() + first, batch.begin() + last);
    first = last;
  }
  if (batches.size() + 2 > 12) return std::nullopt;  // oneDNN's dimension limit
  MatmulProblem problem;
  problem.output = {0, flats[0]->constant, {}, {}};
  problem.left = {contraction.left.buffer, flats[1]->constant, {}, {}};
  problem.right = {contraction.right.buffer, flats[2]->constant, {}, {}};
  TensorLayout* layouts[3] = {&problem.output, &problem.left, &problem.right};
  for (const MergedDimension& dimension : batches) {
    for (int tensor = 0; tensor < 3; ++tensor) {
      // An operand that does not vary along a batch dimension broadcasts over it (extent 1).
      layouts[tensor]->dims.push_back(dimension.strides[tensor] ? dimension.extent : 1);
      layouts[tensor]->strides.push_back(dimension.strides[tensor]);
    }
  }
  auto append = [&](TensorLayout* layout, int tensor, const MergedDimension& first, const MergedDimension& second) {
    layout->dims.insert(layout->dims.end(), {first.extent, second.extent});
    layout->strides.insert(layout->strides.end(), {first.strides[tensor], second.strides[tensor]});
  };
  // Libraries want the output's columns innermost: out = left @ right is also out^T = right^T @ left^T.
  bool transpose = n.extent > 1 && m.extent > 1 && m.strides[0] < n.strides[0];
  if (transpose) {
    std::swap(m, n);
    std::swap(m_variables, n_variables);
    std::swap(problem.left, problem.right);
    for (MergedDimension* dimension : {&m, &n, &k}) std::swap(dimension->strides[1], dimension->strides[2]);
  }
  append(&problem.output, 0, m, n);
  append(&problem.left, 1, m, k);
  append(&problem.right, 2, k, n);
  for (TensorLayout* layout : {&problem.output, &problem.left, &problem.right}) fill_unit_strides(layout);
  if (!contraction.post_ops.empty()) {
    dimension_variables.push_back(m_variables);
    dimension_variables.push_back(n_variables);
    // A bias along the library's columns alone (a Linear layer's), with any stride along them.
    auto as_bias = [](const TensorLayout& operand) { return std::optional<TensorLayout>(operand); };
    if (!library_post_ops(contraction, *flats[0], dimension_variables, dimension_variables.size() - 1, as_bias,
                          &problem.bias, &problem.post_ops))
      return std::nullopt;
  }
  return problem;
}

std::optional<ConvolutionProblem> as_convolution(const Contraction& contraction) {
  const TensorAccess* tensors[3] = {&contraction.output, &contraction.left, &contraction.right};
  // The image: the one tensor with a dimension that is not a plain variable (or a split one, like a grouped
  // convolution's output channel).
  int image = -1;
  for (int tensor = 0; tensor < 3; ++tensor) {
    for (size_t dim = 0; dim < tensors[tensor]->shape.size(); ++dim) {
      std::set<std::string> seen;
      if (covers_dimension(contraction, *tensors[tensor], dim, &seen, false)) continue;  // a slice is no window
      if (image >= 0 && image != tensor) return std::nullopt;
      image = tensor;
    }
  }
  // Windows that tile the image (kernel == stride: 2x2 stride-2 downsampling, a ViT's patch embedding, and the
  // transposed convolutions that upsample by their kernel) index it s * o + k with k < s, which nests like the
  // digits of one plain dimension. The image is then the one tensor with such a dimension. Otherwise those ran as
  // generated loop nests (forward) or as many tiny batched matrix products (transposed: 53 ms against PyTorch's
  // 5 for [32, 64, 28, 28] -> [32, 32, 56, 56]).
  if (image < 0) {
    for (int tensor = 0; tensor < 3; ++tensor) {
      for (const AffineIndex& index : tensors[tensor]->coordinates) {
        if (index.terms.size() < 2) continue;
        if (image >= 0 && image != tensor) return std::nullopt;
        image = tensor;
      }
    }
  }
  if (image < 0) return std::nullopt;
  return convolution_with_image(contraction, image);
}

std::optional<ConvolutionProblem> as_pointwise_weight_gradient(const Contraction& contraction) {
  // Either operand can play the image ([N, C, ...] against [N, O, ...]); reading the output as [O, C] in its own
  // row-major order is the natural one (the other sees the weight transposed, which costs a reorder).
  std::optional<ConvolutionProblem> found;
  for (int image : {1, 2}) {
    std::optional<ConvolutionProblem> problem = convolution_with_image(contraction, image);
    if (!problem || problem->pass != ConvolutionPass::BackwardWeights) continue;
    const TensorLayout& weights = problem->weights;
    size_t out_channel_dim = problem->groups > 1 ? 1 : 0;  // [G,] O/G, C/G, kernel...
    if (weights.strides[out_channel_dim] >= weights.strides[out_channel_dim + 1]) return problem;
    if (!found) found = problem;
  }
  return found;
}

}  // namespace metajit
