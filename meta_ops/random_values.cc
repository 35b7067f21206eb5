#include "meta_ops/random_values.h"

#include <mutex>
#include <random>
#include <sstream>
#include <stdexcept>

#include "meta_ops/trace_recording.h"

namespace metajit {
namespace {

std::mutex random_mutex;

std::mt19937_64& engine() {
  static std::mt19937_64 instance(std::random_device{}());
  return instance;
}

}  // namespace

void seed_random(uint64_t seed) {
  std::lock_guard<std::mutex> lock(random_mutex);
  engine().seed(seed);
}

std::string random_state() {
  std::ostringstream text;
  std::lock_guard<std::mutex> lock(random_mutex);
  text << engine();
  return text.str();
}

void set_random_state(const std::string& state) {
  std::istringstream text(state);
  std::mt19937_64 restored;
  text >> restored;
  if (text.fail()) throw std::invalid_argument("set_rng_state: the state is not one that get_rng_state returned");
  std::lock_guard<std::mutex> lock(random_mutex);
  engine() = restored;
}

NodePtr random_values(const Shape& shape, RandomDistribution distribution) {
  NodePtr node = make_data_node(DType::Float64, shape);
  auto* values = static_cast<double*>(node->storage->data());
  std::lock_guard<std::mutex> lock(random_mutex);
  if (distribution == RandomDistribution::Uniform) {
    std::uniform_real_distribution<double> uniform(0.0, 1.0);
    for (int64_t index = 0; index < node->numel(); ++index) values[index] = uniform(engine());
  } else {
    std::normal_distribution<double> normal(0.0, 1.0);
    for (int64_t index = 0; index < node->numel(); ++index) values[index] = normal(engine());
  }
  if (active_trace_recording()) note_trace_random(node, distribution);  // a replay draws afresh
  return node;
}

}  // namespace metajit
