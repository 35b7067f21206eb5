// The process's random numbers: one seeded engine (std::mt19937_64) that mj.seed sets, mj.get_rng_state and
// mj.set_rng_state save and restore, and that fills rand/randn's values on the host when they are called (so a
// seed gives the same numbers whatever the graph around them). Thread-safe. Casting the values to the wanted
// dtype is the caller's; this file must not run kernels.
#pragma once
#include <cstdint>
#include <string>

#include "core/node.h"

namespace metajit {

enum class RandomDistribution { Uniform, Normal };  // [0, 1), and mean 0 with standard deviation 1

void seed_random(uint64_t seed);
// The engine's state as the standard library writes it (text); set_random_state throws std::invalid_argument for
// anything random_state did not return.
std::string random_state();
void set_random_state(const std::string& state);
// A computed float64 node of `shape` filled from the engine.
NodePtr random_values(const Shape& shape, RandomDistribution distribution);

}  // namespace metajit
