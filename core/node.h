// A node of the lazy graph: what a Var points at. It records one meta-op (its kind, operands and the small
// payload that op needs), its inferred shape and dtype, and where the user created it. Once computed it holds
// a Storage and drops its inputs, so the graph behind it is freed. Nodes never run anything themselves.
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/shape.h"
#include "core/storage.h"

namespace metajit {

// The graph vocabulary. Elementwise family: Constant .. Cast. Reindex family: View, Reshape, Reindex.
// Reindex-reduce family: Reduce, ReindexReduce. Data is a computed leaf. Two opaque kinds stand outside the
// families: Code (a user's C++ kernel, never fused: its inputs are buffers, it writes its outputs itself) and
// Custom (the value of its first input, with a gradient rule given from outside: mj.Function).
enum class NodeKind : uint8_t {
  Data,
  Constant,
  Arange,
  Unary,
  Binary,
  Where,
  Cast,
  View,
  Reshape,
  Reindex,
  Reduce,
  ReindexReduce,
  Code,
  Custom,
  HostOperation  // work on host buffers between kernels (core/host_operation.h)
};
const char* node_kind_name(NodeKind kind);

// Where the user created a node: interned file name and line (file may be null when unknown).
struct Provenance {
  const char* file = nullptr;
  int line = 0;
  std::string to_string() const;  // "train.py:12" or "<unknown>"
};
// Hook set by the Python binding so nodes learn their user source line without core knowing about Python.
using ProvenanceHook = Provenance (*)();
void set_provenance_hook(ProvenanceHook hook);
Provenance current_provenance();
const char* intern_string(const std::string& text);  // stable pointer for the process lifetime

// Per input dimension of a View: index = offset + step * output_index[output_dim] (output_dim -1: just offset).
struct ViewDimension {
  int32_t output_dim;
  int64_t step;
  int64_t offset;
};

// Op-specific data too large to keep inline (index expressions live in meta_ops; core only holds them).
struct NodePayload {
  virtual ~NodePayload() = default;
  virtual std::string describe() const = 0;  // canonical text: part of kernel identity and comments
  // describe(), computed once: payloads are immutable and the planner's graph signature reads it every sync.
  const std::string& canonical() const {
    std::call_once(described_, [this] { description_ = describe(); });
    return description_;
  }

 private:
  mutable std::once_flag described_;
  mutable std::string description_;
};

struct Node;
using NodePtr = std::shared_ptr<Node>;

struct Node {
  Node(NodeKind kind, DType dtype, Shape shape);
  ~Node();
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  NodeKind kind;
  DType dtype;
  uint16_t op_code = 0;     // unary/binary/reduce operator (meta_ops enums)
  bool keepdim = false;     // Reduce
  uint64_t reduce_mask = 0; // Reduce: bit d set when input dim d is reduced
  double scalar = 0;        // Constant value, Arange start, Reindex overflow value
  int64_t integer_scalar = 0;  // Constant value of an integer dtype, exact (a double rounds beyond 2^53)
  double scalar_step = 0;   // Arange step
  Shape shape;
  std::vector<NodePtr> inputs;
  std::vector<ViewDimension> view;                // View
  std::shared_ptr<const NodePayload> payload;     // Reindex, ReindexReduce
  StoragePtr storage;                             // set once computed
  Provenance provenance;
  uint64_t id;                                    // creation order, for stable traversal
  // Autodiff. A node requires grad when the user asked (a leaf) or when it was built, with grad mode on, from
  // an input that does; it then keeps its inputs after it is computed, so gradients can be built later.
  bool requires_grad = false;
  // Set on a node that stands for a leaf although it is computed from other nodes (detach(), or a parameter's
  // in-place update under no_grad): gradients stop here, as at a leaf, and once computed it drops its inputs.
  bool gradient_leaf = false;
  // Set on the value a view made under no_grad is re-derived to after its storage was written in grad mode with
  // history: PyTorch refuses to record an op on it in grad mode (whether the view carries that history is
  // ambiguous), and make_node does the same with kAmbiguousNoGradViewMessage.
  bool ambiguous_no_grad_view = false;
  // Set when the node required grad because an input did as it was built (PyTorch's non-leaf, one with a
  // grad_fn). Unlike any_input_requires_grad() it survives the node dropping its inputs once computed.
  bool gradient_history = false;
  // A value a Var holds for the long term (a parameter after an in-place update): a sync whose graph reads it
  // stores it, as a target, instead of inlining it into its readers, so the next update starts from a stored
  // value rather than from an ever-longer expression (core/executor.cc).
  bool store_when_read = false;
  // How many user handles hold this node as their value (meta_ops/var.h counts them; core does not know Vars).
  // A sync whose graph reads a pending node a handle holds stores it, as Jittor keeps the values the user can
  // still ask for: otherwise a value fused into its readers stays pending, and a carried state such as an RNN's
  // `c.detach()` keeps every earlier step's graph alive and recomputes it (core/executor.cc).
  std::atomic<uint32_t> handles{0};
  // The value a write through a view gave its base in grad mode (PyTorch's CopySlices): like a node whose gradient
  // read saved values, a second backward through it raises unless the first kept the graph.
  bool written_through_view = false;
  // Set by backward() without retain_graph on the nodes it went through whose gradient read saved values (not on
  // leaves): once computed, such a node drops its inputs like any other, so the values only backward needed can
  // be freed (PyTorch frees a graph's saved tensors the same way). A node with this set and no inputs has lost
  // its graph.
  std::atomic<bool> backward_taken{false};
  // A leaf's .grad (accumulated by backward(), PyTorch's x.grad). Shared by the nodes a leaf Var held in turn
  // (an update under no_grad, a write through .data gives the Var a new leaf node): a backward through a graph
  // recorded before still adds to the same .grad, as PyTorch's tensor identity would.
  struct GradientSlot {
    NodePtr grad;
    // The Var handle last given out as this gradient (meta_ops/var.h), so `p.grad` is one Var whose in-place
    // changes (p.grad.mul_(0.5)) are the gradient's. Opaque here: core does not know Vars.
    std::weak_ptr<void> handle;
  };
  std::shared_ptr<GradientSlot> gradient_slot;
  NodePtr grad() const { return gradient_slot ? gradient_slot->grad : nullptr; }
  void set_grad(NodePtr value) {
    if (!gradient_slot) gradient_slot = std::make_shared<GradientSlot>();
    gradient_slot->grad = std::move(value);
  }
  // Set when an in-place op replaced this value in the Var that held it (meta_ops/var.h): the node itself is
  // intact, but PyTorch would have changed the saved tensor, so a gradient rule that reads it refuses, naming
  // the op and the user's line of the modification (PyTorch's version-counter error).
  const char* overwritten_by = nullptr;
  Provenance overwritten_at;
  uint64_t overwritten_from_id = 0;  // nodes with this id or later were recorded after the latest write began
  // Id ranges [first, end) of the in-place ops that replaced this value: their own reads of it are saved as
  // PyTorch saves an in-place op's original self (a copy), so no later write touches them.
  std::vector<std::pair<uint64_t, uint64_t>> read_by_in_place_ops;
  std::weak_ptr<Node> shares_value_of;  // a detached Data node sharing a computed node's storage: that node
  // Set on the node a .data alias reads its source through (meta_ops/var.cc): PyTorch's .data has a version
  // counter of its own, so the version check does not follow this node to its source, and views of it are not
  // composed past it.
  bool own_version_counter = false;
  // Scratch of the graph walks a sync makes under its lock (core/executor.cc, jit/plan_cache.cc): a walk takes a
  // fresh mark from next_walk_mark() and stamps the nodes it reaches, where a hash set of node pointers cost a
  // heap allocation per node (4834 nodes in a 64-step LSTM's training step, 9700 allocations a sync).
  mutable uint64_t walk_mark = 0;
  mutable int32_t walk_position = -1;  // jit/plan_cache.cc: the node's position in the graph signature
  // Ops on the longest chain of pending nodes ending here (at most: an input computed since counts until a sync
  // that planned this node refreshes it). make_node computes a chain by itself once it reaches
  // kMaximumPendingDepth (see there). Atomic: a sync refreshes it while another thread may record a reader.
  std::atomic<uint32_t> pending_depth{1};
  // The sync epoch (core/executor.h) pending_depth was counted in: a count from an earlier epoch may be too high.
  std::atomic<uint32_t> depth_epoch{0};

  bool is_computed() const { return storage != nullptr; }
  bool any_input_requires_grad() const;  // false for a gradient_leaf: its inputs carry no gradient
  int64_t numel() const { return shape_numel(shape); }
  // Human-readable op name, e.g. "exp", "add", "reindex", "sum".
  std::string op_name() const;
};

// The id the next node will get: an op that records several nodes notes it first (an in-place op's own reads
// of the value it replaces are exempt from the version check).
uint64_t next_node_id_value();

// A mark no node carries yet, for one walk under the sync lock (Node::walk_mark).
uint64_t next_walk_mark();

// A lazily built chain this many ops deep is computed when the next op is recorded on it, before that op is
// (a prefix runs by itself, as in Jittor): planning a whole million-op chain at once cost a minute and gigabytes
// where prefixes of this size plan in about 0.1 s each. Values are unchanged; only when they are computed.
constexpr uint32_t kMaximumPendingDepth = 10000;

// PyTorch's words for using or extending a view made under no_grad whose storage was written in grad mode since.
extern const char* const kAmbiguousNoGradViewMessage;

NodePtr make_node(NodeKind kind, DType dtype, Shape shape, std::vector<NodePtr> inputs = {});
// A computed leaf holding a fresh uninitialised buffer of the right size.
NodePtr make_data_node(DType dtype, Shape shape);


// Grad mode of the calling thread (mj.no_grad() turns it off): when off, new nodes never require grad.
bool grad_enabled();
void set_grad_enabled(bool enabled);

// Names of elementwise/reduce op codes; registered by meta_ops so core can print them.
using OpNamer = std::string (*)(const Node& node);
void set_op_namer(OpNamer namer);

}  // namespace metajit
