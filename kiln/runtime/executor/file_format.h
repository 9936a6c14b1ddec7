#pragma once

#include <kiln/runtime/core/result.h>

#include <cstddef>
#include <cstdint>

namespace kiln::runtime {

/// The fixed header at byte 0 of every .kiln file (little-endian). The program flatbuffer and
/// the segment area follow at the offsets it gives.
struct FileHeader {
  static constexpr char kMagic[4] = {'K', 'I', 'L', 'N'};
  static constexpr uint32_t kFormatVersion = 1;
  static constexpr size_t kSize = 48;
  static constexpr uint32_t kDefaultSegmentAlignment = 4096;

  uint32_t format_version = kFormatVersion;
  uint32_t segment_alignment = kDefaultSegmentAlignment;
  uint64_t program_offset = 0;
  uint64_t program_size = 0;
  uint64_t segment_base_offset = 0;
  uint64_t segment_data_size = 0;

  /// Writes the header's kSize bytes to `out`.
  void encode(uint8_t* out) const;
  /// Parses and checks a header against a file of `file_size` bytes: magic, version, header
  /// size, and that every range lies inside the file. Errors: InvalidProgram saying which.
  static Result<FileHeader> decode(const uint8_t* data, size_t size, uint64_t file_size);
};

}  // namespace kiln::runtime
