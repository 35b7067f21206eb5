// Scheduling pass: loop pieces. A cat reads each piece of its output through a padded reindex, a padded window
// (pooling, a convolution's halo) clamps and tests its indices, a reflection folds them with abs: per element,
// guards and clamps that are decided for whole ranges of the loop index. This pass finds the edges of those
// ranges, along the element loop (the last dim) or, when an outer dim is cut instead, along that dim with the
// element loop's edges inside each of its pieces, and records them in kernel.schedule. The C++ renderer writes one
// copy of the loop per piece, where the index ranges fold the guards away (ir_fold_by_ranges) and the reads left
// are plain loads that vectorise. It does not rewrite the kernel's statements.
#pragma once
#include <string>

#include "jit/ir/kernel_ir.h"

namespace metajit {

// Sets kernel.schedule's column_pieces, or row_piece_dim, row_pieces and row_piece_columns, for a Pointwise
// kernel of rank >= 2 walked element by element (Form::Elements, no row body). Leaves them empty when no guard
// cuts a loop, or when the copies would be too many to be worth compiling.
void choose_loop_pieces(IrKernel& kernel);

// `name`_in_piece: the offset within its piece that a piece's copy of the loop counts; the piece's body is the
// loop's with `name` replaced by `piece begin + name_in_piece` (ir_substitute_and_fold).
std::string piece_offset_variable(const std::string& name);

}  // namespace metajit
