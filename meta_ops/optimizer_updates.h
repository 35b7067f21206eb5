// The update rules of Adam (and AdamW) and SGD recorded in one call per parameter: the 7-13 nodes that
// python/metajit/optim/adam.py and sgd.py built one Python call at a time before (Adam: 29 -> 13 us a parameter
// with the rest of its Python). Hyper-parameters arrive as the optimizers' 0-d Vars (optim/optimizer.py's
// _ScalarCache), never as numbers, so a schedule reuses the kernels. Only builds nodes: the optimizers' state,
// options and checks stay in Python, and nothing is computed here.
#pragma once
#include "core/node.h"

namespace metajit {

// 0-d values of the parameter's dtype.
struct AdamScalars {
  NodePtr beta1, one_minus_beta1, beta2, one_minus_beta2, bias_correction2_sqrt, eps, step_size;
};

struct AdamNodes {
  NodePtr param, exp_avg, exp_avg_sq;
  NodePtr max_exp_avg_sq;  // with amsgrad, else null
};

// m = b1 * m + (1 - b1) * g; v = b2 * v + (1 - b2) * g * g; with amsgrad (`max_exp_avg_sq` given) the
// denominator uses max(v_max, v); p = p - step_size * m / (sqrt(v) / bias_correction2_sqrt + eps). `grad` is
// the gradient after weight decay and maximize, which the caller applies.
AdamNodes adam_update(const NodePtr& param, const NodePtr& grad, const NodePtr& exp_avg, const NodePtr& exp_avg_sq,
                      const NodePtr& max_exp_avg_sq, const AdamScalars& scalars);

struct SgdNodes {
  NodePtr param, momentum_buffer;  // momentum_buffer: null without momentum
};

// g = grad + weight_decay * p where `weight_decay` is given; with momentum (`buffer` given),
// buffer = keep * buffer + take * g and g = g + momentum * buffer (nesterov) or buffer; p = p - lr * g.
// `grad` is already negated for maximize.
SgdNodes sgd_update(const NodePtr& param, const NodePtr& grad, const NodePtr& weight_decay, const NodePtr& buffer,
                    const NodePtr& keep, const NodePtr& take, const NodePtr& nesterov_momentum, const NodePtr& lr);

}  // namespace metajit
