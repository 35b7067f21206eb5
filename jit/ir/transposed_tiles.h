// Scheduling pass: transposed tiles. A transposing kernel writes its output along the last dim but reads some
// input with a large stride there and contiguously along an earlier dim (a transpose, NHWC <-> NCHW). Walked row
// by row, every element of a row touches another cache line and, past 1024 floats of stride, another page; in
// square tiles both sides use whole cache lines and a few dozen pages at a time. This pass recognises such
// kernels and records the form in kernel.schedule; the C++ renderer writes the tile loops. It does not rewrite
// statements.
#pragma once
#include <vector>

#include "jit/ir/kernel_ir.h"

namespace metajit {

// Sets kernel.schedule to TransposedTiles (.across the contiguously read dim, .tile the tiles' side) when a
// Pointwise kernel of rank >= 2 of lets and stores only, without a row body and not already given a form, is
// transposing.
void choose_transposed_tiles(IrKernel& kernel);

// The loads of a Pointwise kernel's body that step at least half of `tile` elements along the last dim, with a
// linear offset: the strided reads a transposing kernel's tiles are for (the renderer prefetches them and reads
// full tiles of them as vectors). In the order the pass considered them.
std::vector<const IrExpr*> transposed_tile_loads(const IrKernel& kernel, int64_t tile);

}  // namespace metajit
