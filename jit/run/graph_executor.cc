#include "jit/run/graph_executor.h"

#include <chrono>

#include "core/stats.h"
#include "jit/plan/buffer_lifetimes.h"
#include "jit/plan/plan_cache.h"
#include "jit/run/cpu_device.h"
#include "jit/run/cuda_graph_runner.h"
#include "jit/run/run_loop.h"

namespace metajit {
namespace {

thread_local CapturedRun* captured_run = nullptr;

class JitGraphRunner : public GraphRunner {
 public:
  void run(const std::vector<NodePtr>& targets) override {
    if (cuda_execution() != CudaExecution::Off) return run_on_cuda(targets);
    auto planning_start = std::chrono::steady_clock::now();
    GraphSignature signature = graph_signature(targets);
    std::shared_ptr<const Plan> plan = PlanCache::instance().find(signature.text);
    if (!plan) plan = PlanCache::instance().insert(signature.text, make_plan(signature, plan_kernels(targets)));
    stats().planning_nanoseconds += std::chrono::duration_cast<std::chrono::nanoseconds>(
        std::chrono::steady_clock::now() - planning_start).count();
    CpuDevice device(*plan);
    RunValues values(RunValues::Where::OnNodes);
    std::vector<uint8_t> releasable = releasable_buffers(plan->lifetimes, signature.nodes, !captured_run);
    run_plan(*plan, signature.nodes, device, values, &releasable);
    if (captured_run) {
      captured_run->plan = plan;
      captured_run->signature = std::move(signature);
      captured_run->where = CudaExecution::Off;
    }
  }
};

}  // namespace

void capture_runs(CapturedRun* capture) { captured_run = capture; }

CapturedRun* active_capture() { return captured_run; }

void run_captured(const CapturedRun& run, const std::vector<NodePtr>& nodes, const std::vector<uint8_t>& releasable) {
  if (run.where != CudaExecution::Off) return run_plan_on_cuda(*run.plan, nodes, releasable, run.where);
  CpuDevice device(*run.plan);
  RunValues values(RunValues::Where::OnNodes);
  run_plan(*run.plan, nodes, device, values, &releasable);
}

void install_graph_executor() {
  static JitGraphRunner runner;
  set_graph_runner(&runner);
}

}  // namespace metajit
