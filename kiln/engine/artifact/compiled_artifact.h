#pragma once

#include <kiln/engine/cpu/packed_constants.h>
#include <kiln/runtime/core/result.h>
#include <kiln/runtime/core/span.h>

#include <cstdint>
#include <string>
#include <vector>

/// The compiled artifact: what the engine stores per cache entry (DESIGN.md §4) — the plan of
/// each function specialized at load and the pre-packed weights, so a warm load maps the file
/// and adopts the packed bytes in place instead of repacking. The cache entry around it holds
/// the rest of the header: magic, entry format version, the key (model hash, functions,
/// shapes, specialization identifier, engine version, CPU features) and a payload checksum.
///
/// Payload layout (little-endian):
///
///   offset  size  field
///        0     8  magic "KILNART\0"
///        8     4  artifact format version (kArtifactFormatVersion)
///       12     4  number of functions F
///       16     4  number of packed constants P
///       20     4  reserved (0)
///       24     8  table size T (the bytes at 64..64+T)
///       32     8  data offset D (64-byte aligned, ≥ 64 + T)
///       40     8  data size
///       48    16  reserved (0)
///       64     T  table: F functions, then P packed constants (below)
///        D        data: the packed constants' bytes, each at a 64-byte aligned offset
///
///   function: u32 name length, name, u32 input count, per input (u32 rank, rank × i64 dims),
///             u64 plan fingerprint, u64 arena bytes, u32 step count
///   packed:   u64 source hash, u32 layouts length, layouts, u64 offset (in data), u64 size
namespace kiln::engine::artifact {

inline constexpr uint32_t kArtifactFormatVersion = 1;

/// What the artifact records of one function specialized at load. The plan is derived again
/// after a warm load, when the function is first used (it is cheap; packing is not), and must
/// give the same fingerprint.
struct FunctionRecord {
  std::string name;
  std::vector<std::vector<int64_t>> input_sizes;
  uint64_t plan_fingerprint = 0;  ///< See `plan_fingerprint` in model_loader.cpp.
  uint64_t arena_bytes = 0;
  uint32_t num_steps = 0;
  friend bool operator==(const FunctionRecord&, const FunctionRecord&) = default;
};

/// A packed constant as stored.
struct PackedRecord {
  cpu::PackKey key;
  runtime::Span<const uint8_t> bytes;  ///< Reading: inside the payload (64-byte aligned).
};

/// A read artifact; spans point into the payload given to `read_artifact`.
struct ArtifactView {
  std::vector<FunctionRecord> functions;
  std::vector<PackedRecord> packed;
};

/// A payload laid out without copying the packed bytes: `head` (header and table), then the
/// pieces in order. Valid while `head` and the packed bytes it was made from live.
struct ArtifactPieces {
  std::vector<uint8_t> head;
  std::vector<runtime::Span<const uint8_t>> pieces;  ///< head, then packed bytes and padding
};

/// The payload for `functions` and `packed` as pieces (for `cache::ModelCache::store`).
/// `pieces` points into the result's `head` and into `packed`'s bytes: keep them alive and
/// do not move the result's `head` storage.
void layout_artifact(const std::vector<FunctionRecord>& functions,
                     const std::vector<PackedRecord>& packed, ArtifactPieces& out);

/// The payload for `functions` and `packed` in one buffer (packed bytes copied in).
std::vector<uint8_t> write_artifact(const std::vector<FunctionRecord>& functions,
                                    const std::vector<PackedRecord>& packed);

/// Reads and checks a payload: magic, version, reserved bytes, every length and offset against
/// the payload's size, alignment, no overlapping packed constants. `payload` must start 64-byte
/// aligned. Errors: InvalidExternalData naming the field, its value and what was expected.
runtime::Result<ArtifactView> read_artifact(runtime::Span<const uint8_t> payload);

}  // namespace kiln::engine::artifact
