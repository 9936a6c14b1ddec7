#include <kiln/runtime/core/bulk_pool.h>

#include <gmock/gmock.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <utility>
#include <vector>

namespace kiln::runtime {
namespace {

TEST(BulkPool, AllocationsAreAlignedDisjointAndKeepTheirBytes) {
  BulkPool pool;
  std::mt19937 rng(7);
  std::uniform_int_distribution<size_t> small(1, 300000);
  std::vector<std::pair<uint8_t*, size_t>> blocks;
  // Mostly small requests, some larger than a chunk.
  for (int i = 0; i < 120; ++i) {
    size_t size = i % 40 == 39 ? BulkPool::kChunkBytes + 4096 * static_cast<size_t>(i) : small(rng);
    auto data = pool.allocate(size);
    ASSERT_TRUE(data.ok()) << data.status().to_string();
    EXPECT_EQ(reinterpret_cast<uintptr_t>(*data) % BulkPool::kAlignment, 0u);
    std::memset(*data, i & 0xff, size);
    blocks.emplace_back(*data, size);
  }
  for (size_t i = 0; i < blocks.size(); ++i) {
    auto [data, size] = blocks[i];
    for (size_t at : {size_t{0}, size / 2, size - 1}) {
      ASSERT_EQ(data[at], static_cast<uint8_t>(i & 0xff)) << "block " << i << " byte " << at;
    }
    for (size_t j = i + 1; j < blocks.size(); ++j) {
      auto [other, other_size] = blocks[j];
      EXPECT_TRUE(data + size <= other || other + other_size <= data)
          << "blocks " << i << " and " << j << " overlap";
    }
  }
  // Small requests share chunks: far fewer chunks than requests.
  EXPECT_LT(pool.reserved_bytes(), 12 * BulkPool::kChunkBytes);
}

// Bulk buffers: 64-byte aligned below kBulkPagesFrom, page-aligned from there; zero gives none.
TEST(AllocateBulk, AlignsSmallBuffersTo64BytesAndLargeOnesToPages) {
  for (size_t size : {size_t{1}, size_t{1000}, kBulkPagesFrom - 1, kBulkPagesFrom,
                      kBulkPagesFrom + 1, size_t{3} << 20}) {
    auto buffer = allocate_bulk(size);
    ASSERT_TRUE(buffer.ok()) << size;
    const auto address = reinterpret_cast<uintptr_t>(buffer->get());
    EXPECT_EQ(address % (size >= kBulkPagesFrom ? kBulkPageBytes : 64), 0u) << size;
    std::memset(buffer->get(), 0x11, size);  // every byte asked for is ours
  }
  auto none = allocate_bulk(0);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->get(), nullptr);
  auto too_large = allocate_bulk(~size_t{0} - 10);
  ASSERT_FALSE(too_large.ok());
  EXPECT_EQ(too_large.status().code(), Error::MemoryAllocationFailed);
  EXPECT_THAT(too_large.status().message(), ::testing::HasSubstr(std::to_string(~size_t{0} - 10)));
}

// Allocations are prefaulted as they are carved, over whole pages that may hold
// the previous allocation's last bytes: written bytes stay as they were.
TEST(BulkPool, PrefaultingForWriteKeepsWrittenBytes) {
  auto buffer = allocate_bulk(size_t{1} << 20);
  ASSERT_TRUE(buffer.ok());
  uint8_t* data = buffer->get();
  for (size_t i = 0; i < 300000; ++i) data[i] = static_cast<uint8_t>(i * 7 + 1);
  prefault_for_write(data + 299999, 5000);  // from inside a written page
  prefault_for_write(data, size_t{1} << 20);
  prefault_for_write(nullptr, 100);
  prefault_for_write(data, 0);
  for (size_t i = 0; i < 300000; ++i) {
    ASSERT_EQ(data[i], static_cast<uint8_t>(i * 7 + 1)) << "byte " << i;
  }
  std::memset(data + 300000, 0x5a, (size_t{1} << 20) - 300000);
  EXPECT_EQ(data[(size_t{1} << 20) - 1], 0x5a);
}

TEST(BulkPool, ALargeRequestKeepsTheOpenChunkForLaterSmallOnes) {
  BulkPool pool;
  const size_t first_size = BulkPool::kChunkBytes / 2 + 64;
  auto first = pool.allocate(first_size);
  ASSERT_TRUE(first.ok());
  auto large = pool.allocate(BulkPool::kChunkBytes * 3 / 4);  // does not fit the first chunk
  ASSERT_TRUE(large.ok());
  auto next = pool.allocate(1000);
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(*next, *first + first_size) << "the small request continues the first chunk";
  EXPECT_LT(pool.reserved_bytes(), 2 * BulkPool::kChunkBytes);
}

TEST(BulkPool, ChunksGrowFromSmallToLarge) {
  BulkPool pool;
  // A small model's weights: one first chunk, in 4 KiB pages.
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(pool.allocate(10000).ok());
  EXPECT_EQ(pool.reserved_bytes(), BulkPool::kFirstChunkBytes);
  // Then each chunk as large as all before it, up to kChunkBytes.
  size_t reserved = pool.reserved_bytes();
  for (int i = 0; i < 400; ++i) {
    ASSERT_TRUE(pool.allocate(100000).ok());
    size_t grown = pool.reserved_bytes() - reserved;
    if (grown > 0) {
      EXPECT_EQ(grown, std::min(BulkPool::kChunkBytes, reserved)) << "after " << reserved;
      reserved = pool.reserved_bytes();
    }
  }
  EXPECT_GT(reserved, 4 * BulkPool::kChunkBytes);
}

TEST(BulkPool, TheLastAllocationCanBeGivenBack) {
  BulkPool pool;
  auto a = pool.allocate(100);
  auto b = pool.allocate(5000);
  ASSERT_TRUE(a.ok() && b.ok());
  pool.release_last(*b, 5000);
  auto c = pool.allocate(64);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(*c, *b);
  // Giving back anything but the last allocation keeps it.
  pool.release_last(*a, 100);
  auto d = pool.allocate(64);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(*d, *c + 64);
}

TEST(BulkPool, ImpossibleSizesAreErrorsNamingTheSize) {
  BulkPool pool;
  auto none = pool.allocate(0);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), Error::MemoryAllocationFailed);
  EXPECT_NE(none.status().message().find("0 bytes"), std::string::npos);
  auto huge = pool.allocate(SIZE_MAX - 5);
  ASSERT_FALSE(huge.ok());
  EXPECT_NE(huge.status().message().find(std::to_string(SIZE_MAX - 5)), std::string::npos);
}

}  // namespace
}  // namespace kiln::runtime
