// Plans by graph signature (jit/plan/graph_signature.h): a training step's second sync finds the plan its first
// one made.
#pragma once
#include <memory>
#include <string>

#include "jit/plan/plan.h"

namespace metajit {

class PlanCache {
 public:
  PlanCache();
  static PlanCache& instance();
  std::shared_ptr<const Plan> find(const std::string& signature);
  // Stores `plan` under `signature` (a GraphSignature's text) and returns it.
  std::shared_ptr<const Plan> insert(const std::string& signature, std::shared_ptr<const Plan> plan);
  void clear();

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace metajit
