#include "trace/traced_function.h"

#include <stdexcept>
#include <unordered_map>
#include <unordered_set>

#include "core/executor.h"
#include "jit/run/graph_executor.h"
#include "jit/run/run_loop.h"

namespace metajit {
namespace {

std::string describe_type(DType dtype, const Shape& shape) {
  return std::string(dtype_name(dtype)) + " " + shape_to_string(shape);
}

// The payload of every pending node behind `targets`: a sync drops the payloads of what it computes, and a
// replay's fresh nodes need them (a host operation runs from its node's payload).
std::unordered_map<const Node*, std::shared_ptr<const NodePayload>> pending_payloads(
    const std::vector<NodePtr>& targets) {
  std::unordered_map<const Node*, std::shared_ptr<const NodePayload>> payloads;
  std::unordered_set<const Node*> seen;
  std::vector<const Node*> stack;
  for (const NodePtr& target : targets) stack.push_back(target.get());
  while (!stack.empty()) {
    const Node* node = stack.back();
    stack.pop_back();
    if (node->is_computed() || !seen.insert(node).second) continue;
    if (node->payload) payloads.emplace(node, node->payload);
    for (const NodePtr& input : node->inputs) stack.push_back(input.get());
  }
  return payloads;
}

// A node like `node` with no inputs and no value, for a replay to compute.
NodePtr fresh_node(const Node& node) {
  auto copy = std::make_shared<Node>(node.kind, node.dtype, node.shape);
  copy->op_code = node.op_code;
  copy->keepdim = node.keepdim;
  copy->reduce_mask = node.reduce_mask;
  copy->scalar = node.scalar;
  copy->integer_scalar = node.integer_scalar;
  copy->scalar_step = node.scalar_step;
  copy->view = node.view;
  copy->payload = node.payload;
  copy->provenance = node.provenance;
  return copy;
}

}  // namespace

std::shared_ptr<TracedFunction> TracedFunction::capture(TraceRecording& recording,
                                                        const std::vector<NodePtr>& arguments,
                                                        const std::vector<VarPtr>& results) {
  set_active_trace_recording(nullptr);
  auto traced = std::shared_ptr<TracedFunction>(new TracedFunction());
  for (const NodePtr& argument : arguments) traced->argument_types_.push_back({argument->dtype, argument->shape});

  std::vector<VarPtr> written;
  std::unordered_set<const Var*> written_seen;
  for (const std::weak_ptr<Var>& weak : recording.written) {
    VarPtr var = weak.lock();
    if (!var || !written_seen.insert(var.get()).second) continue;
    if (var->is_view())
      throw std::invalid_argument(
          "mj.trace: the traced function wrote in place through a view (the value made at " +
          var->node()->provenance.to_string() +
          "); a replay can only give whole Vars new values: write the Var the view was taken from instead");
    written.push_back(var);
  }
  std::vector<std::shared_ptr<Node::GradientSlot>> slots;
  std::unordered_set<const Node::GradientSlot*> slots_seen;
  for (const auto& slot : recording.gradients_written)
    if (slot && slots_seen.insert(slot.get()).second) slots.push_back(slot);

  std::vector<NodePtr> targets;
  std::unordered_set<const Node*> kept;
  auto keep = [&](const NodePtr& node) {
    if (node && kept.insert(node.get()).second) targets.push_back(node);
  };
  std::unordered_set<const Var*> result_vars;
  for (const VarPtr& result : results) {
    keep(result->node());
    result_vars.insert(result.get());
  }
  for (const VarPtr& var : written) keep(var->node());
  for (const auto& slot : slots) keep(slot->grad);
  // A value made inside that something else still holds (an attribute, a list, a dict) would keep its first
  // call's value forever, since a replay runs no Python to update its holder.
  // An autograd Function's context (its Vars no longer count as handles) holds its values only for the recorded
  // call's backward: a replay's results carry no gradient graph, so nothing there needs updating.
  for (const Var* made : recording.made) {
    if (result_vars.count(made) || written_seen.count(made) || !made->counts_as_handle()) continue;
    const NodePtr& node = const_cast<Var*>(made)->node();
    if (node->is_computed() || node->id < recording.first_node_id || kept.count(node.get())) continue;
    throw std::invalid_argument(
        "mj.trace: the value made at " + node->provenance.to_string() +
        " inside the traced function is still held after it returned, but it is neither returned nor written "
        "in place into a Var; a replay could not update its holder. Return it, or update a Var in place "
        "(x.copy_(value), x.assign(value))");
  }

  auto payloads = pending_payloads(targets);
  CapturedRun run;
  capture_runs(&run);
  try {
    sync(targets);
  } catch (...) {
    capture_runs(nullptr);
    throw;
  }
  capture_runs(nullptr);
  std::vector<uint8_t> computed_by_plan;
  if (run.plan) {
    traced->plan_ = run.plan;
    const GraphSignature& signature = run.signature;
    traced->positions_ = signature.nodes.size();
    const BufferLifetimes& lifetimes = run.plan->lifetimes;
    computed_by_plan = lifetimes.is_kernel_output;
    traced->templates_.resize(traced->positions_);
    traced->releasable_.assign(traced->positions_, 0);
    for (size_t position = 0; position < traced->positions_; ++position) {
      if (!computed_by_plan[position]) continue;
      const Node& node = *signature.nodes[position];
      NodePtr copy = fresh_node(node);
      if (auto found = payloads.find(&node); found != payloads.end()) copy->payload = found->second;
      traced->templates_[position] = std::move(copy);
      traced->releasable_[position] = 1;
    }
    std::unordered_set<int> inputs_seen;
    for (const std::vector<int>& inputs : run.plan->inputs)
      for (int position : inputs)
        if (!computed_by_plan[position] && inputs_seen.insert(position).second)
          traced->inputs_.push_back(
              {position, traced->source_of(signature.nodes[position], recording, arguments, false)});
  }
  traced->run_.plan = run.plan;
  traced->run_.where = run.where;
  auto sink = [&](const NodePtr& node) {
    int position = run.plan ? signature_position(run.signature, *node) : -1;
    bool computed = position >= 0 && computed_by_plan[position];
    Source source = traced->source_of(node, recording, arguments, computed);
    if (computed) {
      source.index = position;
      traced->releasable_[position] = 0;  // the caller gets it
    }
    return source;
  };
  for (const VarPtr& result : results) traced->results_.push_back(sink(result->node()));
  for (const VarPtr& var : written) {
    WrittenVar entry{var, sink(var->node())};
    if (entry.value.kind == Source::Kind::Computed) {
      // The Var's new value carries what makes it a parameter: a leaf that requires grad, sharing its .grad.
      Node& replayed = *traced->templates_[entry.value.index];
      const NodePtr& recorded = var->node();
      replayed.requires_grad = recorded->requires_grad;
      replayed.gradient_leaf = recorded->gradient_leaf;
      replayed.gradient_slot = recorded->gradient_slot;
      replayed.store_when_read = false;
    }
    traced->written_.push_back(std::move(entry));
  }
  for (const auto& slot : slots) {
    WrittenGradient entry;
    entry.slot = slot;
    entry.cleared = slot->grad == nullptr;
    if (!entry.cleared) entry.value = sink(slot->grad);
    traced->gradients_.push_back(std::move(entry));
  }
  for (const auto& [position, source] : traced->inputs_) {
    (void)position;
    if (source.kind == Source::Kind::VarValue || source.kind == Source::Kind::Gradient) ++traced->state_count_;
    if (source.kind == Source::Kind::Constant) ++traced->constant_count_;
  }
  return traced;
}

TracedFunction::Source TracedFunction::source_of(const NodePtr& node, const TraceRecording& recording,
                                                 const std::vector<NodePtr>& arguments, bool computed_by_plan) const {
  Source source;
  source.dtype = node->dtype;
  source.shape = node->shape;
  source.made_at = node->provenance;
  if (computed_by_plan) {
    source.kind = Source::Kind::Computed;
    return source;
  }
  // detach() of a computed value is a new node sharing its storage: a replay reads what the original reads.
  NodePtr origin = node;
  while (NodePtr shared = origin->shares_value_of.lock()) origin = shared;
  for (size_t index = 0; index < arguments.size(); ++index)
    if (arguments[index] == origin) {
      source.kind = Source::Kind::Argument;
      source.index = int(index);
      return source;
    }
  if (auto found = recording.random.find(origin.get()); found != recording.random.end()) {
    source.kind = Source::Kind::Random;
    source.distribution = found->second;
    return source;
  }
  if (auto found = recording.gradients_read.find(origin.get()); found != recording.gradients_read.end()) {
    source.kind = Source::Kind::Gradient;
    source.slot = found->second;
    return source;
  }
  // A value read through a Var that outlives the call (a parameter, an optimizer's 0-d input) is read through it
  // again; one whose Vars are all gone (made inside from Python data) stays a constant.
  if (auto found = recording.read_through.find(origin.get()); found != recording.read_through.end()) {
    // The reader a replay reads through: best one the function wrote in place (the state a replay updates),
    // then one from before the call, then one made inside that is still alive.
    std::weak_ptr<Var> chosen;
    int chosen_rank = -1;
    for (const std::weak_ptr<Var>& reader : found->second) {
      VarPtr var = reader.lock();
      if (!var) continue;
      int rank = recording.made.count(var.get()) ? 0 : 1;
      for (const std::weak_ptr<Var>& written : recording.written)
        if (written.lock() == var) rank = 2;
      if (rank > chosen_rank) {
        chosen = reader;
        chosen_rank = rank;
      }
    }
    if (!chosen.expired()) {
      source.kind = Source::Kind::VarValue;
      source.var = chosen;
      return source;
    }
  }
  // Made inside from Python numbers or arrays (or reached without a Var): the same value on every replay.
  source.kind = Source::Kind::Constant;
  source.constant = node;
  return source;
}

std::string TracedFunction::describe(const Source& source) {
  std::string type = describe_type(source.dtype, source.shape) + " made at " + source.made_at.to_string();
  switch (source.kind) {
    case Source::Kind::Argument: return "argument " + std::to_string(source.index) + ", " + type;
    case Source::Kind::VarValue: return "a Var's value at the call, " + type;
    case Source::Kind::Gradient: return "a leaf's .grad at the call, " + type;
    case Source::Kind::Random: return "random numbers drawn afresh, " + type;
    case Source::Kind::Constant: return "a constant of the trace, " + type;
    case Source::Kind::Computed: return "computed by the plan, " + type;
  }
  return type;
}

std::string TracedFunction::describe() const {
  const char* where = run_.where == CudaExecution::Gpu        ? "the GPU"
                      : run_.where == CudaExecution::Emulator ? "the CUDA emulator"
                                                              : "the CPU";
  std::string text = std::to_string(kernel_count()) + " kernels, a plan on " + where + "\n";
  for (const auto& [position, source] : inputs_) text += "reads " + describe(source) + "\n";
  for (size_t index = 0; index < results_.size(); ++index)
    text += "returns " + std::to_string(index) + ": " + describe(results_[index]) + "\n";
  for (const WrittenVar& entry : written_) text += "writes a Var: " + describe(entry.value) + "\n";
  for (const WrittenGradient& entry : gradients_)
    text += entry.cleared ? std::string("clears a .grad\n") : "sets a .grad: " + describe(entry.value) + "\n";
  return text;
}

NodePtr TracedFunction::state_value(const Source& source) {
  NodePtr value;
  if (source.kind == Source::Kind::VarValue) {
    VarPtr var = source.var.lock();
    if (!var)
      throw std::invalid_argument("mj.trace: a Var the traced function read (its value was made at " +
                                  source.made_at.to_string() + ") no longer exists");
    value = var->node();
  } else if (source.kind == Source::Kind::Gradient) {
    auto slot = source.slot.lock();
    value = slot ? slot->grad : nullptr;
    if (!value) throw std::invalid_argument("mj.trace: the traced function added to a .grad that is None now");
  } else {
    return nullptr;
  }
  if (value->dtype != source.dtype || value->shape != source.shape)
    throw std::invalid_argument("mj.trace: a Var the traced function read is " +
                                describe_type(value->dtype, value->shape) + " now, it was " +
                                describe_type(source.dtype, source.shape) + " when traced");
  return value;
}

NodePtr TracedFunction::value_of(const Source& source, const std::vector<NodePtr>& arguments,
                                 const std::vector<NodePtr>& computed) const {
  switch (source.kind) {
    case Source::Kind::Computed: return computed[size_t(source.index)];
    case Source::Kind::Argument: return arguments[size_t(source.index)];
    case Source::Kind::Constant: return source.constant;
    case Source::Kind::Random: return random_values(source.shape, source.distribution);
    case Source::Kind::VarValue:
    case Source::Kind::Gradient: break;
  }
  NodePtr value = state_value(source);
  if (!value->is_computed()) sync({value});
  return value;
}

void TracedFunction::check(const std::vector<NodePtr>& arguments) const {
  if (arguments.size() != argument_types_.size())
    throw std::invalid_argument("mj.trace: " + std::to_string(arguments.size()) + " arguments given, " +
                                std::to_string(argument_types_.size()) + " traced");
  for (size_t index = 0; index < arguments.size(); ++index) {
    const auto& [dtype, shape] = argument_types_[index];
    if (arguments[index]->dtype != dtype || arguments[index]->shape != shape)
      throw std::invalid_argument("mj.trace: argument " + std::to_string(index) + " is " +
                                  describe_type(arguments[index]->dtype, arguments[index]->shape) + ", traced with " +
                                  describe_type(dtype, shape));
  }
  for (const auto& input : inputs_) state_value(input.second);
}

std::vector<NodePtr> TracedFunction::replay(const std::vector<NodePtr>& arguments) {
  check(arguments);
  std::vector<NodePtr> pending_arguments;
  for (const NodePtr& argument : arguments)
    if (!argument->is_computed()) pending_arguments.push_back(argument);
  if (!pending_arguments.empty()) sync(pending_arguments);

  std::vector<NodePtr> nodes(positions_);
  for (const auto& [position, source] : inputs_) nodes[size_t(position)] = value_of(source, arguments, nodes);
  if (plan_) {
    for (size_t position = 0; position < positions_; ++position) {
      if (!templates_[position]) continue;
      NodePtr node = fresh_node(*templates_[position]);
      node->requires_grad = templates_[position]->requires_grad;
      node->gradient_leaf = templates_[position]->gradient_leaf;
      node->gradient_slot = templates_[position]->gradient_slot;
      nodes[position] = std::move(node);
    }
    run_exclusively([&] { run_captured(run_, nodes, releasable_); });
  }
  std::vector<NodePtr> outputs;
  for (const Source& result : results_) outputs.push_back(value_of(result, arguments, nodes));
  for (const WrittenVar& entry : written_)
    if (VarPtr var = entry.var.lock()) var->take_replayed_value(value_of(entry.value, arguments, nodes));
  for (const WrittenGradient& entry : gradients_)
    if (auto slot = entry.slot.lock()) slot->grad = entry.cleared ? nullptr : value_of(entry.value, arguments, nodes);
  return outputs;
}

}  // namespace metajit
