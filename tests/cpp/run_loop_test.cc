// The run loop against a Device that records what it is asked: the loop, not the device, allocates each result,
// publishes it on its node and cuts the graph behind it, or keeps the values aside (as mj.cuda.emulate does).
// Expected values come from plain loops written here.
#include <gtest/gtest.h>

#include <cmath>

#include "core/executor.h"
#include "jit/plan/graph_signature.h"
#include "jit/plan/planner.h"
#include "jit/run/cpu_device.h"
#include "jit/run/graph_executor.h"
#include "jit/run/run_loop.h"
#include "meta_ops/elementwise.h"
#include "meta_ops/reduce.h"

namespace metajit {
namespace {

class RecordingDevice : public Device {
 public:
  explicit RecordingDevice(const Plan& plan) : cpu_(plan) {}
  StoragePtr allocate(size_t bytes) override {
    allocations++;
    return cpu_.allocate(bytes);
  }
  void* buffer(Storage& storage) override { return cpu_.buffer(storage); }
  void copy_to_device(void* device, const void* host, size_t bytes) override {
    cpu_.copy_to_device(device, host, bytes);
  }
  void copy_to_host(void* host, const void* device, size_t bytes) override { cpu_.copy_to_host(host, device, bytes); }
  bool launch_kernel(const PlannedKernel& kernel, const Node& output, const std::vector<void*>& buffers) override {
    launches++;
    return cpu_.launch_kernel(kernel, output, buffers);
  }
  void run_library_call(const LibraryCall& call, void* const* buffers) override {
    cpu_.run_library_call(call, buffers);
  }
  int allocations = 0, launches = 0;

 private:
  CpuDevice cpu_;
};

class RunLoopTest : public ::testing::Test {
 protected:
  void SetUp() override {
    register_op_names();
    install_graph_executor();
    input_ = make_data_node(DType::Float32, {8, 33});
    auto* values = static_cast<float*>(input_->storage->data());
    for (int64_t index = 0; index < input_->numel(); ++index) values[index] = 0.01f * float(index % 41);
    // A softmax and its row sums, both wanted: the division reads the sums a kernel before it stored.
    sum_ = reduce(unary(UnaryOp::Exp, input_), ReduceOp::Add, {1}, true);
    output_ = binary(BinaryOp::Divide, unary(UnaryOp::Exp, input_), sum_);
    signature_ = graph_signature({sum_, output_});
    plan_ = make_plan(signature_, plan_kernels({sum_, output_}));
  }

  void expect_softmax(const float* result) const {
    const float* values = static_cast<const float*>(input_->storage->data());
    for (int row = 0; row < 8; ++row) {
      double total = 0;
      for (int column = 0; column < 33; ++column) total += std::exp(double(values[row * 33 + column]));
      for (int column = 0; column < 33; ++column)
        ASSERT_NEAR(result[row * 33 + column], std::exp(double(values[row * 33 + column])) / total, 1e-6);
    }
  }

  NodePtr input_, sum_, output_;
  GraphSignature signature_;
  std::shared_ptr<const Plan> plan_;
};

TEST_F(RunLoopTest, PublishesEachResultOnItsNodeAndCutsTheGraph) {
  RecordingDevice device(*plan_);
  run_plan(*plan_, signature_.nodes, device);
  EXPECT_EQ(device.launches, int(plan_->kernels.size()));
  EXPECT_EQ(device.allocations, int(plan_->kernels.size()));  // one result each: no siblings, no library calls
  ASSERT_TRUE(output_->is_computed());
  EXPECT_TRUE(output_->inputs.empty()) << "a computed node must drop its inputs";
  expect_softmax(static_cast<const float*>(output_->storage->data()));
}

TEST_F(RunLoopTest, KeepsValuesAsideWithoutTouchingTheGraph) {
  RecordingDevice device(*plan_);
  RunValues values(RunValues::Where::KeptAside);
  run_plan(*plan_, signature_.nodes, device, values);
  EXPECT_EQ(device.launches, int(plan_->kernels.size()));
  EXPECT_FALSE(output_->is_computed() || sum_->is_computed());
  EXPECT_FALSE(output_->inputs.empty());
  ASSERT_TRUE(values.computed(*sum_));
  ASSERT_TRUE(values.computed(*output_));
  expect_softmax(static_cast<const float*>(values.value(*output_)->data()));
  sync({sum_, output_});  // the graph is whole: a sync computes the same value again
  expect_softmax(static_cast<const float*>(output_->storage->data()));
}

}  // namespace
}  // namespace metajit
