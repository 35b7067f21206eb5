// The IR pass list: see ir_passes.h. Adding a pass is a line here and a line in the header's list.
#include "jit/ir/ir_passes.h"

#include <functional>
#include <string>

#include "core/log.h"
#include "jit/ir/column_sums.h"
#include "jit/ir/ir_text.h"
#include "jit/ir/launch_offsets.h"
#include "jit/ir/loop_pieces.h"
#include "jit/ir/parallel_grain.h"
#include "jit/ir/reduce_loop_merging.h"
#include "jit/ir/running_sums.h"
#include "jit/ir/transposed_tiles.h"

namespace metajit {
namespace {

// Runs `pass`; under METAJIT_LOG=ir prints the IR after it, or one line when the pass changed nothing (most
// passes leave most kernels alone, and a kernel's text can be long).
void run_pass(const char* name, IrKernel& kernel, const std::function<void(IrKernel&)>& pass) {
  if (!log_enabled(LogLevel::Ir)) return pass(kernel);
  std::string before = ir_text(kernel);
  pass(kernel);
  std::string after = ir_text(kernel);
  if (after == before)
    log_message(LogLevel::Ir, std::string("IR after ") + name + ": unchanged");
  else
    log_message(LogLevel::Ir, std::string("IR after ") + name + ":\n" + after);
}

}  // namespace

void log_ir(const char* pass, const IrKernel& kernel) {
  if (!log_enabled(LogLevel::Ir)) return;
  log_message(LogLevel::Ir, std::string("IR after ") + pass + ":\n" + ir_text(kernel));
}

void run_shared_passes(IrKernel& kernel) {
  log_ir("lowering", kernel);
  run_pass("reduce-loop merging", kernel, merge_reduce_loops);
}

void run_cpu_scheduling_passes(IrKernel& kernel) {
  run_pass("running sums", kernel, choose_running_sums);
  run_pass("column sums", kernel, choose_column_sums);
  run_pass("transposed tiles", kernel, choose_transposed_tiles);
  run_pass("parallel grain", kernel, choose_parallel_grain);
  run_pass("loop pieces", kernel, choose_loop_pieces);
}

std::vector<int64_t> run_cpu_passes(IrKernel& kernel) {
  std::vector<int64_t> offsets;
  run_pass("launch offsets", kernel, [&](IrKernel& moved) { offsets = move_constant_offsets_to_launch(moved); });
  run_cpu_scheduling_passes(kernel);
  return offsets;
}

}  // namespace metajit
