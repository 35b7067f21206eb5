// A tensor shape (extents, outermost first) and the two helpers everyone needs. Its own header so code that
// only talks about shapes, such as the kernel IR, does not have to include graph nodes.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace metajit {

using Shape = std::vector<int64_t>;
int64_t shape_numel(const Shape& shape);
std::string shape_to_string(const Shape& shape);

}  // namespace metajit
