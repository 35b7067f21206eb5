// Host operations as plan entries (core/host_operation.h): a node computed by host code between the kernels that
// feed it and those that read it, and ordered ones that every sync runs in recording order even when nothing reads
// them. The operation here reverses its input and logs each run; expected values come from plain loops.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "core/executor.h"
#include "core/host_operation.h"
#include "jit/plan/planner.h"
#include "jit/run/cuda_graph_runner.h"
#include "jit/run/graph_executor.h"
#include "meta_ops/elementwise.h"

namespace metajit {
namespace {

std::vector<std::string> run_log;

class Reverse : public HostOperation {
 public:
  Reverse(std::string name, bool ordered) : name_(std::move(name)), ordered_(ordered) {}
  void run(void* output, const std::vector<const void*>& inputs) const override {
    run_log.push_back(name_);
    const auto* source = static_cast<const float*>(inputs.at(0));
    auto* target = static_cast<float*>(output);
    std::reverse_copy(source, source + count, target);
  }
  std::string describe() const override { return "reverse"; }
  bool ordered() const override { return ordered_; }
  int64_t count = 0;

 private:
  std::string name_;
  bool ordered_;
};

// Reverses too, but only finishes after the run loop has tested it twice (or waited for it): the values appear
// in the output then, as a collective's do.
class SlowReverse : public HostOperation {
 public:
  void run(void*, const std::vector<const void*>&) const override { throw std::logic_error("started, not run"); }
  std::unique_ptr<HostWork> start(void* output, const std::vector<const void*>& inputs) const override {
    class Work : public HostWork {
     public:
      Work(const float* source, float* target, int64_t count) : source_(source), target_(target), count_(count) {}
      bool test() override {
        run_log.push_back("test");
        if (++tests_ < 2) return false;
        complete();
        return true;
      }
      void wait() override {
        run_log.push_back("wait");
        complete();
      }

     private:
      void complete() { std::reverse_copy(source_, source_ + count_, target_); }
      const float* source_;
      float* target_;
      int64_t count_;
      int tests_ = 0;
    };
    run_log.push_back("start");
    return std::make_unique<Work>(static_cast<const float*>(inputs.at(0)), static_cast<float*>(output), count);
  }
  std::string describe() const override { return "slow reverse"; }
  int64_t count = 0;
};

NodePtr reversed(const NodePtr& input, const std::string& name, bool ordered) {
  auto operation = std::make_shared<Reverse>(name, ordered);
  operation->count = input->numel();
  return make_host_operation(operation, input->dtype, input->shape, {input});
}

NodePtr counting(int64_t count) {
  NodePtr node = make_data_node(DType::Float32, {count});
  auto* values = static_cast<float*>(node->storage->data());
  for (int64_t index = 0; index < count; ++index) values[index] = float(index);
  return node;
}

class HostOperationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    register_op_names();
    install_graph_executor();
    run_log.clear();
  }
};

TEST_F(HostOperationTest, RunsBetweenTheKernelsThatFeedAndReadIt) {
  NodePtr input = counting(6);
  NodePtr doubled = binary(BinaryOp::Multiply, input, constant({}, DType::Float32, 2.0));
  NodePtr output = binary(BinaryOp::Add, reversed(doubled, "middle", false), constant({}, DType::Float32, 1.0));
  std::vector<PlannedKernel> kernels = plan_kernels({output});
  ASSERT_EQ(kernels.size(), 3u);  // the doubling, the host entry, the addition
  EXPECT_FALSE(kernels[0].host_operation);
  EXPECT_TRUE(kernels[1].host_operation);
  EXPECT_TRUE(kernels[1].rendered.source.empty());
  EXPECT_FALSE(kernels[2].host_operation);
  EXPECT_EQ(kernels[1].lowered.kernel.fused_ops.at(0).rfind("reverse  [6]", 0), 0u);
  sync({output});
  const auto* values = static_cast<const float*>(output->storage->data());
  for (int64_t index = 0; index < 6; ++index) EXPECT_EQ(values[index], 2.0f * float(5 - index) + 1.0f);
  EXPECT_EQ(run_log, std::vector<std::string>{"middle"});
}

TEST_F(HostOperationTest, IsNeverFusedIntoItsReaders) {
  NodePtr input = counting(4);
  NodePtr middle = reversed(input, "unfused", false);
  NodePtr output = unary(UnaryOp::Exp, binary(BinaryOp::Add, middle, middle));
  sync({output});
  const auto* values = static_cast<const float*>(output->storage->data());
  for (int64_t index = 0; index < 4; ++index) EXPECT_FLOAT_EQ(values[index], std::exp(2.0f * float(3 - index)));
  EXPECT_EQ(run_log, std::vector<std::string>{"unfused"});  // once, though its value is read twice
}

TEST_F(HostOperationTest, OrderedOperationsRunAtAnySyncInRecordingOrder) {
  NodePtr first = reversed(counting(3), "first", true);
  NodePtr second = reversed(counting(5), "second", true);
  NodePtr unrelated = binary(BinaryOp::Add, counting(2), constant({}, DType::Float32, 1.0));
  sync({unrelated});  // reads neither, runs both, first first
  EXPECT_EQ(run_log, (std::vector<std::string>{"first", "second"}));
  ASSERT_TRUE(first->is_computed() && second->is_computed());
  EXPECT_EQ(static_cast<const float*>(second->storage->data())[0], 4.0f);
  sync({unrelated});
  EXPECT_EQ(run_log.size(), 2u);  // nothing runs twice
}

TEST_F(HostOperationTest, AnOrderedOperationIsHeldUntilItRunsEvenIfDropped) {
  reversed(counting(3), "dropped", true);  // the caller keeps no handle
  sync_ordered_nodes();
  EXPECT_EQ(run_log, std::vector<std::string>{"dropped"});
}

TEST_F(HostOperationTest, RunsOnTheHostBetweenEmulatedGpuKernels) {
  set_cuda_execution(CudaExecution::Emulator);
  struct Restore {
    ~Restore() { set_cuda_execution(CudaExecution::Off); }
  } restore;
  NodePtr doubled = binary(BinaryOp::Multiply, counting(5), constant({}, DType::Float32, 2.0));
  NodePtr output = binary(BinaryOp::Add, reversed(doubled, "emulated", false), constant({}, DType::Float32, 1.0));
  sync({output});
  std::vector<float> values(5);
  std::memcpy(values.data(), output->storage->data(), sizeof(float) * values.size());
  for (int64_t index = 0; index < 5; ++index) EXPECT_EQ(values[size_t(index)], 2.0f * float(4 - index) + 1.0f);
  EXPECT_EQ(run_log, std::vector<std::string>{"emulated"});
}

TEST_F(HostOperationTest, StartedWorkRunsAlongsideKernelsAndIsWaitedForBeforeItsReader) {
  NodePtr input = counting(6);
  auto operation = std::make_shared<SlowReverse>();
  operation->count = 6;
  NodePtr slow = make_host_operation(operation, DType::Float32, {6}, {input});
  // Kernels that do not read it (recorded after it, so launched after it), then its reader.
  NodePtr independent = unary(UnaryOp::Exp, counting(3));
  NodePtr reader = binary(BinaryOp::Add, slow, constant({}, DType::Float32, 1.0));
  sync({independent, reader});
  ASSERT_GE(run_log.size(), 2u);
  EXPECT_EQ(run_log.front(), "start");
  EXPECT_EQ(run_log[1], "test");  // tested after the independent kernel, before anything waited
  const auto* values = static_cast<const float*>(reader->storage->data());
  for (int64_t index = 0; index < 6; ++index) EXPECT_EQ(values[index], float(5 - index) + 1.0f);
}

TEST_F(HostOperationTest, StartedWorkNobodyReadsIsWaitedForAtTheEndOfThePlan) {
  auto operation = std::make_shared<SlowReverse>();
  operation->count = 4;
  NodePtr slow = make_host_operation(operation, DType::Float32, {4}, {counting(4)});
  sync({slow});
  EXPECT_EQ(run_log, (std::vector<std::string>{"start", "wait"}));
  EXPECT_EQ(static_cast<const float*>(slow->storage->data())[0], 3.0f);
}

TEST_F(HostOperationTest, AnOrderedOperationStartsAsSoonAsItsInputsExist) {
  NodePtr ready = unary(UnaryOp::Exp, counting(4));       // what the collective reads
  NodePtr unrelated = unary(UnaryOp::Sqrt, counting(3));  // recorded before it, not needed by it
  NodePtr late = binary(BinaryOp::Add, ready, constant({}, DType::Float32, 1.0));  // a second input, recorded later
  NodePtr collective = reversed(late, "early", true);
  NodePtr reader = binary(BinaryOp::Multiply, collective, constant({}, DType::Float32, 2.0));
  std::vector<PlannedKernel> kernels = plan_kernels({unrelated, reader});
  std::vector<std::string> order;
  for (const PlannedKernel& kernel : kernels)
    order.push_back(kernel.host_operation                            ? "collective"
                    : kernel.lowered.output.get() == unrelated.get() ? "unrelated"
                    : kernel.lowered.output.get() == reader.get()    ? "reader"
                                                                     : "input");
  EXPECT_EQ(order, (std::vector<std::string>{"input", "collective", "unrelated", "reader"}));
  sync({unrelated, reader});
  const auto* values = static_cast<const float*>(reader->storage->data());
  for (int64_t index = 0; index < 4; ++index)
    EXPECT_FLOAT_EQ(values[index], 2.0f * (std::exp(float(3 - index)) + 1.0f));
}

TEST_F(HostOperationTest, OnlyAHostOperationNodeHasAnOperation) {
  EXPECT_THROW(host_operation_of(*counting(2)), std::logic_error);
}

}  // namespace
}  // namespace metajit
