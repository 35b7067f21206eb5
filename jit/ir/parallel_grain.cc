// The grain aims at about kWorkPerSlice loop iterations per slice: per item, the loop iterations it costs
// (IrKernel::inner_work, row_work, a tile's area, a column scan's length).
#include "jit/ir/parallel_grain.h"

#include <algorithm>

namespace metajit {
namespace {

constexpr int64_t kWorkPerSlice = 32768;
// An element that loads from an address it computed from another load (a gather, an embedding lookup, an
// index_select) counts as this many streaming elements: such loads wait on memory one by one (F.gather of
// [2048, 16] from [2048, 1024] had run on one thread).
constexpr int64_t kDependentLoadWork = 8;
// A column sum's slice walks every input row over its columns: at least this many of them, so a row's piece is
// 16 cache lines the prefetcher follows, not 4 (pieces of 64 columns, a row apart, left it behind).
constexpr int64_t kColumnChunk = 256;

int64_t grain_for(int64_t work_per_item) {
  return std::max<int64_t>(1, kWorkPerSlice / std::max<int64_t>(1, work_per_item));
}

bool depends_on_values(const IrExpr& node) {
  if (node.kind == IrKind::Load || (node.kind == IrKind::Variable && node.integer == 0)) return true;
  for (const IrExprPtr& argument : node.args)
    if (depends_on_values(*argument)) return true;
  return false;
}

// Whether an element statement loads at an address computed from a loaded value (a let: loop variables carry
// their extent, lets none).
bool reads_at_loaded_addresses(const IrKernel& kernel) {
  std::vector<const IrExpr*> loads;
  for (const IrStatement& statement : kernel.body)
    if (statement.value) collect_loads(statement.value.get(), &loads);
  for (const IrExpr* load : loads)
    if (depends_on_values(*load->args[0])) return true;
  return false;
}

}  // namespace

void choose_parallel_grain(IrKernel& kernel) {
  IrSchedule& schedule = kernel.schedule;
  const Shape& domain = kernel.domain;
  int64_t count = shape_numel(domain);
  if (kernel.kind == IrKernel::Kind::Scatter) {  // split by rows of the output, or not at all
    schedule.work_items = kernel.scatter_split_rows ? domain[0] : 1;
    schedule.grain = grain_for(kernel.scatter_split_rows ? count / domain[0] : 1);
    return;
  }
  int rank = int(domain.size());
  switch (schedule.form) {
    case IrSchedule::Form::ColumnRunningSum: {  // tiles of columns, each scanned down dim rank-2
      int64_t along = domain[rank - 2], columns = domain[rank - 1];
      int64_t tiles = std::max<int64_t>(1, (columns + schedule.tile - 1) / schedule.tile);
      schedule.work_items = count / std::max<int64_t>(1, along * columns) * tiles;
      schedule.grain = grain_for(along * std::min(schedule.tile, columns));
      return;
    }
    case IrSchedule::Form::RunningSum:  // rows
      schedule.work_items = count / std::max<int64_t>(1, domain.back());
      schedule.grain = grain_for(domain.back());
      return;
    case IrSchedule::Form::TransposedTiles: {  // square tiles of dims `across` and last
      int64_t tile = schedule.tile, across = domain[schedule.across], last = domain[rank - 1];
      schedule.work_items = count / across / last * ((across + tile - 1) / tile) * ((last + tile - 1) / tile);
      schedule.grain = grain_for(tile * tile * std::max<int64_t>(1, kernel.inner_work));
      return;
    }
    default: break;
  }
  if (!kernel.row_body.empty()) {  // whole rows
    int64_t last = domain.back();
    schedule.work_items = last == 0 ? 0 : count / last;
    schedule.grain = grain_for(last * kernel.inner_work + kernel.row_work);
    return;
  }
  schedule.work_items = count;  // elements
  schedule.grain = grain_for(kernel.inner_work * (reads_at_loaded_addresses(kernel) ? kDependentLoadWork : 1));
  if (schedule.form == IrSchedule::Form::ColumnSum) schedule.grain = std::max(schedule.grain, kColumnChunk);
}

}  // namespace metajit
