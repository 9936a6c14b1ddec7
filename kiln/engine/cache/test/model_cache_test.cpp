#include <kiln/engine/cache/entry_format.h>
#include <kiln/engine/cache/model_cache.h>

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

namespace kiln::engine::cache {
namespace {

namespace fs = std::filesystem;
using runtime::Error;
using runtime::Span;

CacheKey make_key(uint64_t model_hash, const std::string& function = "main") {
  CacheKey key;
  key.model_hash = model_hash;
  key.functions = {function};
  key.input_shapes = {{{1, 64}}};
  key.specialization = "units=cpu+gpu+npu;prefer=none;reshapes=0";
  key.engine_version = "test-1";
  key.cpu_features = "x86_64:avx2,fma";
  return key;
}

std::vector<uint8_t> make_payload(size_t size, uint8_t seed) {
  std::vector<uint8_t> payload(size);
  for (size_t i = 0; i < size; ++i) payload[i] = static_cast<uint8_t>(seed + i * 7);
  return payload;
}

std::vector<uint8_t> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

void write_file(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

class ModelCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    static std::atomic<int> counter{0};
    dir_ = (fs::temp_directory_path() / ("kiln_cache_test_" + std::to_string(getpid()) + "_" +
                                         std::to_string(counter++)))
               .string();
    fs::remove_all(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::permissions(dir_, fs::perms::owner_all, ec);
    fs::remove_all(dir_, ec);
  }

  // Stores `payload` under `key` and returns the path of its entry file.
  std::string store(ModelCache& cache, const CacheKey& key, const std::vector<uint8_t>& payload) {
    EXPECT_TRUE(cache.store(key, payload, key.model_hash).ok());
    auto found = cache.lookup(key);
    EXPECT_TRUE(found.ok() && found->has_value());
    return found.ok() && found->has_value() ? (*found)->path() : std::string();
  }

  std::string dir_;
};

TEST(CacheKeyTest, EveryFieldChangesTheKey) {
  const CacheKey base = make_key(1);
  std::set<std::string> hexes = {base.hex()};
  CacheKey key = base;
  key.model_hash = 2;
  hexes.insert(key.hex());
  key = base;
  key.functions = {"other"};
  hexes.insert(key.hex());
  key = base;
  key.input_shapes = {{{1, 65}}};
  hexes.insert(key.hex());
  key = base;
  key.input_shapes = {};
  hexes.insert(key.hex());
  key = base;
  key.specialization = "units=cpu;prefer=none;reshapes=0";
  hexes.insert(key.hex());
  key = base;
  key.engine_version = "test-2";
  hexes.insert(key.hex());
  key = base;
  key.cpu_features = "x86_64:avx2";
  hexes.insert(key.hex());
  EXPECT_EQ(hexes.size(), 8u);
  EXPECT_EQ(base.hex().size(), 16u);
  EXPECT_EQ(base.hex(), make_key(1).hex());
}

TEST(CacheKeyTest, FieldsNeverCollideByConcatenation) {
  CacheKey a = make_key(1);
  CacheKey b = make_key(1);
  a.functions = {"ab", "c"};
  b.functions = {"a", "bc"};
  EXPECT_NE(a.encoded(), b.encoded());
  EXPECT_NE(a.hex(), b.hex());
  // One function with two inputs vs two functions with one input each.
  a = make_key(1);
  b = make_key(1);
  a.input_shapes = {{{1, 2}, {3}}};
  b.input_shapes = {{{1, 2}}, {{3}}};
  EXPECT_NE(a.hex(), b.hex());
  a = make_key(1);
  b = make_key(1);
  a.specialization = "xy";
  a.engine_version = "";
  b.specialization = "x";
  b.engine_version = "y";
  EXPECT_NE(a.hex(), b.hex());
}

// Keys name entries on disk across releases: the encoding and the hash are pinned.
TEST(CacheKeyTest, HexIsStable) {
  EXPECT_EQ(to_hex(0x0123456789abcdefULL), "0123456789abcdef");
  EXPECT_EQ(to_hex(checksum64("", 0)), "2d06800538d394c2");  // XXH3-64 of nothing, seed 0
  EXPECT_EQ(make_key(1).hex(), "675fa9eb39a1825b");
}

TEST_F(ModelCacheTest, StoreThenLookupMapsTheSameBytes) {
  ModelCache cache(dir_);
  const CacheKey key = make_key(7);
  const std::vector<uint8_t> payload = make_payload(1000, 3);
  ASSERT_TRUE(cache.store(key, payload, 7).ok());
  auto found = cache.lookup(key);
  ASSERT_TRUE(found.ok()) << found.status();
  ASSERT_TRUE(found->has_value());
  const MappedEntry& entry = **found;
  EXPECT_EQ(std::vector<uint8_t>(entry.payload().begin(), entry.payload().end()), payload);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(entry.payload().data()) % kEntryAlignment, 0u);
  EXPECT_EQ(entry.model_hash(), 7u);
  EXPECT_EQ(fs::path(entry.path()).parent_path(), fs::path(dir_) / "v1");

  auto other = cache.lookup(make_key(7, "other"));
  ASSERT_TRUE(other.ok());
  EXPECT_FALSE(other->has_value());
  const CacheStats stats = cache.stats();
  EXPECT_EQ(stats.stores, 1u);
  EXPECT_EQ(stats.hits, 1u);
  EXPECT_EQ(stats.misses, 1u);
  EXPECT_TRUE(cache.warnings().empty());

  // Another object on the same directory (as another process would) sees the entry.
  ModelCache second(dir_);
  auto again = second.lookup(key);
  ASSERT_TRUE(again.ok() && again->has_value());
  EXPECT_EQ((*again)->payload().size(), payload.size());
}

TEST_F(ModelCacheTest, EmptyPayloadRoundTrips) {
  ModelCache cache(dir_);
  ASSERT_TRUE(cache.store(make_key(1), Span<const uint8_t>(), 1).ok());
  auto found = cache.lookup(make_key(1));
  ASSERT_TRUE(found.ok() && found->has_value());
  EXPECT_TRUE((*found)->payload().empty());
}

TEST_F(ModelCacheTest, MappedEntryOutlivesItsFile) {
  ModelCache cache(dir_);
  const std::vector<uint8_t> payload = make_payload(5000, 9);
  ASSERT_TRUE(cache.store(make_key(1), payload, 1).ok());
  auto found = cache.lookup(make_key(1));
  ASSERT_TRUE(found.ok() && found->has_value());
  ASSERT_TRUE(cache.purge().ok());
  ASSERT_TRUE(cache.store(make_key(1), make_payload(5000, 10), 1).ok());  // replaced on disk
  EXPECT_EQ(std::vector<uint8_t>((*found)->payload().begin(), (*found)->payload().end()),
            payload);
}

// Each corruption: the lookup misses, the file is removed and a warning names the entry;
// storing again counts a rebuild and hits afterwards.
void expect_corrupt_entry_is_a_miss(ModelCache& cache, const CacheKey& key,
                                    const std::string& path, uint64_t expected_corrupt) {
  auto found = cache.lookup(key);
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_FALSE(found->has_value());
  EXPECT_FALSE(fs::exists(path));
  EXPECT_EQ(cache.stats().corrupt_entries, expected_corrupt);
  ASSERT_FALSE(cache.warnings().empty());
  EXPECT_NE(cache.warnings().back().find(path), std::string::npos) << cache.warnings().back();
  const uint64_t rebuilds = cache.stats().rebuilds;
  ASSERT_TRUE(cache.store(key, make_payload(300, 1), key.model_hash).ok());
  EXPECT_EQ(cache.stats().rebuilds, rebuilds + 1);
  auto again = cache.lookup(key);
  ASSERT_TRUE(again.ok() && again->has_value());
}

TEST_F(ModelCacheTest, CorruptEntriesAreMissesAndRemoved) {
  ModelCache cache(dir_);
  const CacheKey key = make_key(5);
  const std::string path = store(cache, key, make_payload(300, 1));
  ASSERT_FALSE(path.empty());
  const std::vector<uint8_t> good = read_file(path);
  uint64_t corrupt = 0;

  struct Damage {
    const char* what;
    std::vector<uint8_t> bytes;
  };
  std::vector<Damage> damages;
  std::vector<uint8_t> bytes = good;
  bytes.back() ^= 0x01;
  damages.push_back({"payload byte flipped", bytes});
  bytes = good;
  bytes[0] ^= 0x20;
  damages.push_back({"magic byte flipped", bytes});
  bytes = good;
  bytes[40] ^= 0x01;  // payload size
  damages.push_back({"payload size changed", bytes});
  bytes = good;
  bytes[kEntryHeaderSize + 3] ^= 0x01;  // inside the stored key
  damages.push_back({"key byte flipped", bytes});
  damages.push_back({"truncated", std::vector<uint8_t>(good.begin(), good.end() - 10)});
  damages.push_back({"truncated header", std::vector<uint8_t>(good.begin(), good.begin() + 20)});
  damages.push_back({"empty", {}});
  damages.push_back({"garbage", make_payload(good.size(), 77)});
  bytes = good;
  bytes.push_back(0);
  damages.push_back({"trailing byte", bytes});

  for (const Damage& damage : damages) {
    SCOPED_TRACE(damage.what);
    write_file(path, damage.bytes);
    expect_corrupt_entry_is_a_miss(cache, key, path, ++corrupt);
  }
}

TEST_F(ModelCacheTest, AnEntryOfAnotherKeyIsNotTrusted) {
  ModelCache cache(dir_);
  const std::string path_a = store(cache, make_key(5, "a"), make_payload(100, 1));
  const std::string path_b = store(cache, make_key(5, "b"), make_payload(100, 2));
  fs::copy_file(path_a, path_b, fs::copy_options::overwrite_existing);
  expect_corrupt_entry_is_a_miss(cache, make_key(5, "b"), path_b, 1);
}

TEST_F(ModelCacheTest, BudgetEvictsLeastRecentlyUsed) {
  const std::vector<uint8_t> payload = make_payload(1000, 4);
  uint64_t entry_size = 0;
  {
    ModelCache probe(dir_ + "/probe");
    entry_size = fs::file_size(store(probe, make_key(1, "a"), payload));
  }
  ModelCache cache(dir_, CacheOptions{3 * entry_size + entry_size / 2});
  store(cache, make_key(1, "a"), payload);
  store(cache, make_key(1, "b"), payload);
  store(cache, make_key(1, "c"), payload);
  ASSERT_TRUE(cache.lookup(make_key(1, "a"))->has_value());  // a is now the most recent
  ASSERT_TRUE(cache.store(make_key(1, "d"), payload, 1).ok());
  EXPECT_EQ(cache.stats().evictions, 1u);
  EXPECT_FALSE(cache.lookup(make_key(1, "b"))->has_value());
  for (const char* kept : {"a", "c", "d"}) {
    EXPECT_TRUE(cache.lookup(make_key(1, kept))->has_value()) << kept;
  }
  // Uses of d, a, c in that order: storing e evicts d, then f evicts a.
  ASSERT_TRUE(cache.lookup(make_key(1, "a"))->has_value());
  ASSERT_TRUE(cache.lookup(make_key(1, "c"))->has_value());
  ASSERT_TRUE(cache.store(make_key(1, "e"), payload, 1).ok());
  EXPECT_FALSE(cache.lookup(make_key(1, "d"))->has_value());
  ASSERT_TRUE(cache.store(make_key(1, "f"), payload, 1).ok());
  EXPECT_FALSE(cache.lookup(make_key(1, "a"))->has_value());
  auto listed = cache.list();
  ASSERT_TRUE(listed.ok());
  EXPECT_EQ(listed->size(), 3u);
  EXPECT_EQ(cache.stats().evictions, 3u);
}

TEST_F(ModelCacheTest, EntryLargerThanTheBudgetIsNotStored) {
  ModelCache cache(dir_, CacheOptions{512});
  ASSERT_TRUE(cache.store(make_key(1), make_payload(1000, 1), 1).ok());
  EXPECT_FALSE(cache.lookup(make_key(1))->has_value());
  EXPECT_EQ(cache.stats().failed_stores, 1u);
  ASSERT_EQ(cache.warnings().size(), 1u);
  EXPECT_NE(cache.warnings()[0].find("budget 512"), std::string::npos) << cache.warnings()[0];
}

TEST_F(ModelCacheTest, EvictRemovesOnlyThatModelsEntries) {
  ModelCache cache(dir_);
  store(cache, make_key(1, "a"), make_payload(10, 1));
  store(cache, make_key(1, "b"), make_payload(10, 2));
  store(cache, make_key(2, "a"), make_payload(10, 3));
  auto removed = cache.evict(1);
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_EQ(*removed, 2u);
  EXPECT_EQ(cache.stats().evictions, 2u);
  EXPECT_FALSE(cache.lookup(make_key(1, "a"))->has_value());
  EXPECT_TRUE(cache.lookup(make_key(2, "a"))->has_value());
  EXPECT_EQ(*cache.evict(99), 0u);
}

TEST_F(ModelCacheTest, PurgeRemovesEverythingIncludingTemporaries) {
  ModelCache cache(dir_);
  store(cache, make_key(1, "a"), make_payload(10, 1));
  store(cache, make_key(2, "a"), make_payload(10, 2));
  write_file(dir_ + "/v1/.tmp-leftover", make_payload(10, 3));
  write_file(dir_ + "/v1/unrelated.txt", make_payload(10, 3));
  auto removed = cache.purge();
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_EQ(*removed, 2u);
  EXPECT_TRUE(cache.list()->empty());
  EXPECT_FALSE(fs::exists(dir_ + "/v1/.tmp-leftover"));
  EXPECT_TRUE(fs::exists(dir_ + "/v1/unrelated.txt"));  // not ours: left alone
  EXPECT_EQ(*ModelCache(dir_ + "/never-created").purge(), 0u);
}

TEST_F(ModelCacheTest, ListsEntriesMostRecentFirst) {
  ModelCache cache(dir_);
  EXPECT_TRUE(cache.list()->empty());  // no directory yet
  const std::string path_a = store(cache, make_key(1, "a"), make_payload(10, 1));
  const std::string path_b = store(cache, make_key(2, "b"), make_payload(2000, 2));
  ASSERT_TRUE(cache.lookup(make_key(1, "a"))->has_value());
  auto listed = cache.list();
  ASSERT_TRUE(listed.ok()) << listed.status();
  ASSERT_EQ(listed->size(), 2u);
  const CacheEntryInfo& first = (*listed)[0];
  const CacheEntryInfo& second = (*listed)[1];
  EXPECT_EQ(first.key, make_key(1, "a").hex());
  EXPECT_EQ(first.model_hash, 1u);
  EXPECT_EQ(first.path, path_a);
  EXPECT_EQ(first.size_bytes, fs::file_size(path_a));
  EXPECT_EQ(second.key, make_key(2, "b").hex());
  EXPECT_EQ(second.model_hash, 2u);
  EXPECT_EQ(second.size_bytes, fs::file_size(path_b));
  EXPECT_GT(first.last_use, second.last_use);
  const auto age = std::chrono::system_clock::now() - first.last_use;
  EXPECT_LT(std::chrono::abs(age), std::chrono::minutes(5));
}

void expect_store_fails_softly(const std::string& dir) {
  ModelCache cache(dir);
  const runtime::Status status = cache.store(make_key(1), make_payload(100, 1), 1);
  EXPECT_TRUE(status.ok()) << status;
  EXPECT_EQ(cache.stats().failed_stores, 1u);
  EXPECT_EQ(cache.stats().stores, 0u);
  ASSERT_EQ(cache.warnings().size(), 1u);
  EXPECT_NE(cache.warnings()[0].find(make_key(1).hex()), std::string::npos)
      << cache.warnings()[0];
  EXPECT_NE(cache.warnings()[0].find("not stored"), std::string::npos) << cache.warnings()[0];
  auto found = cache.lookup(make_key(1));
  ASSERT_TRUE(found.ok());
  EXPECT_FALSE(found->has_value());
}

TEST_F(ModelCacheTest, DirectoryUnderAFileStoresNothingButSucceeds) {
  fs::create_directories(dir_);
  write_file(dir_ + "/file", {1, 2, 3});
  expect_store_fails_softly(dir_ + "/file/sub");  // ENOTDIR, even for root
}

TEST_F(ModelCacheTest, ReadOnlyDirectoryStoresNothingButSucceeds) {
  fs::create_directories(dir_ + "/v1");
  ASSERT_EQ(chmod((dir_ + "/v1").c_str(), 0500), 0);
  // Root (and CAP_DAC_OVERRIDE) writes through permissions; the case above covers it.
  const std::string probe = dir_ + "/v1/probe";
  if (FILE* file = fopen(probe.c_str(), "w")) {
    fclose(file);
    GTEST_SKIP() << "permissions do not stop writes for this user";
  }
  expect_store_fails_softly(dir_);
}

TEST_F(ModelCacheTest, EmptyDirectoryDisablesTheCache) {
  ModelCache cache("");
  EXPECT_TRUE(cache.store(make_key(1), make_payload(10, 1), 1).ok());
  EXPECT_FALSE(cache.lookup(make_key(1))->has_value());
  EXPECT_TRUE(cache.list()->empty());
  EXPECT_TRUE(cache.warnings().empty());
}

TEST_F(ModelCacheTest, StoreRejectsAModelHashOtherThanTheKeys) {
  ModelCache cache(dir_);
  const runtime::Status status = cache.store(make_key(1), make_payload(10, 1), 2);
  EXPECT_EQ(status.code(), Error::InvalidArgument);
  EXPECT_NE(status.message().find("model hash"), std::string::npos) << status;
}

// Threads store and look up one shared key and a key of their own. Every hit must be a
// whole entry written by some thread; nothing is ever half-written.
TEST_F(ModelCacheTest, ConcurrentStoresAndLookupsNeverSeeHalfEntries) {
  ModelCache cache(dir_);
  constexpr int kThreads = 6;
  constexpr int kRounds = 30;
  constexpr size_t kSize = 64 * 1024;
  std::atomic<int> bad{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      const CacheKey shared = make_key(1, "shared");
      const CacheKey own = make_key(2, "own" + std::to_string(t));
      const std::vector<uint8_t> payload(kSize, static_cast<uint8_t>(t));
      for (int round = 0; round < kRounds; ++round) {
        for (const CacheKey* key : {&shared, &own}) {
          if (!cache.store(*key, payload, key->model_hash).ok()) ++bad;
          auto found = cache.lookup(*key);
          if (!found.ok()) {
            ++bad;
            continue;
          }
          if (!found->has_value()) {
            if (key == &own) ++bad;  // only this thread writes it
            continue;
          }
          const Span<const uint8_t> bytes = (*found)->payload();
          if (bytes.size() != kSize) ++bad;
          const uint8_t first = bytes.empty() ? 0 : bytes[0];
          if (key == &own && first != t) ++bad;
          for (uint8_t byte : bytes) {
            if (byte != first) {
              ++bad;
              break;
            }
          }
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(bad.load(), 0);
  const CacheStats stats = cache.stats();
  EXPECT_EQ(stats.stores, uint64_t{kThreads} * kRounds * 2);
  EXPECT_EQ(stats.hits + stats.misses, uint64_t{kThreads} * kRounds * 2);
  EXPECT_EQ(stats.corrupt_entries, 0u);
  EXPECT_EQ(cache.list()->size(), size_t{kThreads} + 1);  // no temporaries left behind
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_ + "/v1"), fs::directory_iterator()),
            kThreads + 1);
}

}  // namespace
}  // namespace kiln::engine::cache
