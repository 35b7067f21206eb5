// Batch normalization recorded in one call: the 20-odd nodes that python/metajit/ops/normalization.py built one
// Python call at a time before (30-60 us of Python a layer, about 0.4 ms of a U-Net training step; now 15 us).
// Only builds nodes: the argument checks stay in Python, where the user's error messages are written, and nothing
// is computed here.
#pragma once
#include <cstdint>

#include "core/node.h"

namespace metajit {

struct BatchNormNodes {
  NodePtr output;
  NodePtr running_mean, running_var;  // the new running statistics (the given ones outside training)
};

// `input` [N, C, *]; running statistics, weight and bias [C] or null. In training mode the output uses the batch's
// mean and biased variance over every dim but 1, and the new running statistics are
// (1 - momentum) * running + momentum * batch statistic (the variance unbiased), detached; otherwise the running
// statistics normalize. `site` is the Python call site of the call (meta_ops/scalar_sites.h): each scalar operand
// gets a site of its own derived from it, so a momentum changed by hand turns into a kernel input as it would
// op by op.
BatchNormNodes batch_norm(const NodePtr& input, const NodePtr& running_mean, const NodePtr& running_var,
                          const NodePtr& weight, const NodePtr& bias, bool training, double momentum, double eps,
                          uint64_t site);

}  // namespace metajit
