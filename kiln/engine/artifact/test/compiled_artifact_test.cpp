#include <kiln/engine/artifact/compiled_artifact.h>
#include <kiln/runtime/core/aligned_buffer.h>

#include <gtest/gtest.h>

#include <cstring>
#include <random>

namespace kiln::engine::artifact {
namespace {

using runtime::Error;

// Payload bytes copied to 64-byte aligned storage (as a mapping would give them).
struct Aligned {
  explicit Aligned(const std::vector<uint8_t>& bytes)
      : buffer(runtime::allocate_aligned(std::max<size_t>(bytes.size(), 1)).get()),
        size(bytes.size()) {
    if (!bytes.empty()) std::memcpy(buffer.get(), bytes.data(), bytes.size());
  }
  runtime::Span<const uint8_t> span() const { return {buffer.get(), size}; }
  runtime::AlignedBuffer buffer;
  size_t size;
};

struct Fixture {
  std::vector<FunctionRecord> functions{
      {"main", {{1, 3, 8, 8}}, 0x1234, 4096, 5},
      {"prefill_0_seq_16", {{1, 16}, {}}, 0xabcdef, 128, 2},
  };
  std::vector<uint8_t> a = std::vector<uint8_t>(100, 7), b = std::vector<uint8_t>(64, 9);
  std::vector<PackedRecord> packed{
      {{11, "layout-a"}, {a.data(), a.size()}},
      {{12, std::string("\0\1layout-b", 10)}, {b.data(), b.size()}},
  };
  std::vector<uint8_t> payload = write_artifact(functions, packed);
};

TEST(CompiledArtifact, RoundTripsFunctionsAndAlignedPackedBytes) {
  Fixture f;
  Aligned bytes(f.payload);
  auto view = read_artifact(bytes.span());
  ASSERT_TRUE(view.ok()) << view.status().message();
  EXPECT_EQ(view->functions, f.functions);
  ASSERT_EQ(view->packed.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(view->packed[i].key, f.packed[i].key);
    ASSERT_EQ(view->packed[i].bytes.size(), f.packed[i].bytes.size());
    EXPECT_EQ(reinterpret_cast<uintptr_t>(view->packed[i].bytes.data()) % 64, 0u);
    EXPECT_EQ(std::memcmp(view->packed[i].bytes.data(), f.packed[i].bytes.data(),
                          f.packed[i].bytes.size()),
              0);
  }
}

TEST(CompiledArtifact, EmptyArtifactRoundTrips) {
  Aligned bytes(write_artifact({}, {}));
  auto view = read_artifact(bytes.span());
  ASSERT_TRUE(view.ok()) << view.status().message();
  EXPECT_TRUE(view->functions.empty());
  EXPECT_TRUE(view->packed.empty());
}

void expect_rejected(const std::vector<uint8_t>& payload, const std::string& field) {
  Aligned bytes(payload);
  auto view = read_artifact(bytes.span());
  ASSERT_FALSE(view.ok()) << "expected rejection naming " << field;
  EXPECT_EQ(view.status().code(), Error::InvalidExternalData);
  EXPECT_NE(view.status().message().find(field), std::string::npos) << view.status().message();
}

std::vector<uint8_t> with_u32(std::vector<uint8_t> bytes, size_t at, uint32_t value) {
  std::memcpy(bytes.data() + at, &value, sizeof value);
  return bytes;
}
std::vector<uint8_t> with_u64(std::vector<uint8_t> bytes, size_t at, uint64_t value) {
  std::memcpy(bytes.data() + at, &value, sizeof value);
  return bytes;
}

TEST(CompiledArtifact, RejectsHeaderFieldsNamingThem) {
  Fixture f;
  auto bad_magic = f.payload;
  bad_magic[0] = 'X';
  expect_rejected(bad_magic, "magic");
  expect_rejected(with_u32(f.payload, 8, 2), "format version is 2 (expected 1)");
  expect_rejected(with_u32(f.payload, 20, 1), "reserved");
  auto reserved = f.payload;
  reserved[60] = 1;
  expect_rejected(reserved, "reserved");
  expect_rejected(with_u64(f.payload, 24, uint64_t{1} << 40), "table size");
  expect_rejected(with_u64(f.payload, 32, 128), "data offset");
  expect_rejected(with_u64(f.payload, 40, 1), "data size");
  expect_rejected(with_u32(f.payload, 12, 1000000), "count");
  expect_rejected(std::vector<uint8_t>(f.payload.begin(), f.payload.begin() + 10), "size");
}

TEST(CompiledArtifact, RejectsRecordFieldsNamingThem) {
  Fixture f;
  // Table offsets: function 0 starts at 64: name length (4) + "main" (4) + input count (4),
  // then input 0's rank at 76 and its first dim at 80.
  expect_rejected(with_u32(f.payload, 64, 1u << 30), "function 0 name length");
  expect_rejected(with_u32(f.payload, 76, 17), "function 0 input 0 rank is 17");
  expect_rejected(with_u64(f.payload, 80, static_cast<uint64_t>(-5)), "dim is -5");
  // Two packed constants with one key.
  Fixture dup;
  dup.packed[1].key = dup.packed[0].key;
  expect_rejected(write_artifact(dup.functions, dup.packed), "duplicate");
}

TEST(CompiledArtifact, RejectsPackedExtentsOutsideTheData) {
  Fixture f;
  // The last packed record's size is the table's last 8 bytes.
  uint64_t table_size;
  std::memcpy(&table_size, f.payload.data() + 24, 8);
  size_t last_size_at = 64 + table_size - 8;
  expect_rejected(with_u64(f.payload, last_size_at, 1u << 20), "packed constant 1 extent");
  expect_rejected(with_u64(f.payload, last_size_at - 8, 1), "packed constant 1 extent");
  expect_rejected(with_u64(f.payload, last_size_at - 8, 0), "packed constant 1 extent");
}

TEST(CompiledArtifact, NoTruncationOrBitFlipCrashesTheReader) {
  Fixture f;
  for (size_t length = 0; length < f.payload.size(); ++length) {
    Aligned bytes(std::vector<uint8_t>(f.payload.begin(), f.payload.begin() + length));
    EXPECT_FALSE(read_artifact(bytes.span()).ok()) << "length " << length;
  }
  std::mt19937 rng(7);
  uint64_t table_size;
  std::memcpy(&table_size, f.payload.data() + 24, 8);
  for (int i = 0; i < 2000; ++i) {
    auto bytes = f.payload;
    size_t at = rng() % (64 + table_size);  // header and table: data bytes are opaque
    bytes[at] ^= static_cast<uint8_t>(1u << (rng() % 8));
    Aligned aligned(bytes);
    auto view = read_artifact(aligned.span());  // must not crash; any result is checked
    if (view.ok()) {
      for (const auto& p : view->packed) {
        EXPECT_GE(p.bytes.data(), aligned.span().data());
        EXPECT_LE(p.bytes.data() + p.bytes.size(), aligned.span().data() + aligned.size);
      }
    }
  }
}

}  // namespace
}  // namespace kiln::engine::artifact
