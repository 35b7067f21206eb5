#include "meta_ops/basic_index.h"

namespace metajit {
namespace {

// Python's PySlice_AdjustIndices: clamps start and stop to the extent and returns the slice's length.
int64_t adjust_slice(int64_t extent, int64_t& start, int64_t& stop, int64_t step) {
  auto clamp = [&](int64_t& bound) {
    if (bound < 0) {
      bound += extent;
      if (bound < 0) bound = step < 0 ? -1 : 0;
    } else if (bound >= extent) {
      bound = step < 0 ? extent - 1 : extent;
    }
  };
  clamp(start);
  clamp(stop);
  if (step < 0) return stop < start ? (start - stop - 1) / (-step) + 1 : 0;
  return start < stop ? (stop - start - 1) / step + 1 : 0;
}

}  // namespace

std::optional<ViewStep> basic_index_view(const Shape& shape, const std::vector<BasicIndexItem>& key) {
  if (key.size() > shape.size()) return std::nullopt;
  ViewStep view{ViewStep::Kind::Affine, {}, {}};
  for (size_t dim = 0; dim < shape.size(); ++dim) {
    int64_t extent = shape[dim];
    if (dim >= key.size()) {  // dims the key leaves out are taken whole
      view.dimensions.push_back({int32_t(view.shape.size()), 1, 0});
      view.shape.push_back(extent);
      continue;
    }
    const BasicIndexItem& item = key[dim];
    if (item.kind == BasicIndexItem::Kind::Integer) {
      if (item.index < -extent || item.index >= extent) return std::nullopt;  // the general path raises
      view.dimensions.push_back({-1, 0, item.index < 0 ? item.index + extent : item.index});
      continue;
    }
    if (item.step == 0) return std::nullopt;
    int64_t start = item.start, stop = item.stop;
    int64_t length = adjust_slice(extent, start, stop, item.step);
    view.dimensions.push_back({int32_t(view.shape.size()), item.step, length ? start : 0});
    view.shape.push_back(length);
  }
  return view;
}

}  // namespace metajit
