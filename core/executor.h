// Entry point for "a value is needed": gathers the targets that are not computed yet and hands them to the
// registered graph runner (the JIT, registered from jit/), one sync at a time. Core knows no kernels.
#pragma once
#include <functional>
#include <stdexcept>
#include <vector>

#include "core/node.h"

namespace metajit {

class GraphRunner {
 public:
  virtual ~GraphRunner() = default;
  // Computes every target (none is computed on entry) and gives each a Storage.
  virtual void run(const std::vector<NodePtr>& targets) = 0;
};

void set_graph_runner(GraphRunner* runner);

// Thrown by check_interrupt() when the user interrupted (Ctrl-C) a sync; the binding turns it back into the
// KeyboardInterrupt Python already holds. Nodes computed before it keep their values; the rest stay pending.
struct InterruptedError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
// The binding's check for a pending interrupt (it briefly takes the GIL); throws InterruptedError.
using InterruptCheck = void (*)();
void set_interrupt_check(InterruptCheck check);
// Called by the graph runner between kernels: a long sync stays interruptible between launches.
void check_interrupt();

// Drops a computed node's inputs and payload. Builders on other threads may be reading those edges (view
// composition), so this is the only way the executor cuts them, under an exclusive lock.
void release_inputs(Node& node);
// Gives a node its computed value (under the same lock, so pending_source never sees a half-written pointer).
void publish_storage(Node& node, StoragePtr storage);
// Takes a computed node's value away (under the same lock), leaving it pending; the executor does this to a
// node only the run's own graph still holds, after the last kernel that reads it (jit/buffer_lifetimes.h).
StoragePtr take_storage(Node& node);
// The first input of a pending node, or null once the node is computed; safe against a concurrent sync.
NodePtr pending_source(const Node& node);
// The longest chain of pending nodes ending at any of `nodes`, counted again from the graph as it is now, and
// written back to each pending node behind them whose count predates the latest sync (Node::pending_depth counts
// inputs computed since it was made; Node::depth_epoch says when it was counted). Takes the sync lock.
uint32_t recount_pending_depth(const std::vector<NodePtr>& nodes);
// Whether the calling thread is inside sync() or run_exclusively() (where nodes must not start another sync).
bool inside_sync();
// While set on the calling thread (mj.trace recording a function), sync() refuses with `reason` followed by
// where the first value asked for was made: a value read back inside a traced function would be a constant of
// every replay. Null lets syncs run again. Returns the previous setting.
const char* refuse_syncs(const char* reason);
// The pending values a sync of `targets` would store besides them: those marked store_when_read and those a
// user handle holds (Node::handles), found behind the pending targets. mj.inspect plans the same set.
std::vector<NodePtr> values_a_sync_stores(const std::vector<NodePtr>& targets);
// Whether syncs are refused on the calling thread now (refuse_syncs).
bool syncs_refused();
// Runs `work` with every other sync held off (a replayed plan runs under the same lock as a sync).
void run_exclusively(const std::function<void()>& work);
// Makes every target computed. Thread-safe: concurrent syncs are serialised. On return each target holds a
// Storage and has dropped its inputs. Errors propagate as exceptions and leave the targets uncomputed.
void sync(const std::vector<NodePtr>& targets);
// Holds `node` until it is computed, and makes every sync compute it (with the other such nodes, in the order they
// were added) along with whatever it was asked for: an ordered host operation (core/host_operation.h), which every
// rank of a job must run in the same order whether or not it reads the result.
void add_ordered_node(NodePtr node);
// Computes the ordered nodes still pending (a barrier, the end of the process).
void sync_ordered_nodes();
// How many syncs have run kernels so far: the operations recorded between two syncs are one "step" for rules
// that compare one step with the next (meta_ops/scalar_sites.h).
uint64_t sync_epoch();

}  // namespace metajit
