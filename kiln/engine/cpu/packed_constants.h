#pragma once

#include <kiln/runtime/core/bulk_pool.h>
#include <kiln/runtime/core/result.h>
#include <kiln/runtime/core/span.h>
#include <kiln/runtime/core/status.h>

#include <algorithm>
#include <compare>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace kiln::engine::cpu {

/// What a packed constant is: which bytes, reordered from which layout into which. Two ops
/// that pack the same weight into the same layout share one copy.
struct PackKey {
  uint64_t source_hash = 0;  ///< XXH3-64 of the source bytes.
  /// The source and target layout descriptions (provider-specific bytes, e.g. oneDNN's memory
  /// descriptors); equal strings mean equal layouts.
  std::string layouts;

  friend auto operator<=>(const PackKey&, const PackKey&) = default;
  friend bool operator==(const PackKey&, const PackKey&) = default;
};

/// The pre-packed constants (weights reordered into a kernel's layout) of one loaded model,
/// shared by every op, function and shape of it (DESIGN.md §4). A constant is packed the first
/// time an op asks for it; later requests, and ops built from a compiled artifact whose bytes
/// were `adopt`ed, get the same bytes without repacking.
///
/// Packed bytes share large chunks (`runtime::BulkPool`), each allocation's pages mapped in one
/// call rather than faulted one by one.
///
/// Thread-safety: every method may be called concurrently. Bytes returned stay valid and
/// unchanged while the store lives.
class PackedConstants {
 public:
  PackedConstants() = default;
  /// A store staged over `base` (which must outlive it) for one build whose adopted bytes are
  /// not yet trusted (a cache entry whose payload is still being checked): `get` serves what
  /// this store holds, then what `base` holds, and packs what neither does here; `adopt` and
  /// the counters stay here until `base->absorb(this)`.
  explicit PackedConstants(const PackedConstants* base) : base_(base) {}
  PackedConstants(const PackedConstants&) = delete;
  PackedConstants& operator=(const PackedConstants&) = delete;

  /// The bytes of `key` (`size` bytes, 64-byte aligned): the ones held, else fresh storage
  /// filled by `pack`. Errors: InvalidExternalData when held bytes of `key` have another size
  /// (an artifact that does not match the op); any error of `pack` (nothing is kept then).
  runtime::Result<const uint8_t*> get(const PackKey& key, size_t size,
                                      const std::function<runtime::Status(uint8_t*)>& pack);

  /// Holds `bytes` (e.g. in a mapped compiled artifact, kept alive by `owner`) as the packing
  /// of `key`, replacing nothing: a key already held keeps its bytes. Errors: InvalidArgument
  /// when `bytes` is not 64-byte aligned.
  runtime::Status adopt(const PackKey& key, runtime::Span<const uint8_t> bytes,
                        std::shared_ptr<const void> owner);

  /// Takes over what `staged` (a store staged over this one) holds and counted: its packings
  /// (a key held here keeps its bytes) and its counters. `staged` stays valid; this store
  /// keeps it alive while it holds bytes of its storage.
  void absorb(const std::shared_ptr<PackedConstants>& staged);

  /// One held packing.
  struct Entry {
    PackKey key;
    runtime::Span<const uint8_t> bytes;
  };
  /// Every packing held, ordered by key.
  std::vector<Entry> entries() const;

  /// How many constants were packed here (each `get` that ran `pack`).
  uint64_t num_packed() const;
  /// How many `get`s were served from held bytes (packed earlier or adopted).
  uint64_t num_reused() const;
  /// How many `get`s were served from adopted bytes.
  uint64_t num_adopted_used() const;
  /// Bytes held in storage of this store (not counting adopted ones).
  uint64_t owned_bytes() const;

 private:
  struct Held {
    std::shared_ptr<const void> owner;  ///< Keeps the bytes alive (none: in `pool_`).
    runtime::Span<const uint8_t> bytes;
    bool adopted = false;  ///< Given by `adopt` (here or in a staged store absorbed).
  };
  // The bytes held of `key` (checked against `size`) and whether they were adopted; nullopt
  // when none. Caller holds `mutex_`.
  runtime::Result<std::optional<Held>> find_locked(const PackKey& key, size_t size) const;

  const PackedConstants* base_ = nullptr;
  mutable std::mutex mutex_;
  std::map<PackKey, Held> held_;
  runtime::BulkPool pool_;  ///< Where bytes packed here live.
  uint64_t packed_ = 0, reused_ = 0, adopted_used_ = 0, owned_bytes_ = 0;
};

/// XXH3-64 of `size` bytes: the `PackKey::source_hash` of a constant.
uint64_t hash_source(const void* data, size_t size);

}  // namespace kiln::engine::cpu
