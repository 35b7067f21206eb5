#include "core/shape.h"

namespace metajit {

int64_t shape_numel(const Shape& shape) {
  int64_t count = 1;
  for (int64_t extent : shape) count *= extent;
  return count;
}

std::string shape_to_string(const Shape& shape) {  // no ostringstream: kernel rendering calls this a lot
  std::string text = "[";
  for (size_t dim = 0; dim < shape.size(); ++dim) {
    if (dim) text += ", ";
    text += std::to_string(shape[dim]);
  }
  return text + "]";
}

}  // namespace metajit
