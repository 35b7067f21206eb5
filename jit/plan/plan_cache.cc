// The cache is bounded: when it is full it is emptied (a loop's plans are re-made within one step).
#include "jit/plan/plan_cache.h"

#include <mutex>
#include <unordered_map>

namespace metajit {
namespace {

constexpr size_t kMaximumPlans = 256;

}  // namespace

struct PlanCache::Impl {
  std::mutex mutex;
  std::unordered_map<std::string, std::shared_ptr<const Plan>> plans;
};

PlanCache::PlanCache() : impl_(std::make_shared<Impl>()) {}

PlanCache& PlanCache::instance() {
  static PlanCache cache;
  return cache;
}

std::shared_ptr<const Plan> PlanCache::find(const std::string& signature) {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  auto found = impl_->plans.find(signature);
  return found == impl_->plans.end() ? nullptr : found->second;
}

std::shared_ptr<const Plan> PlanCache::insert(const std::string& signature, std::shared_ptr<const Plan> plan) {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  if (impl_->plans.size() >= kMaximumPlans) impl_->plans.clear();
  impl_->plans[signature] = plan;
  return plan;
}

void PlanCache::clear() {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  impl_->plans.clear();
}

}  // namespace metajit
