// Program loading: valid programs load through every loader; truncated, garbage and
// bit-flipped files give a valid program or InvalidProgram, never a crash (run under asan).
#include <kiln/runtime/executor/method.h>
#include <kiln/runtime/executor/test/test_kernels.h>
#include <kiln/runtime/executor/test/test_util.h>
#include <kiln/testing/stub_backend.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>

// Under AddressSanitizer, a corrupt arena size must fail the allocation, not abort the test.
extern "C" const char* __asan_default_options() { return "allocator_may_return_null=1"; }

namespace kiln::runtime {
namespace {

using testing::F32;
using testing::ProgramBuilder;

ProgramBuilder rich_program() {
  return ProgramBuilder()
      .named_data("package", std::vector<uint8_t>(100, 7))
      .method("forward")
      .input("x", F32, {2, 3}, ShapeDynamism::Bounded, {"batch", ""})
      .constant_f32("w", {2, 3}, {1, 2, 3, 4, 5, 6})
      .node("TestScale", {"x", "w"}, {"y"}, {{"scale", 0.5}, {"note", EValue("text")}})
      .delegate("StubFuzz", {'m'}, {"y"}, {"z"})
      .output("z")
      .method("second")
      .input("a", F32, {4})
      .node("TestRepeat", {"a"}, {"b"}, {{"times", int64_t{1}}})
      .output("b");
}

class ProgramTest : public ::testing::Test {
 protected:
  void SetUp() override {
    test::register_test_kernels();
    stub_ = testing::StubBackend::install("StubFuzz");
  }
  std::unique_ptr<testing::StubBackend::Installed> stub_;
};

TEST_F(ProgramTest, LoadsFromFileAndMmapAndMemory) {
  auto bytes = rich_program().build();
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  std::string path = (std::filesystem::temp_directory_path() /
                      ("kiln_program_" + std::to_string(::getpid()) + ".kiln"))
                         .string();
  ASSERT_TRUE(rich_program().build_to_file(path).ok());
  std::vector<std::shared_ptr<DataLoader>> loaders;
  loaders.push_back(std::move(FileDataLoader::open(path).get()));
  loaders.push_back(std::move(MmapDataLoader::open(path).get()));
  loaders.push_back(std::make_shared<BufferDataLoader>(bytes->data(), bytes->size()));
  for (auto& loader : loaders) {
    auto program = Program::load(loader);
    ASSERT_TRUE(program.ok()) << program.status();
    EXPECT_EQ((*program)->method_names(), (std::vector<std::string>{"forward", "second"}));
    EXPECT_EQ((*program)->named_data().keys(), std::vector<std::string>{"package"});
    auto method = (*program)->load_method("forward");
    ASSERT_TRUE(method.ok()) << method.status();
    std::vector<float> x = {2, 2, 2, 2, 2, 2};
    ASSERT_TRUE(
        (*method)->set_input(0, EValue(Tensor(ScalarType::Float32, {2, 3}, x.data()))).ok());
    ASSERT_TRUE((*method)->execute().ok());
    EXPECT_EQ((*method)->get_output(0).to_tensor().data_ptr<float>()[5], 7.0f);
  }
  std::remove(path.c_str());
}

TEST_F(ProgramTest, SegmentsAreAlignedForMmap) {
  auto bytes = std::move(rich_program().build().get());
  auto program = std::move(test::load_bytes(bytes).get());
  for (size_t i = 0; i < program->num_segments(); ++i) {
    auto segment = program->segment(i);
    ASSERT_TRUE(segment.ok());
    auto offset = static_cast<const uint8_t*>((*segment)->data()) -
                  static_cast<const uint8_t*>(program->segment(0).get()->data());
    EXPECT_EQ(offset % 4096, 0) << "segment " << i;
  }
  EXPECT_EQ(program->segment(99).error(), Error::InvalidArgument);
}

TEST_F(ProgramTest, RejectsWrongMagicAndVersionWithReasons) {
  auto bytes = std::move(rich_program().build().get());
  auto bad_magic = bytes;
  bad_magic[0] = 'X';
  auto result = test::load_bytes(bad_magic);
  EXPECT_EQ(result.error(), Error::InvalidProgram);
  EXPECT_NE(result.status().message().find("magic 'KILN'"), std::string::npos);
  auto bad_version = bytes;
  bad_version[8] = 9;
  result = test::load_bytes(bad_version);
  EXPECT_EQ(result.error(), Error::InvalidProgram);
  EXPECT_NE(result.status().message().find("format version 9 (expected 1"), std::string::npos);
  result = test::load_bytes({});
  EXPECT_EQ(result.error(), Error::InvalidProgram);
  EXPECT_NE(result.status().message().find("0 bytes"), std::string::npos);
}

// Loads whatever Program::load accepts all the way to execution; nothing may crash.
void exercise(const std::vector<uint8_t>& bytes) {
  auto program = test::load_bytes(bytes);
  if (!program.ok()) {
    EXPECT_EQ(program.error(), Error::InvalidProgram) << program.status();
    EXPECT_FALSE(program.status().message().empty());
    return;
  }
  for (const auto& name : (*program)->method_names()) {
    auto meta = (*program)->method_meta(name);
    ASSERT_TRUE(meta.ok());
    if (meta->planned_bytes() > (64u << 20)) continue;
    auto method = (*program)->load_method(name);
    if (!method.ok()) continue;
    for (size_t i = 0; i < meta->num_inputs(); ++i) {
      const auto& input = meta->inputs[i];
      if (input.tag != Tag::Tensor) continue;
      auto numel = checked_numel(input.sizes);
      if (!numel.ok() || *numel > (1 << 20)) continue;
      std::vector<uint8_t> zeros(static_cast<size_t>(*numel) * element_size(input.dtype) + 8);
      (void)(*method)->set_input(i, EValue(Tensor(input.dtype, input.sizes, zeros.data())));
    }
    (void)(*method)->execute();
  }
}

TEST_F(ProgramTest, TruncatedFilesNeverCrash) {
  auto bytes = std::move(rich_program().build().get());
  for (size_t length = 0; length < bytes.size(); length += (length < 2048 ? 1 : 997)) {
    std::vector<uint8_t> cut(bytes.begin(), bytes.begin() + static_cast<long>(length));
    exercise(cut);
  }
}

TEST_F(ProgramTest, GarbageFilesNeverCrash) {
  std::mt19937 rng(1234);
  for (int i = 0; i < 200; ++i) {
    std::vector<uint8_t> garbage(rng() % 5000);
    for (auto& b : garbage) b = static_cast<uint8_t>(rng());
    if (garbage.size() >= 4 && i % 2 == 0) std::memcpy(garbage.data(), "KILN", 4);
    exercise(garbage);
  }
}

TEST_F(ProgramTest, BitFlippedFilesGiveAValidProgramOrInvalidProgram) {
  auto bytes = std::move(rich_program().build().get());
  std::mt19937 rng(42);
  auto header = FileHeader::decode(bytes.data(), bytes.size(), bytes.size());
  ASSERT_TRUE(header.ok());
  size_t flatbuffer_end = header->program_offset + header->program_size;
  for (int i = 0; i < 3000; ++i) {
    auto flipped = bytes;
    int flips = 1 + static_cast<int>(rng() % 3);
    for (int f = 0; f < flips; ++f) {
      size_t at = rng() % flatbuffer_end;  // the structure, where flips matter
      flipped[at] ^= static_cast<uint8_t>(1u << (rng() % 8));
    }
    exercise(flipped);
  }
}

}  // namespace
}  // namespace kiln::runtime
