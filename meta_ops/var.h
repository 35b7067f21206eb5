// A Var: the user's handle on a value, what Python's metajit.Var wraps. Graph nodes are immutable; a Var is not.
// An in-place op (x.add_(y), x[k] = v, x += 1) rebinds the Var to a new node, so every Python reference to the
// Var sees the change while ops recorded earlier keep reading the node they were given: PyTorch's values, with
// nothing run. A view (slicing, transpose, reshape, expand, detach(), .data) aliases its base: writing through it
// rebinds the base to the base with those elements replaced, and every view of the base re-derives its node the
// next time it is used (PyTorch's functionalization). This layer must not run anything: writes are lazy ops.
#pragma once
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/node.h"
#include "meta_ops/trace_recording.h"

namespace metajit {

std::vector<int64_t> contiguous_strides(const Shape& shape);

// One link from a base to a view of it.
struct ViewStep {
  enum class Kind : uint8_t { Affine, Reshape, Detach };
  Kind kind = Kind::Affine;
  Shape shape;                           // the view's shape
  std::vector<ViewDimension> dimensions; // Affine: one per dimension of the step's input
};

// What a base and all views of it share: the base's current value and a count of writes. A detached alias
// (detach(), .data) is the base of a group of its own, with its own autograd history, whose values follow its
// parent's: writes to it reach the parent as values only, and a write to the parent re-derives it (PyTorch:
// one storage, two tensors with separate grad_fns).
struct AliasGroup {
  NodePtr value;
  uint64_t version = 0;
  uint64_t grad_write_version = 0;      // `version` after the latest write in grad mode of a value with history
  std::shared_ptr<AliasGroup> parent;   // set for a detached alias
  std::vector<ViewStep> from_parent;    // the parent's base -> this base (ending with the Detach step)
  uint64_t parent_version_seen = 0;
  bool shares_versions = true;          // detach(): writes count for the parent's version check; .data: not
  bool made_in_grad_mode = true;
  // Set when this group's base is a leaf's .grad: writes to the group carry on to the leaf's gradient.
  std::weak_ptr<Node::GradientSlot> gradient_of;
  // The value now: re-derived from the parent when the parent was written since.
  const NodePtr& current();
  // The values a write (or a re-derivation from the parent) replaced, and the values written through views (an
  // in-place op's result, which PyTorch's autograd may save), still alive somewhere: they are the same storage,
  // whose version counter a later counted write moves for them too.
  std::vector<std::weak_ptr<Node>> earlier_values;
  // `value` becomes `next`; the value it held joins earlier_values.
  void replace_value(NodePtr next);
  void remember(const NodePtr& node);  // adds `node` to earlier_values
  // The detach() aliases of this group (weak: an alias keeps its parent alive, not the reverse). They share its
  // version counter, so a write here must mark their values too: a computed alias holds its value apart from
  // ours, and our replaced node, which it would lead back to, may be gone by backward.
  std::vector<std::weak_ptr<AliasGroup>> version_sharing_children;
};

class Var;
using VarPtr = std::shared_ptr<Var>;

// A Var's node pointer, counted in Node::handles while held.
class HeldNode {
 public:
  HeldNode(NodePtr node) : node_(std::move(node)) { acquire(); }  // NOLINT: converts like the NodePtr it holds
  HeldNode(const HeldNode& other) : node_(other.node_) { acquire(); }
  HeldNode& operator=(NodePtr node) {
    if (node == node_) return *this;
    release();
    node_ = std::move(node);
    acquire();
    return *this;
  }
  HeldNode& operator=(const HeldNode& other) { return *this = other.node_; }
  ~HeldNode() { release(); }

  operator const NodePtr&() const { return node_; }  // NOLINT: read as a NodePtr everywhere
  Node* operator->() const { return node_.get(); }
  Node& operator*() const { return *node_; }
  long use_count() const { return node_.use_count(); }
  bool operator==(const NodePtr& other) const { return node_ == other; }
  bool operator!=(const NodePtr& other) const { return node_ != other; }
  // From now on this handle does not count (a value an autograd Function's context keeps for its backward).
  void stop_counting() {
    release();
    counted_ = false;
  }
  bool counted() const { return counted_; }

 private:
  void acquire() {
    if (node_ && counted_) node_->handles.fetch_add(1, std::memory_order_relaxed);
  }
  void release() {
    if (node_ && counted_) node_->handles.fetch_sub(1, std::memory_order_relaxed);
  }
  NodePtr node_;
  bool counted_ = true;
};

class Var : public std::enable_shared_from_this<Var> {
 public:
  explicit Var(NodePtr node);
  ~Var();
  Var(const Var&) = delete;
  Var& operator=(const Var&) = delete;

  // The value now: re-derived from the base when a write through another alias happened since.
  const NodePtr& node() {
    if (group_) {
      if (group_->parent) group_->current();
      if (seen_version_ != group_->version) derive();
    }
    if (active_trace_recording()) note_trace_read(*this, node_);
    return node_;
  }
  DType dtype() { return node()->dtype; }
  const Shape& shape() { return node()->shape; }

  // A view of `base` built by `build` (permute, transpose, broadcast...): the step is learnt by building it on a
  // stand-in for the base, so any composition of View and Reshape nodes the meta-ops make is captured.
  static VarPtr view_of(const VarPtr& base, const std::function<NodePtr(const NodePtr&)>& build);
  // A view of `base` from a known step (basic slicing builds its mapping itself); `built`, when given, is the
  // step applied to the base's current node already.
  static VarPtr view_of(const VarPtr& base, ViewStep step, NodePtr built = nullptr);
  // reshape(): a view when the strides allow one (PyTorch's rule), else a new Var holding a reshaped copy.
  static VarPtr reshaped(const VarPtr& base, Shape shape, bool must_be_view);
  // detach() and .data: the same values, shared (writes through either are seen by the other), no history.
  // Writes through .data (and views of it) are not recorded for the version check, as in PyTorch.
  static VarPtr detached_alias(const VarPtr& base);
  static VarPtr data_alias(const VarPtr& base);

  // An in-place op: this Var (and every alias of it) now holds `value`, which has this Var's shape and is cast
  // to its dtype. `operation` names the op in errors. Refuses, with PyTorch's messages, a leaf that requires
  // grad (or a view of one) while grad mode is on. The replaced nodes are marked (Node::overwritten_by) so a
  // backward that needs them refuses, as PyTorch's version counters do.
  // `first_node_id` (next_node_id_value() before the op recorded `value`) exempts the op's own reads.
  void write(NodePtr value, const std::string& operation, uint64_t first_node_id = 0);
  // Throws PyTorch's error when an in-place op may not write this Var now (a leaf that requires grad, or a view
  // of one, in grad mode).
  void check_writable(const std::string& operation);
  // An in-place op that leaves the values as they are (x.copy_(x)): refused where a write is, and counted by the
  // version check like one, without the expanded-view check (PyTorch returns before it).
  void count_write(const std::string& operation);
  // p.data = value: a new value of any shape and dtype; views taken before keep the old one.
  void set_data(NodePtr value);
  // requires_grad_(): only leaves; turning it on gives the Var a node of its own first when others share it.
  void set_requires_grad(bool requires_grad);
  // detach_(): this Var becomes a leaf holding the same value.
  void detach_in_place();
  // This Var's value no longer counts as one the user holds (Node::handles): an autograd Function's context
  // keeps values for its backward, which fuses them as it would without the context.
  void stop_counting_as_handle() { node_.stop_counting(); }
  bool counts_as_handle() const { return node_.counted(); }
  // A replayed traced function (trace/traced_function.h) gives this Var the value its recording wrote: views of
  // it see the new value. Throws for a view (the recording refuses traced writes through views).
  void take_replayed_value(NodePtr value);

  // x.grad as a Var: the same handle each time while the gradient is unchanged, and one whose in-place writes
  // (and writes through its views and .data) become the gradient, as in PyTorch where p.grad is a tensor
  // like any other. Null when there is no gradient.
  static VarPtr gradient_of(const NodePtr& owner);
  // x.grad = value: `value` becomes that handle.
  static void set_gradient(const NodePtr& owner, const VarPtr& value);

  bool is_view() const { return !steps_.empty(); }
  // PyTorch's memory layout, in elements of the base: strides, the offset and contiguity decide whether
  // reshape/view/contiguous alias or copy, exactly as they would in PyTorch.
  std::vector<int64_t> strides() const { return strides_.empty() ? contiguous_strides(node_->shape) : strides_; }
  int64_t storage_offset() const { return storage_offset_; }
  bool is_contiguous() const;
  // PyTorch's memory-overlap status against another Var: whether an in-place op writing this Var may read
  // `other` (an input of the op). Partial overlap is refused there, as PyTorch refuses it.
  enum class Overlap { None, Full, Partial, Unknown };
  Overlap overlap_with(Var& other);

 private:
  static VarPtr make_view(const VarPtr& base, ViewStep step, std::vector<int64_t> strides, int64_t offset,
                          NodePtr node = nullptr);
  static VarPtr make_detached_alias(const VarPtr& base, bool shares_versions);
  void derive();
  AliasGroup& group();
  void mark_versions(Node& current, const std::string& operation, uint64_t first_node_id);

  HeldNode node_;
  std::weak_ptr<Node::GradientSlot> gradient_of_;  // set when this Var is a leaf's .grad (see gradient_of)
  std::shared_ptr<AliasGroup> group_;  // null until the first alias of this value is taken
  std::vector<ViewStep> steps_;        // from the group's base to this Var (empty: the base itself)
  uint64_t seen_version_ = 0;          // group_->version when node_ was derived
  uint64_t created_version_ = 0;       // group_->version when this view was made (of a no_grad view: its origin's)
  bool made_in_grad_mode_ = true;      // re-derived nodes are built in the grad mode the view was made in
  bool view_of_leaf_ = false;          // a view (not through detach) of a leaf that requires grad
  bool no_grad_view_of_grad_value_ = false;  // made under no_grad from a value that requires grad
  bool no_grad_view_ = false;  // made under no_grad (or a view of such a view): PyTorch's NO_GRAD_MODE views
  std::vector<int64_t> strides_;  // empty: row-major (every Var that is no view; saves an allocation per op)
  int64_t storage_offset_ = 0;
};

// The node a step makes of its input (view, reshape or detached).
NodePtr apply_view_step(const NodePtr& input, const ViewStep& step);
// PyTorch's stride rule for viewing a tensor of (shape, strides) as `new_shape`: the strides, or nothing when
// some new dim would span two non-contiguous chunks (then reshape copies and view() fails).
std::optional<std::vector<int64_t>> view_strides(const Shape& shape, const std::vector<int64_t>& strides,
                                                 const Shape& new_shape);

}  // namespace metajit
