// meta_ops/random_values: seeding repeats the numbers, a saved state replays them, a bad state is refused.
#include <gtest/gtest.h>

#include <stdexcept>

#include "meta_ops/random_values.h"

using namespace metajit;

namespace {

std::vector<double> draw(RandomDistribution distribution) {
  NodePtr node = random_values({5}, distribution);
  auto* values = static_cast<const double*>(node->storage->data());
  return std::vector<double>(values, values + 5);
}

}  // namespace

TEST(RandomValuesTest, SeedRepeatsAndStateReplays) {
  seed_random(42);
  std::vector<double> first = draw(RandomDistribution::Uniform);
  seed_random(42);
  EXPECT_EQ(draw(RandomDistribution::Uniform), first);
  for (double value : first) EXPECT_TRUE(value >= 0.0 && value < 1.0);
  std::string state = random_state();
  std::vector<double> normal = draw(RandomDistribution::Normal);
  EXPECT_NE(draw(RandomDistribution::Normal), normal);  // the engine moved on
  set_random_state(state);
  EXPECT_EQ(draw(RandomDistribution::Normal), normal);
  EXPECT_THROW(set_random_state("not a state"), std::invalid_argument);
}
