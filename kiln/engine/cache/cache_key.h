#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace kiln::engine::cache {

/// Everything that changes a compiled result (DESIGN.md §4 "Cache"). Two keys that differ in
/// any field give different entries; equal keys name the same entry on any machine and in any
/// process. Thread-safety: a value type.
struct CacheKey {
  /// Content hash of the model package.
  uint64_t model_hash = 0;
  /// The functions compiled into the entry, in the order the loader compiles them.
  std::vector<std::string> functions;
  /// Per function (same order as `functions`), the shape of each input; empty for a function
  /// compiled shape-generic. Dimensions are whatever the caller uses (e.g. -1 for dynamic).
  std::vector<std::vector<std::vector<int64_t>>> input_shapes;
  /// `SpecializationOptions::identifier()`.
  std::string specialization;
  /// The engine's version: a new engine never reads an older engine's entries.
  std::string engine_version;
  /// `specialization::cpu_features()` of the machine the entry was compiled for.
  std::string cpu_features;

  /// The key as bytes: a format tag, then each field tagged and length-prefixed (counts and
  /// sizes as 64-bit little-endian), so no two different keys encode alike, e.g. functions
  /// {"ab", "c"} and {"a", "bc"} differ. Entries store it to rule out hash collisions.
  std::string encoded() const;
  /// XXH3-64 of `encoded()`.
  uint64_t hash() const;
  /// `hash()` as 16 lowercase hex digits.
  std::string hex() const;

  friend bool operator==(const CacheKey&, const CacheKey&) = default;
};

/// XXH3-64 of `size` bytes at `data` (seed 0). Stable across machines and releases.
uint64_t checksum64(const void* data, size_t size);

/// `value` as 16 lowercase hex digits, zero-padded.
std::string to_hex(uint64_t value);

}  // namespace kiln::engine::cache
