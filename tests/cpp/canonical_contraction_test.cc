// Tests for the canonical form of contractions (jit/library_call/canonical_contraction.h): contractions that differ
// only in their buffers' numbers and slice positions become one, and the wrapper hands the call the real buffers.
#include <gtest/gtest.h>

#include <vector>

#include "jit/library_call/canonical_contraction.h"

namespace metajit {
namespace {

// out[i, j] += x[step, i, k] * w[j, k], with x buffer `x_buffer` and w buffer `w_buffer`.
Contraction step_product(int x_buffer, int w_buffer, int64_t step) {
  Contraction product;
  product.extents = {{"i", 4}, {"j", 8}, {"k", 3}};
  product.output = {0, {4, 8}, {AffineIndex{{{"i", 1}}, 0}, AffineIndex{{{"j", 1}}, 0}}, {false, false}};
  product.left = {x_buffer,
                  {5, 4, 3},
                  {AffineIndex{{}, step}, AffineIndex{{{"i", 1}}, 0}, AffineIndex{{{"k", 1}}, 0}},
                  {false, false, false}};
  product.right = {w_buffer, {8, 3}, {AffineIndex{{{"j", 1}}, 0}, AffineIndex{{{"k", 1}}, 0}}, {false, false}};
  return product;
}

TEST(CanonicalContractionTest, StepsAndBufferNumbersShareOneForm) {
  CanonicalContraction first = canonical_contraction(step_product(1, 2, 0));
  CanonicalContraction later = canonical_contraction(step_product(3, 7, 4));
  EXPECT_EQ(first.contraction.describe(), later.contraction.describe());
  EXPECT_TRUE(first.identity());
  ASSERT_EQ(later.slots.size(), 3u);
  EXPECT_EQ(later.slots[1].buffer, 3);
  EXPECT_EQ(later.slots[1].offset, 4 * 4 * 3);  // x[4] starts 48 elements in
  EXPECT_EQ(later.slots[2].buffer, 7);
  EXPECT_EQ(later.slots[2].offset, 0);
}

TEST(CanonicalContractionTest, GuardedIndicesKeepTheirConstants) {
  Contraction padded = step_product(1, 2, 0);
  padded.left.coordinates[1].constant = -1;  // x[0, i - 1, k], zero outside: padding
  padded.left.guarded[1] = true;
  CanonicalContraction canonical = canonical_contraction(padded);
  EXPECT_EQ(canonical.contraction.left.coordinates[1].constant, -1);
  EXPECT_EQ(canonical.slots[1].offset, 0);
}

// A call that records the buffers it was handed.
class RecordingCall : public LibraryCall {
 public:
  explicit RecordingCall(std::vector<void*>* seen) : seen_(seen) {}
  void run(void* const* buffers) const override { seen_->assign(buffers, buffers + 3); }
  std::string describe() const override { return "recording"; }

 private:
  std::vector<void*>* seen_;
};

TEST(CanonicalContractionTest, TheWrapperPassesEachSlotItsBufferAtItsOffset) {
  CanonicalContraction canonical = canonical_contraction(step_product(3, 1, 2));
  std::vector<void*> seen;
  auto call = call_with_slots(std::make_shared<RecordingCall>(&seen), canonical, int(sizeof(float)));
  std::vector<float> output(32), weights(24), x(60);
  std::vector<void*> buffers{output.data(), weights.data(), nullptr, x.data()};
  call->run(buffers.data());
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_EQ(seen[0], output.data());
  EXPECT_EQ(seen[1], x.data() + 2 * 12);
  EXPECT_EQ(seen[2], weights.data());
  EXPECT_EQ(call->describe(), "recording");
}

}  // namespace
}  // namespace metajit
