#include <kiln/runtime/executor/file_format.h>

#include <cstring>
#include <string>

namespace kiln::runtime {

namespace {

void put32(uint8_t* out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out[i] = static_cast<uint8_t>(v >> (8 * i));
}
void put64(uint8_t* out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out[i] = static_cast<uint8_t>(v >> (8 * i));
}
uint32_t get32(const uint8_t* in) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(in[i]) << (8 * i);
  return v;
}
uint64_t get64(const uint8_t* in) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(in[i]) << (8 * i);
  return v;
}

Status range_error(const char* what, uint64_t offset, uint64_t size, uint64_t file_size) {
  return Status(Error::InvalidProgram,
                std::string("load program: ") + what + " at offset " + std::to_string(offset) +
                    " of " + std::to_string(size) + " bytes ends past the end of the file (" +
                    std::to_string(file_size) + " bytes)");
}

}  // namespace

// Layout: magic[4] header_size:u32 format_version:u32 segment_alignment:u32
//         program_offset:u64 program_size:u64 segment_base_offset:u64 segment_data_size:u64
void FileHeader::encode(uint8_t* out) const {
  std::memcpy(out, kMagic, 4);
  put32(out + 4, static_cast<uint32_t>(kSize));
  put32(out + 8, format_version);
  put32(out + 12, segment_alignment);
  put64(out + 16, program_offset);
  put64(out + 24, program_size);
  put64(out + 32, segment_base_offset);
  put64(out + 40, segment_data_size);
}

Result<FileHeader> FileHeader::decode(const uint8_t* data, size_t size, uint64_t file_size) {
  if (size < kSize || file_size < kSize) {
    return Status(Error::InvalidProgram, "load program: file has " + std::to_string(file_size) +
                                             " bytes (expected at least the " +
                                             std::to_string(kSize) + "-byte header)");
  }
  if (std::memcmp(data, kMagic, 4) != 0) {
    return Status(Error::InvalidProgram,
                  "load program: file does not start with magic 'KILN' (not a .kiln program)");
  }
  FileHeader header;
  uint32_t header_size = get32(data + 4);
  header.format_version = get32(data + 8);
  header.segment_alignment = get32(data + 12);
  header.program_offset = get64(data + 16);
  header.program_size = get64(data + 24);
  header.segment_base_offset = get64(data + 32);
  header.segment_data_size = get64(data + 40);
  if (header.format_version != kFormatVersion) {
    return Status(Error::InvalidProgram,
                  "load program: format version " + std::to_string(header.format_version) +
                      " (expected " + std::to_string(kFormatVersion) +
                      "; re-export the model with this kiln)");
  }
  if (header_size != kSize) {
    return Status(Error::InvalidProgram, "load program: header size " +
                                             std::to_string(header_size) + " (expected " +
                                             std::to_string(kSize) + ")");
  }
  uint32_t a = header.segment_alignment;
  if (a == 0 || (a & (a - 1)) != 0 || a > (1u << 24)) {
    return Status(Error::InvalidProgram, "load program: segment alignment " + std::to_string(a) +
                                             " (expected a power of two up to 16 MiB)");
  }
  if (header.program_offset < kSize || header.program_offset > file_size ||
      header.program_size > file_size - header.program_offset) {
    return range_error("program", header.program_offset, header.program_size, file_size);
  }
  if (header.program_offset % 8 != 0) {
    return Status(Error::InvalidProgram, "load program: program offset " +
                                             std::to_string(header.program_offset) +
                                             " is not a multiple of 8");
  }
  if (header.segment_base_offset > file_size ||
      header.segment_data_size > file_size - header.segment_base_offset) {
    return range_error("segment area", header.segment_base_offset, header.segment_data_size,
                       file_size);
  }
  if (header.segment_base_offset % a != 0) {
    return Status(Error::InvalidProgram, "load program: segment area offset " +
                                             std::to_string(header.segment_base_offset) +
                                             " is not a multiple of the alignment " +
                                             std::to_string(a));
  }
  return header;
}

}  // namespace kiln::runtime
