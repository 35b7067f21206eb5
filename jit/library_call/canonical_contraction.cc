#include "jit/library_call/canonical_contraction.h"

#include <map>
#include <string>

namespace metajit {
namespace {

class SlottedCall : public LibraryCall {
 public:
  SlottedCall(std::shared_ptr<const LibraryCall> call, std::vector<CanonicalContraction::Slot> byte_slots)
      : call_(std::move(call)), byte_slots_(std::move(byte_slots)) {}
  void run(void* const* buffers) const override {
    std::vector<void*> slots(byte_slots_.size());
    for (size_t slot = 0; slot < slots.size(); ++slot)
      slots[slot] = static_cast<char*>(buffers[byte_slots_[slot].buffer]) + byte_slots_[slot].offset;
    call_->run(slots.data());
  }
  std::string describe() const override { return call_->describe(); }
  bool computes_weight_gradient() const override { return call_->computes_weight_gradient(); }

 private:
  std::shared_ptr<const LibraryCall> call_;
  std::vector<CanonicalContraction::Slot> byte_slots_;  // offsets in bytes
};

}  // namespace

bool CanonicalContraction::identity() const {
  for (size_t slot = 0; slot < slots.size(); ++slot)
    if (slots[slot].buffer != int(slot) || slots[slot].offset != 0) return false;
  return true;
}

CanonicalContraction canonical_contraction(const Contraction& contraction) {
  CanonicalContraction result{contraction, {}};
  std::map<std::pair<int, int64_t>, int> slot_of;  // (buffer, offset) -> slot
  auto place = [&](TensorAccess& access) {
    if (access.buffer < 0) return;
    std::vector<int64_t> strides = access.row_major_strides();
    int64_t offset = 0;
    for (size_t dim = 0; dim < access.coordinates.size(); ++dim)
      if (!access.guarded[dim]) offset += access.coordinates[dim].constant * strides[dim];
    if (offset >= 0) {
      for (size_t dim = 0; dim < access.coordinates.size(); ++dim)
        if (!access.guarded[dim]) access.coordinates[dim].constant = 0;
    } else {
      offset = 0;
    }
    auto [found, added] = slot_of.emplace(std::make_pair(access.buffer, offset), int(result.slots.size()));
    if (added) result.slots.push_back({access.buffer, offset});
    access.buffer = found->second;
  };
  place(result.contraction.output);
  place(result.contraction.left);
  place(result.contraction.right);
  for (PostOp& op : result.contraction.post_ops)
    if (op.reads_tensor()) place(op.operand);
  return result;
}

std::shared_ptr<const LibraryCall> call_with_slots(std::shared_ptr<const LibraryCall> call,
                                                   const CanonicalContraction& canonical, int element_bytes) {
  if (!call || canonical.identity()) return call;
  std::vector<CanonicalContraction::Slot> byte_slots = canonical.slots;
  for (CanonicalContraction::Slot& slot : byte_slots) slot.offset *= element_bytes;
  return std::make_shared<SlottedCall>(std::move(call), std::move(byte_slots));
}

}  // namespace metajit
