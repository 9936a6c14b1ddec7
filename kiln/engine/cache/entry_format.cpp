#include <kiln/engine/cache/entry_format.h>

#include <kiln/engine/cache/cache_key.h>

#include <cstring>

namespace kiln::engine::cache {
namespace {

using runtime::Error;
using runtime::Span;

constexpr char kMagic[8] = {'K', 'I', 'L', 'N', 'C', 'A', 'C', 'H'};
constexpr size_t kHeaderChecksumOffset = 56;

void store_u32(uint8_t* out, uint32_t value) {
  for (int i = 0; i < 4; ++i) out[i] = static_cast<uint8_t>(value >> (8 * i));
}
void store_u64(uint8_t* out, uint64_t value) {
  for (int i = 0; i < 8; ++i) out[i] = static_cast<uint8_t>(value >> (8 * i));
}
uint32_t load_u32(const uint8_t* in) {
  uint32_t value = 0;
  for (int i = 0; i < 4; ++i) value |= static_cast<uint32_t>(in[i]) << (8 * i);
  return value;
}
uint64_t load_u64(const uint8_t* in) {
  uint64_t value = 0;
  for (int i = 0; i < 8; ++i) value |= static_cast<uint64_t>(in[i]) << (8 * i);
  return value;
}

uint64_t payload_offset_for(uint64_t key_size) {
  return (kEntryHeaderSize + key_size + kEntryAlignment - 1) / kEntryAlignment * kEntryAlignment;
}

uint64_t header_checksum(const uint8_t* header, std::string_view key) {
  std::string bytes(reinterpret_cast<const char*>(header), kHeaderChecksumOffset);
  bytes += key;
  return checksum64(bytes.data(), bytes.size());
}

runtime::Status corrupt(const std::string& problem) {
  return runtime::Status(Error::InvalidExternalData, "cache entry is corrupt: " + problem);
}

}  // namespace

std::string encode_entry_prefix(std::string_view encoded_key, uint64_t key_hash,
                                uint64_t model_hash, Span<const uint8_t> payload) {
  return encode_entry_prefix(encoded_key, key_hash, model_hash, payload.size(),
                             checksum64(payload.data(), payload.size()));
}

std::string encode_entry_prefix(std::string_view encoded_key, uint64_t key_hash,
                                uint64_t model_hash, uint64_t payload_size,
                                uint64_t payload_checksum) {
  const uint64_t payload_offset = payload_offset_for(encoded_key.size());
  std::string prefix(payload_offset, '\0');
  auto* header = reinterpret_cast<uint8_t*>(prefix.data());
  std::memcpy(header, kMagic, sizeof(kMagic));
  store_u32(header + 8, kEntryFormatVersion);
  store_u32(header + 12, static_cast<uint32_t>(encoded_key.size()));
  store_u64(header + 16, key_hash);
  store_u64(header + 24, model_hash);
  store_u64(header + 32, payload_offset);
  store_u64(header + 40, payload_size);
  store_u64(header + 48, payload_checksum);
  store_u64(header + kHeaderChecksumOffset, header_checksum(header, encoded_key));
  std::memcpy(prefix.data() + kEntryHeaderSize, encoded_key.data(), encoded_key.size());
  return prefix;
}

std::vector<uint8_t> encode_entry(const CacheKey& key,
                                  const std::vector<Span<const uint8_t>>& pieces) {
  std::vector<uint8_t> payload;
  for (const auto& piece : pieces) payload.insert(payload.end(), piece.begin(), piece.end());
  const std::string encoded_key = key.encoded();
  const std::string prefix =
      encode_entry_prefix(encoded_key, checksum64(encoded_key.data(), encoded_key.size()),
                          key.model_hash, Span<const uint8_t>(payload.data(), payload.size()));
  std::vector<uint8_t> file(prefix.begin(), prefix.end());
  file.insert(file.end(), payload.begin(), payload.end());
  return file;
}

runtime::Result<EntryView> validate_entry(Span<const uint8_t> file, std::string_view encoded_key,
                                          uint64_t key_hash, PayloadCheck payload_check) {
  if (file.size() < kEntryHeaderSize) {
    return corrupt("file has " + std::to_string(file.size()) + " bytes (expected at least " +
                   std::to_string(kEntryHeaderSize) + ")");
  }
  const uint8_t* header = file.data();
  if (std::memcmp(header, kMagic, sizeof(kMagic)) != 0) return corrupt("bad magic");
  const uint32_t version = load_u32(header + 8);
  if (version != kEntryFormatVersion) {
    return corrupt("format version " + std::to_string(version) + " (expected " +
                   std::to_string(kEntryFormatVersion) + ")");
  }
  const uint64_t key_size = load_u32(header + 12);
  if (kEntryHeaderSize + key_size > file.size()) {
    return corrupt("key has " + std::to_string(key_size) + " bytes, past the file's " +
                   std::to_string(file.size()) + " (expected " +
                   std::to_string(encoded_key.size()) + ")");
  }
  const std::string_view stored_key(reinterpret_cast<const char*>(header) + kEntryHeaderSize,
                                    key_size);
  if (load_u64(header + kHeaderChecksumOffset) != header_checksum(header, stored_key)) {
    return corrupt("header checksum mismatch");
  }
  // A well-formed entry of another key (other engine, CPU features, options, shapes).
  if (load_u64(header + 16) != key_hash || stored_key != encoded_key) {
    return runtime::Status(Error::InvalidExternalData,
                           "cache entry holds a different key: " + to_hex(load_u64(header + 16)) +
                               " (expected " + to_hex(key_hash) + ")");
  }
  const uint64_t payload_offset = load_u64(header + 32);
  const uint64_t payload_size = load_u64(header + 40);
  if (payload_offset != payload_offset_for(key_size) || payload_offset > file.size() ||
      payload_size != file.size() - payload_offset) {
    return corrupt("file has " + std::to_string(file.size()) + " bytes (expected " +
                   std::to_string(payload_offset_for(key_size)) + " + " +
                   std::to_string(payload_size) + ")");
  }
  EntryView entry{load_u64(header + 24), file.subspan(payload_offset, payload_size),
                  load_u64(header + 48)};
  if (payload_check == PayloadCheck::Now) KILN_RETURN_IF_ERROR(check_payload(entry));
  return entry;
}

runtime::Status check_payload(const EntryView& entry) {
  if (entry.payload_checksum != checksum64(entry.payload.data(), entry.payload.size())) {
    return corrupt("payload checksum mismatch");
  }
  return runtime::Status();
}

}  // namespace kiln::engine::cache
