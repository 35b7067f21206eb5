// mj.export and a trace's dump(): a traced function's kept plan written as an artifact (runtime/artifact.h) that
// the C++ runtime runs with no Python and no compiler. Only what the plan uses goes in: its kernels' compiled
// objects (from the kernel cache), the contractions its library calls were made for, and the values of the Vars
// it reads (the weights), snapshotted now. What a pure inference function cannot be exported with (writes to
// Vars or gradients, random draws, collectives, a plan recorded on a GPU) is refused, naming the line.
// This file must not plan or compile: it reads what the trace kept.
#pragma once
#include <string>
#include <vector>

#include "runtime/artifact.h"
#include "trace/traced_function.h"

namespace metajit {

// Throws std::invalid_argument naming what cannot be exported; input and output names default to "input0"...,
// "output0"... where fewer are given.
Artifact export_traced_function(const TracedFunction& traced, std::vector<std::string> input_names,
                                std::vector<std::string> output_names, const std::string& producer);

}  // namespace metajit
