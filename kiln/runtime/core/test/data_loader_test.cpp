#include <kiln/runtime/core/data_loader.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

namespace kiln::runtime {
namespace {

class DataLoaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = (std::filesystem::temp_directory_path() /
             ("kiln_loader_" + std::to_string(::getpid()) + ".bin"))
                .string();
    std::ofstream out(path_, std::ios::binary);
    for (int i = 0; i < 100; ++i) out.put(static_cast<char>(i));
  }
  void TearDown() override { std::remove(path_.c_str()); }
  std::string path_;
};

void expect_reads(const DataLoader& loader) {
  EXPECT_EQ(loader.size(), 100u);
  auto buffer = loader.load(10, 5);
  ASSERT_TRUE(buffer.ok()) << buffer.status();
  const auto* bytes = static_cast<const uint8_t*>(buffer->data());
  EXPECT_EQ(buffer->size(), 5u);
  EXPECT_EQ(bytes[0], 10);
  EXPECT_EQ(bytes[4], 14);
  auto past = loader.load(98, 3);
  EXPECT_EQ(past.error(), Error::InvalidArgument);
  EXPECT_NE(past.status().message().find("offset 98"), std::string::npos);
  EXPECT_EQ(loader.load(SIZE_MAX, 2).error(), Error::InvalidArgument);  // no overflow
}

TEST_F(DataLoaderTest, FileLoaderReadsAlignedCopies) {
  auto loader = FileDataLoader::open(path_, 256);
  ASSERT_TRUE(loader.ok()) << loader.status();
  expect_reads(**loader);
  auto buffer = (*loader)->load(1, 3);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(buffer->data()) % 256, 0u);
}

TEST_F(DataLoaderTest, MmapLoaderServesViewsThatOutliveIt) {
  FreeableBuffer kept;
  {
    auto loader = MmapDataLoader::open(path_);
    ASSERT_TRUE(loader.ok()) << loader.status();
    expect_reads(**loader);
    kept = std::move((*loader)->load(50, 10).get());
  }
  EXPECT_EQ(static_cast<const uint8_t*>(kept.data())[0], 50);  // mapping kept alive
}

TEST_F(DataLoaderTest, BufferLoaderServesMemory) {
  std::vector<uint8_t> bytes(100);
  for (int i = 0; i < 100; ++i) bytes[i] = static_cast<uint8_t>(i);
  BufferDataLoader loader(bytes.data(), bytes.size());
  expect_reads(loader);
}

TEST(DataLoader, MissingFileNamesThePath) {
  auto loader = MmapDataLoader::open("/nonexistent/model.kiln");
  EXPECT_EQ(loader.error(), Error::AccessFailed);
  EXPECT_NE(loader.status().message().find("/nonexistent/model.kiln"), std::string::npos);
  auto dir = FileDataLoader::open(std::filesystem::temp_directory_path().string());
  EXPECT_EQ(dir.error(), Error::AccessFailed);
  EXPECT_NE(dir.status().message().find("not a regular file"), std::string::npos);
}

}  // namespace
}  // namespace kiln::runtime
