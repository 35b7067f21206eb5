// Dynamic scalar sites (see scalar_sites.h): one table from (site, op, use within the step) to the first value
// seen there and whether another has been seen since.
#include "meta_ops/scalar_sites.h"

#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>

#include "core/executor.h"
#include "core/log.h"
#include "core/stats.h"
#include "meta_ops/broadcast.h"
#include "meta_ops/elementwise.h"

namespace metajit {
namespace {

// A place may pass several numbers within one step (a library line that every BatchNorm layer runs with its
// own count): its n-th use since the last sync is a place of its own, as an op's position in a traced graph is
// in torch.compile, so per-layer constants stay constants and only a number that differs from one step to the
// next at the same use turns dynamic.
struct UseCount {
  uint64_t epoch = 0;
  uint64_t uses = 0;
};

struct SiteState {
  uint64_t first_value_bits = 0;
  bool dynamic = false;
};

std::mutex sites_mutex;
std::unordered_map<uint64_t, UseCount>& use_counts() {
  static auto* table = new std::unordered_map<uint64_t, UseCount>();  // never destroyed: read at exit too
  return *table;
}
std::unordered_map<uint64_t, SiteState>& sites() {
  static auto* table = new std::unordered_map<uint64_t, SiteState>();
  return *table;
}

constexpr size_t kMostRememberedUses = size_t(1) << 20;

uint64_t mix(uint64_t seed, uint64_t value) { return (seed ^ value) * 0x9E3779B97F4A7C15ull + 0x7F4A7C15ull; }

template <typename T>
void store(void* data, T value) {
  std::memcpy(data, &value, sizeof(T));
}

}  // namespace

bool scalar_site_is_dynamic(uint64_t site, int op_code, uint64_t value_bits, const char* describe) {
  if (site == 0) return false;
  uint64_t place = mix(site, uint64_t(op_code));
  uint64_t epoch = sync_epoch();
  std::lock_guard<std::mutex> lock(sites_mutex);
  if (sites().size() > kMostRememberedUses) {  // forgetting only means a place is learnt again
    sites().clear();
    use_counts().clear();
  }
  UseCount& count = use_counts()[place];
  if (count.epoch != epoch) count = {epoch, 0};
  uint64_t key = mix(place, count.uses++);
  auto [entry, inserted] = sites().try_emplace(key, SiteState{value_bits, false});
  if (inserted || entry->second.dynamic) return !inserted;
  if (entry->second.first_value_bits == value_bits) return false;
  entry->second.dynamic = true;
  stats().dynamic_scalar_sites++;
  if (log_enabled(LogLevel::Info))
    log_message(LogLevel::Info, std::string("the Python number of a ") + describe + " at " +
                                    current_provenance().to_string() +
                                    " changed between calls: it is a kernel input from now on");
  return true;
}

NodePtr scalar_argument(const Shape& shape, DType dtype, double value, int64_t integer_value, bool integer) {
  // float16 has no host arithmetic here: the value is held as float32 and cast in the kernel, as the
  // constant it replaces is rounded there too.
  DType held = dtype == DType::Float16 ? DType::Float32 : dtype;
  NodePtr argument = make_data_node(held, {});
  void* data = argument->storage->data();
  switch (held) {
    case DType::Float32: store(data, float(integer ? double(integer_value) : value)); break;
    case DType::Float64: store(data, integer ? double(integer_value) : value); break;
    case DType::Int32: store(data, int32_t(integer ? integer_value : int64_t(value))); break;
    case DType::Int64: store(data, integer ? integer_value : int64_t(value)); break;
    case DType::Int8: store(data, int8_t(integer ? integer_value : int64_t(value))); break;
    case DType::UInt8: store(data, uint8_t(integer ? integer_value : int64_t(value))); break;
    case DType::Bool: store(data, uint8_t((integer ? integer_value != 0 : value != 0) ? 1 : 0)); break;
    default: throw std::logic_error("scalar_argument: unexpected dtype");
  }
  NodePtr operand = held == dtype ? argument : cast(argument, dtype);
  return shape.empty() ? operand : broadcast_to(operand, shape);
}

}  // namespace metajit
