// Installing whole entry files (ahead-of-time compiled artifacts): encode_entry, store_entry,
// contains.
#include <kiln/engine/cache/entry_format.h>
#include <kiln/engine/cache/model_cache.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace kiln::engine::cache {
namespace {

namespace fs = std::filesystem;
using runtime::Error;
using runtime::Span;
using ::testing::HasSubstr;

CacheKey make_key(uint64_t model_hash, const std::string& cpu_features = "x86_64:avx2,fma") {
  CacheKey key;
  key.model_hash = model_hash;
  key.functions = {"main"};
  key.input_shapes = {{{1, 64}}};
  key.specialization = "units=cpu+gpu+npu;prefer=none;reshapes=0";
  key.engine_version = "test-1";
  key.cpu_features = cpu_features;
  return key;
}

std::vector<uint8_t> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

class StoreEntryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (fs::temp_directory_path() /
            ("kiln_store_entry_test_" + std::to_string(getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name()))
               .string();
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string dir_;
};

const std::vector<uint8_t> kHead = {1, 2, 3, 4, 5};
const std::vector<uint8_t> kTail = {6, 7, 8};

TEST_F(StoreEntryTest, EncodeEntryGivesTheFileStoreWrites) {
  const CacheKey key = make_key(42);
  const std::vector<Span<const uint8_t>> pieces = {kHead, kTail};
  ModelCache cache(dir_);
  ASSERT_TRUE(cache.store(key, pieces, key.model_hash).ok());
  auto found = cache.lookup(key);
  ASSERT_TRUE(found.ok() && found->has_value());
  EXPECT_EQ(read_file((*found)->path()), encode_entry(key, pieces));
}

TEST_F(StoreEntryTest, StoreEntryInstallsAValidEntryForLookup) {
  const CacheKey key = make_key(42);
  const std::vector<uint8_t> file = encode_entry(key, {kHead, kTail});
  ModelCache cache(dir_);
  EXPECT_FALSE(cache.contains(key));
  ASSERT_TRUE(cache.store_entry(key, file).ok());
  EXPECT_TRUE(cache.contains(key));
  EXPECT_EQ(cache.stats().stores, 1u);
  auto found = cache.lookup(key);
  ASSERT_TRUE(found.ok() && found->has_value());
  std::vector<uint8_t> payload((*found)->payload().begin(), (*found)->payload().end());
  std::vector<uint8_t> expected = kHead;
  expected.insert(expected.end(), kTail.begin(), kTail.end());
  EXPECT_EQ(payload, expected);
  EXPECT_EQ(read_file((*found)->path()), file);
}

TEST_F(StoreEntryTest, AnEntryOfAnotherKeyIsRejected) {
  const std::vector<uint8_t> file = encode_entry(make_key(42, "x86_64:avx512f"), {kHead});
  ModelCache cache(dir_);
  const CacheKey key = make_key(42);
  auto status = cache.store_entry(key, file);
  EXPECT_EQ(status.code(), Error::InvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("store cache entry '" + key.hex() + "'"));
  EXPECT_THAT(status.message(), HasSubstr("entry holds a different key"));
  EXPECT_FALSE(cache.contains(key));
  EXPECT_EQ(cache.stats().stores, 0u);
}

TEST_F(StoreEntryTest, CorruptOrTruncatedBytesAreRejected) {
  const CacheKey key = make_key(42);
  const std::vector<uint8_t> file = encode_entry(key, {kHead, kTail});
  ModelCache cache(dir_);
  std::vector<uint8_t> flipped = file;
  flipped.back() ^= 0x40;
  auto status = cache.store_entry(key, flipped);
  EXPECT_EQ(status.code(), Error::InvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("payload checksum mismatch"));
  std::vector<uint8_t> truncated(file.begin(), file.end() - 1);
  status = cache.store_entry(key, truncated);
  EXPECT_EQ(status.code(), Error::InvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("not its entry"));
  status = cache.store_entry(key, Span<const uint8_t>());
  EXPECT_EQ(status.code(), Error::InvalidArgument);
  EXPECT_FALSE(cache.contains(key));
}

TEST_F(StoreEntryTest, EmptyDirectoryValidatesButStoresNothing) {
  const CacheKey key = make_key(42);
  ModelCache cache("");
  EXPECT_TRUE(cache.store_entry(key, encode_entry(key, {kHead})).ok());
  EXPECT_FALSE(cache.contains(key));
  EXPECT_EQ(cache.store_entry(key, kHead).code(), Error::InvalidArgument);
}

}  // namespace
}  // namespace kiln::engine::cache
