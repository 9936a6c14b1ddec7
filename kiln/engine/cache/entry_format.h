#pragma once

#include <kiln/engine/cache/cache_key.h>
#include <kiln/runtime/core/result.h>
#include <kiln/runtime/core/span.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::engine::cache {

/// The on-disk layout of one cache entry file (all integers little-endian):
///
///   offset  size  field
///        0     8  magic "KILNCACH"
///        8     4  format version (kEntryFormatVersion)
///       12     4  key size K
///       16     8  key hash (CacheKey::hash())
///       24     8  model hash
///       32     8  payload offset P = K + 64 rounded up to 64
///       40     8  payload size N
///       48     8  payload checksum (XXH3-64 of the payload)
///       56     8  header checksum (XXH3-64 of bytes 0..56 followed by the key)
///       64     K  the key (CacheKey::encoded())
///        P     N  the payload; the file is exactly P + N bytes
///
/// The payload starts 64-byte aligned in the file (and so in a mapping of it).
inline constexpr uint32_t kEntryFormatVersion = 1;
inline constexpr size_t kEntryHeaderSize = 64;
inline constexpr size_t kEntryAlignment = 64;

/// What a valid entry holds.
struct EntryView {
  uint64_t model_hash = 0;
  runtime::Span<const uint8_t> payload;
  uint64_t payload_checksum = 0;  ///< As the header records it.
};

/// The bytes that precede the payload (header, key, padding) for an entry of `encoded_key`.
std::string encode_entry_prefix(std::string_view encoded_key, uint64_t key_hash,
                                uint64_t model_hash, runtime::Span<const uint8_t> payload);
/// Same, for a payload of `payload_size` bytes whose XXH3-64 is `payload_checksum`.
std::string encode_entry_prefix(std::string_view encoded_key, uint64_t key_hash,
                                uint64_t model_hash, uint64_t payload_size,
                                uint64_t payload_checksum);

/// The whole entry file of `key` holding the payload given as consecutive `pieces`: exactly
/// the bytes `ModelCache::store(key, pieces, key.model_hash)` writes, so an entry can be made
/// in one place (e.g. at export time) and installed elsewhere with `ModelCache::store_entry`.
std::vector<uint8_t> encode_entry(const CacheKey& key,
                                  const std::vector<runtime::Span<const uint8_t>>& pieces);

/// Whether `validate_entry` hashes the payload, or leaves that to `check_payload`.
enum class PayloadCheck { Now, Later };

/// Checks every field of `file` (the whole entry file) against the key it should hold; with
/// PayloadCheck::Later, all but the payload checksum (which the caller must `check_payload`
/// before trusting the payload's bytes). Errors: InvalidExternalData whose message says what
/// is wrong (bad magic, version, sizes, key, checksums); the entry must then not be used.
runtime::Result<EntryView> validate_entry(runtime::Span<const uint8_t> file,
                                          std::string_view encoded_key, uint64_t key_hash,
                                          PayloadCheck payload_check = PayloadCheck::Now);

/// Checks `entry`'s payload against its recorded checksum. Errors: InvalidExternalData
/// "payload checksum mismatch" (the entry must then not be used).
runtime::Status check_payload(const EntryView& entry);

}  // namespace kiln::engine::cache
