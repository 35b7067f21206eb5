// The tile side is a compromise between cache lines used whole on both sides (at least 16 floats) and the pages
// and registers a tile touches; the renderer transposes full 16 x 16 float tiles in registers.
#include "jit/ir/transposed_tiles.h"

#include <cstdlib>

#include "jit/ir/index_sums.h"

namespace metajit {
namespace {

constexpr int64_t kTransposeTile = 16;

// The dim a strided load reads contiguously, or -1 when the kernel is not transposing.
int transposed_dim(const IrKernel& kernel) {
  int rank = int(kernel.domain.size());
  if (rank < 2 || !kernel.row_body.empty() || kernel.domain[rank - 1] < kTransposeTile / 2) return -1;
  for (const IrStatement& statement : kernel.body)
    if (statement.kind != IrStatement::Kind::Let && statement.kind != IrStatement::Kind::Store) return -1;
  for (const IrExpr* load : transposed_tile_loads(kernel, kTransposeTile)) {
    const IrExprPtr& offset = load->args[0];
    for (int dim = rank - 2; dim >= 0; --dim) {
      int64_t along_dim;
      if (kernel.domain[dim] >= kTransposeTile / 4 &&
          index_coefficient(offset, "i" + std::to_string(dim), &along_dim) && along_dim == 1)
        return dim;
    }
  }
  return -1;
}

}  // namespace

std::vector<const IrExpr*> transposed_tile_loads(const IrKernel& kernel, int64_t tile) {
  std::string element = "i" + std::to_string(kernel.domain.size() - 1);
  std::vector<const IrExpr*> loads, strided;
  for (const IrStatement& statement : kernel.body) collect_loads(statement.value.get(), &loads);
  for (const IrExpr* load : loads) {
    int64_t along_element;
    if (index_coefficient(load->args[0], element, &along_element) && std::abs(along_element) >= tile / 2)
      strided.push_back(load);
  }
  return strided;
}

void choose_transposed_tiles(IrKernel& kernel) {
  if (kernel.kind != IrKernel::Kind::Pointwise || kernel.schedule.form != IrSchedule::Form::Elements) return;
  int across = transposed_dim(kernel);
  if (across < 0) return;
  kernel.schedule.form = IrSchedule::Form::TransposedTiles;
  kernel.schedule.across = across;
  kernel.schedule.tile = kTransposeTile;
}

}  // namespace metajit
