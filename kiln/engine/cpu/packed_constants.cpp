#include <kiln/engine/cpu/packed_constants.h>

#include <kiln/engine/ir/xxh3.h>

namespace kiln::engine::cpu {

using runtime::Error;
using runtime::Result;
using runtime::Status;

Result<std::optional<PackedConstants::Held>> PackedConstants::find_locked(const PackKey& key,
                                                                          size_t size) const {
  auto it = held_.find(key);
  if (it == held_.end()) return std::optional<Held>();
  if (it->second.bytes.size() != size) {
    return Status(Error::InvalidExternalData, "packed constant: held bytes have size " +
                                                  std::to_string(it->second.bytes.size()) +
                                                  " (expected " + std::to_string(size) +
                                                  " for the layout asked for)");
  }
  return std::optional<Held>(it->second);
}

Result<const uint8_t*> PackedConstants::get(const PackKey& key, size_t size,
                                            const std::function<Status(uint8_t*)>& pack) {
  // Packing runs under the lock: two ops asking for one constant pack it once, and packing
  // is a load-time cost only.
  std::lock_guard<std::mutex> lock(mutex_);
  KILN_ASSIGN_OR_RETURN(std::optional<Held> held, find_locked(key, size));
  if (!held && base_ != nullptr) {
    std::lock_guard<std::mutex> base_lock(base_->mutex_);
    KILN_ASSIGN_OR_RETURN(held, base_->find_locked(key, size));
  }
  if (held) {
    ++reused_;
    if (held->adopted) ++adopted_used_;
    return held->bytes.data();
  }
  const size_t reserved = std::max<size_t>(size, 1);
  KILN_ASSIGN_OR_RETURN(uint8_t * data, pool_.allocate(reserved));
  Status packed = pack(data);
  if (!packed.ok()) {
    pool_.release_last(data, reserved);
    return packed;
  }
  held_.emplace(key, Held{nullptr, {data, size}, false});
  ++packed_;
  owned_bytes_ += size;
  return data;
}

Status PackedConstants::adopt(const PackKey& key, runtime::Span<const uint8_t> bytes,
                              std::shared_ptr<const void> owner) {
  if (reinterpret_cast<uintptr_t>(bytes.data()) % 64 != 0) {
    return Status(Error::InvalidArgument,
                  "packed constant: adopted bytes are not 64-byte aligned (expected aligned "
                  "storage, as in a compiled artifact)");
  }
  std::lock_guard<std::mutex> lock(mutex_);
  held_.try_emplace(key, Held{std::move(owner), bytes, true});
  return Status();
}

void PackedConstants::absorb(const std::shared_ptr<PackedConstants>& staged) {
  if (staged == nullptr || staged.get() == this) return;
  std::scoped_lock lock(mutex_, staged->mutex_);
  for (const auto& [key, held] : staged->held_) {
    // Bytes of the staged store's own storage stay there: it is kept alive for them.
    Held taken{held.owner ? held.owner : std::shared_ptr<const void>(staged), held.bytes,
               held.adopted};
    held_.try_emplace(key, std::move(taken));
  }
  packed_ += staged->packed_;
  reused_ += staged->reused_;
  adopted_used_ += staged->adopted_used_;
  owned_bytes_ += staged->owned_bytes_;
}

std::vector<PackedConstants::Entry> PackedConstants::entries() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<Entry> out;
  out.reserve(held_.size());
  for (const auto& [key, held] : held_) out.push_back(Entry{key, held.bytes});
  return out;
}

uint64_t PackedConstants::num_packed() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return packed_;
}
uint64_t PackedConstants::num_reused() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return reused_;
}
uint64_t PackedConstants::num_adopted_used() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return adopted_used_;
}
uint64_t PackedConstants::owned_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return owned_bytes_;
}

uint64_t hash_source(const void* data, size_t size) { return ir::xxh3_64(data, size); }

}  // namespace kiln::engine::cpu
