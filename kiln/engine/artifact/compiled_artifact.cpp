#include <kiln/engine/artifact/compiled_artifact.h>

#include <cstring>
#include <set>

namespace kiln::engine::artifact {

namespace {

using runtime::Error;
using runtime::Result;
using runtime::Status;

constexpr char kMagic[8] = {'K', 'I', 'L', 'N', 'A', 'R', 'T', '\0'};
constexpr size_t kHeaderSize = 64;
constexpr size_t kAlignment = 64;
constexpr uint32_t kMaxRank = 16;

uint64_t align_up(uint64_t value) { return (value + kAlignment - 1) / kAlignment * kAlignment; }

class Writer {
 public:
  void u32(uint32_t v) { put(&v, sizeof v); }
  void u64(uint64_t v) { put(&v, sizeof v); }
  void i64(int64_t v) { put(&v, sizeof v); }
  void str(const std::string& s) {
    u32(static_cast<uint32_t>(s.size()));
    put(s.data(), s.size());
  }
  void put(const void* data, size_t size) {
    const auto* p = static_cast<const uint8_t*>(data);
    bytes.insert(bytes.end(), p, p + size);
  }
  std::vector<uint8_t> bytes;
};

/// Bounds-checked little-endian reads; every failure names the field.
class Reader {
 public:
  Reader(runtime::Span<const uint8_t> bytes, size_t at) : bytes_(bytes), at_(at) {}
  Result<uint32_t> u32(const std::string& field) { return get<uint32_t>(field); }
  Result<uint64_t> u64(const std::string& field) { return get<uint64_t>(field); }
  Result<int64_t> i64(const std::string& field) { return get<int64_t>(field); }
  Result<std::string> str(const std::string& field, uint32_t max_size) {
    KILN_ASSIGN_OR_RETURN(uint32_t size, u32(field + " length"));
    if (size > max_size || size > bytes_.size() - at_) {
      return bad(field + " length", std::to_string(size),
                 "at most " + std::to_string(std::min<size_t>(max_size, bytes_.size() - at_)) +
                     ", the bytes left in the table");
    }
    std::string out(reinterpret_cast<const char*>(bytes_.data() + at_), size);
    at_ += size;
    return out;
  }
  size_t at() const { return at_; }

  static Status bad(const std::string& field, const std::string& value,
                    const std::string& expected) {
    return Status(Error::InvalidExternalData,
                  "compiled artifact: " + field + " is " + value + " (expected " + expected + ")");
  }

 private:
  template <typename T>
  Result<T> get(const std::string& field) {
    if (bytes_.size() - at_ < sizeof(T)) {
      return bad(field, "past the end of the table at offset " + std::to_string(at_),
                 "the table to hold it");
    }
    T v;
    std::memcpy(&v, bytes_.data() + at_, sizeof v);
    at_ += sizeof v;
    return v;
  }
  runtime::Span<const uint8_t> bytes_;
  size_t at_;
};

}  // namespace

void layout_artifact(const std::vector<FunctionRecord>& functions,
                     const std::vector<PackedRecord>& packed, ArtifactPieces& out) {
  static constexpr uint8_t kZeros[kAlignment] = {};
  Writer table;
  for (const FunctionRecord& f : functions) {
    table.str(f.name);
    table.u32(static_cast<uint32_t>(f.input_sizes.size()));
    for (const auto& sizes : f.input_sizes) {
      table.u32(static_cast<uint32_t>(sizes.size()));
      for (int64_t d : sizes) table.i64(d);
    }
    table.u64(f.plan_fingerprint);
    table.u64(f.arena_bytes);
    table.u32(f.num_steps);
  }
  uint64_t data_size = 0;
  for (const PackedRecord& p : packed) {
    table.u64(p.key.source_hash);
    table.str(p.key.layouts);
    table.u64(data_size);
    table.u64(p.bytes.size());
    data_size = align_up(data_size + p.bytes.size());
  }
  uint64_t data_offset = align_up(kHeaderSize + table.bytes.size());
  Writer head;
  head.put(kMagic, sizeof kMagic);
  head.u32(kArtifactFormatVersion);
  head.u32(static_cast<uint32_t>(functions.size()));
  head.u32(static_cast<uint32_t>(packed.size()));
  head.u32(0);
  head.u64(table.bytes.size());
  head.u64(data_offset);
  head.u64(data_size);
  head.bytes.resize(kHeaderSize, 0);
  head.put(table.bytes.data(), table.bytes.size());
  head.bytes.resize(data_offset, 0);
  out.head = std::move(head.bytes);
  out.pieces.clear();
  out.pieces.emplace_back(out.head.data(), out.head.size());
  for (const PackedRecord& p : packed) {
    out.pieces.push_back(p.bytes);
    size_t padding = align_up(p.bytes.size()) - p.bytes.size();
    if (padding != 0) out.pieces.emplace_back(kZeros, padding);
  }
}

std::vector<uint8_t> write_artifact(const std::vector<FunctionRecord>& functions,
                                    const std::vector<PackedRecord>& packed) {
  ArtifactPieces pieces;
  layout_artifact(functions, packed, pieces);
  std::vector<uint8_t> out;
  for (const auto& piece : pieces.pieces) out.insert(out.end(), piece.begin(), piece.end());
  return out;
}

Result<ArtifactView> read_artifact(runtime::Span<const uint8_t> payload) {
  using R = Reader;
  if (reinterpret_cast<uintptr_t>(payload.data()) % kAlignment != 0) {
    return R::bad("payload address", "not 64-byte aligned", "a 64-byte aligned mapping");
  }
  if (payload.size() < kHeaderSize) {
    return R::bad("size", std::to_string(payload.size()) + " bytes",
                  "at least the " + std::to_string(kHeaderSize) + "-byte header");
  }
  if (std::memcmp(payload.data(), kMagic, sizeof kMagic) != 0) {
    return R::bad("magic", "not \"KILNART\"", "\"KILNART\\0\"");
  }
  R header(payload.subspan(0, kHeaderSize), sizeof kMagic);
  KILN_ASSIGN_OR_RETURN(uint32_t version, header.u32("format version"));
  if (version != kArtifactFormatVersion) {
    return R::bad("format version", std::to_string(version),
                  std::to_string(kArtifactFormatVersion));
  }
  KILN_ASSIGN_OR_RETURN(uint32_t num_functions, header.u32("function count"));
  KILN_ASSIGN_OR_RETURN(uint32_t num_packed, header.u32("packed constant count"));
  KILN_ASSIGN_OR_RETURN(uint32_t reserved, header.u32("reserved field"));
  KILN_ASSIGN_OR_RETURN(uint64_t table_size, header.u64("table size"));
  KILN_ASSIGN_OR_RETURN(uint64_t data_offset, header.u64("data offset"));
  KILN_ASSIGN_OR_RETURN(uint64_t data_size, header.u64("data size"));
  for (size_t i = 48; i < kHeaderSize; ++i) reserved |= payload[i];
  if (reserved != 0) return R::bad("reserved bytes", "not zero", "zero");
  if (table_size > payload.size() - kHeaderSize) {
    return R::bad("table size", std::to_string(table_size),
                  "at most " + std::to_string(payload.size() - kHeaderSize) +
                      ", the bytes after "
                      "the header");
  }
  if (data_offset != align_up(kHeaderSize + table_size)) {
    return R::bad("data offset", std::to_string(data_offset),
                  std::to_string(align_up(kHeaderSize + table_size)) + ", the table's end aligned");
  }
  if (data_offset > payload.size() || data_size != payload.size() - data_offset) {
    return R::bad("data size", std::to_string(data_size),
                  "the payload's bytes after the data offset (payload size " +
                      std::to_string(payload.size()) + ")");
  }
  R table(payload.subspan(0, kHeaderSize + table_size), kHeaderSize);
  ArtifactView view;
  // Each record takes at least 4 bytes, so the counts are bounded by the table size.
  if (num_functions > table_size / 4 || num_packed > table_size / 4) {
    return R::bad("function or packed constant count",
                  std::to_string(num_functions) + " and " + std::to_string(num_packed),
                  "counts the table size " + std::to_string(table_size) + " can hold");
  }
  for (uint32_t f = 0; f < num_functions; ++f) {
    std::string field = "function " + std::to_string(f);
    FunctionRecord record;
    KILN_ASSIGN_OR_RETURN(record.name, table.str(field + " name", 4096));
    KILN_ASSIGN_OR_RETURN(uint32_t num_inputs, table.u32(field + " input count"));
    if (num_inputs > table_size / 4) {
      return R::bad(field + " input count", std::to_string(num_inputs), "what the table holds");
    }
    for (uint32_t i = 0; i < num_inputs; ++i) {
      KILN_ASSIGN_OR_RETURN(uint32_t rank,
                            table.u32(field + " input " + std::to_string(i) + " rank"));
      if (rank > kMaxRank) {
        return R::bad(field + " input " + std::to_string(i) + " rank", std::to_string(rank),
                      "at most " + std::to_string(kMaxRank));
      }
      std::vector<int64_t> sizes(rank);
      for (auto& d : sizes) {
        KILN_ASSIGN_OR_RETURN(d, table.i64(field + " input " + std::to_string(i) + " dim"));
        if (d < 0) return R::bad(field + " dim", std::to_string(d), "a size ≥ 0");
      }
      record.input_sizes.push_back(std::move(sizes));
    }
    KILN_ASSIGN_OR_RETURN(record.plan_fingerprint, table.u64(field + " plan fingerprint"));
    KILN_ASSIGN_OR_RETURN(record.arena_bytes, table.u64(field + " arena bytes"));
    KILN_ASSIGN_OR_RETURN(record.num_steps, table.u32(field + " step count"));
    view.functions.push_back(std::move(record));
  }
  const uint8_t* data = payload.data() + data_offset;
  uint64_t end_of_previous = 0;
  std::set<cpu::PackKey> keys;
  for (uint32_t p = 0; p < num_packed; ++p) {
    std::string field = "packed constant " + std::to_string(p);
    PackedRecord record;
    KILN_ASSIGN_OR_RETURN(record.key.source_hash, table.u64(field + " source hash"));
    KILN_ASSIGN_OR_RETURN(record.key.layouts, table.str(field + " layouts", 1 << 16));
    KILN_ASSIGN_OR_RETURN(uint64_t offset, table.u64(field + " offset"));
    KILN_ASSIGN_OR_RETURN(uint64_t size, table.u64(field + " size"));
    if (offset % kAlignment != 0 || offset < end_of_previous || offset > data_size ||
        size > data_size - offset) {
      return R::bad(field + " extent",
                    "offset " + std::to_string(offset) + " size " + std::to_string(size),
                    "a 64-byte aligned range inside the data (" + std::to_string(data_size) +
                        " bytes) after the previous constant's end (" +
                        std::to_string(end_of_previous) + ")");
    }
    if (!keys.insert(record.key).second) {
      return R::bad(field + " key", "a duplicate of an earlier constant's", "unique keys");
    }
    end_of_previous = offset + size;
    record.bytes = {data + offset, size};
    view.packed.push_back(std::move(record));
  }
  if (table.at() != kHeaderSize + table_size) {
    return R::bad("table size", std::to_string(table_size),
                  std::to_string(table.at() - kHeaderSize) + ", the bytes its records take");
  }
  return view;
}

}  // namespace kiln::engine::artifact
