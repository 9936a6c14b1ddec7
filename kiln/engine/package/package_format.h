#pragma once

// The byte layout shared by the package writer and reader (internal to the package folder).

#include <kiln/engine/package/model_package_generated.h>
#include <kiln/engine/package/package.h>

#include <bit>
#include <cstring>

namespace kiln::engine::package::format {

static_assert(std::endian::native == std::endian::little, "packages are little-endian");

// Header field offsets (README.md).
inline constexpr size_t kMagicAt = 0;
inline constexpr size_t kVersionAt = 4;
inline constexpr size_t kFlatbufferOffsetAt = 8;
inline constexpr size_t kFlatbufferSizeAt = 16;
inline constexpr size_t kWeightsOffsetAt = 24;
inline constexpr size_t kWeightsSizeAt = 32;
inline constexpr size_t kContentHashAt = 40;
inline constexpr size_t kReservedAt = 48;

inline uint64_t align_up(uint64_t value, uint64_t alignment) {
  return (value + alignment - 1) / alignment * alignment;
}

template <typename T>
T load(const uint8_t* bytes, size_t at) {
  T value;
  std::memcpy(&value, bytes + at, sizeof(T));
  return value;
}

template <typename T>
void store(uint8_t* bytes, size_t at, T value) {
  std::memcpy(bytes + at, &value, sizeof(T));
}

/// Writes `header` (and the magic) into the first kPackageHeaderSize bytes; reserved bytes zero.
void encode_header(const PackageHeader& header, uint8_t* bytes);

/// The address of the root table's content_hash field, or null when it is absent.
const uint8_t* content_hash_field(const schema::Package* root);

/// XXH3-64 of `flatbuffer` with the 8 bytes at `hash_field` read as zero. `hash_field` lies
/// inside `flatbuffer`. The flatbuffer holds each weight's content hash, and the reader checks
/// every weight against its hash and every other segment byte for zero, so this covers every
/// byte of the package while the weights are hashed once.
uint64_t hash_package(runtime::Span<const uint8_t> flatbuffer, const uint8_t* hash_field);

}  // namespace kiln::engine::package::format
