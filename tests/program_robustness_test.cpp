// Program loading treats files as untrusted data (DESIGN.md §6): truncated and corrupted
// programs are rejected with an error that says why, and nothing crashes or leaks (this test
// also runs under the asan preset). The program fuzzer explores the same surface further.

#include <tests/program_corpus.h>

#include <kiln/runtime/core/data_loader.h>
#include <kiln/runtime/executor/file_format.h>
#include <kiln/runtime/executor/method.h>
#include <kiln/runtime/executor/program.h>
#include <kiln/testing/stub_backend.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace kiln::tests {
namespace {

using runtime::BufferDataLoader;
using runtime::Error;
using runtime::FileHeader;
using runtime::Program;

// Loads `bytes` as a program and, when that works, every method's meta and every method.
// Returns the load status. Failures must carry a message.
runtime::Status load_everything(const std::vector<uint8_t>& bytes, const std::string& what) {
  auto loader = std::make_shared<BufferDataLoader>(bytes.data(), bytes.size());
  auto program = Program::load(loader);
  if (!program.ok()) {
    EXPECT_FALSE(program.status().message().empty()) << what << ": error without a message";
    return program.status();
  }
  for (const std::string& name : (*program)->method_names()) {
    auto meta = (*program)->method_meta(name);
    EXPECT_TRUE(meta.ok()) << what << ": method_meta('" << name
                           << "') failed after a successful load: " << meta.status();
    if (load_memory_bytes(**program, name) > kLoadMemoryBudget) continue;
    auto method = (*program)->load_method(name);
    if (!method.ok()) {
      EXPECT_FALSE(method.status().message().empty())
          << what << ": load_method('" << name << "') error without a message";
    }
  }
  return runtime::Status::ok_status();
}

class ProgramRobustnessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    stub_ = kiln::testing::StubBackend::install(kCorpusStubBackend);
    auto corpus = make_program_corpus();
    ASSERT_TRUE(corpus.ok()) << corpus.status();
    corpus_ = std::move(corpus).get();
    ASSERT_GE(corpus_.size(), 10u);
  }

  std::unique_ptr<kiln::testing::StubBackend::Installed> stub_;
  std::vector<CorpusProgram> corpus_;
};

TEST_F(ProgramRobustnessTest, EveryCorpusProgramLoads) {
  for (const CorpusProgram& program : corpus_) {
    auto status = load_everything(program.bytes, program.name);
    EXPECT_TRUE(status.ok()) << program.name << ": " << status;
  }
}

TEST_F(ProgramRobustnessTest, EmptyAndTinyInputsAreInvalidPrograms) {
  for (size_t size : {size_t{0}, size_t{1}, size_t{4}, FileHeader::kSize - 1}) {
    std::vector<uint8_t> bytes(corpus_[0].bytes.begin(), corpus_[0].bytes.begin() + size);
    auto status = load_everything(bytes, "prefix of " + std::to_string(size) + " bytes");
    EXPECT_FALSE(status.ok()) << size;
  }
}

TEST_F(ProgramRobustnessTest, WrongMagicIsInvalidProgram) {
  std::vector<uint8_t> bytes = corpus_[0].bytes;
  std::memcpy(bytes.data(), "NOPE", 4);
  auto loader = std::make_shared<BufferDataLoader>(bytes.data(), bytes.size());
  auto program = Program::load(loader);
  ASSERT_FALSE(program.ok());
  EXPECT_EQ(program.status().code(), Error::InvalidProgram) << program.status();
}

// Found by the program fuzzer: a flatbuffer shorter than its 8-byte root offset + identifier,
// ending the file, must be rejected without reading past it (ASan catches an over-read here).
TEST_F(ProgramRobustnessTest, FlatbufferShorterThanItsIdentifierIsRejected) {
  for (uint64_t program_size : {uint64_t{1}, uint64_t{3}, uint64_t{7}}) {
    FileHeader header;
    header.segment_alignment = 64;
    header.program_offset = 64;
    header.program_size = program_size;
    header.segment_base_offset = 0;
    header.segment_data_size = 0;
    const size_t file_size = 64 + program_size;
    // Exactly file_size bytes on the heap, so that reading past the end is detectable.
    std::unique_ptr<uint8_t[]> bytes(new uint8_t[file_size]());
    header.encode(bytes.get());
    auto loader = std::make_shared<BufferDataLoader>(bytes.get(), file_size);
    auto program = Program::load(loader);
    ASSERT_FALSE(program.ok()) << "program of " << program_size << " bytes";
    EXPECT_EQ(program.status().code(), Error::InvalidProgram) << program.status();
  }
}

TEST_F(ProgramRobustnessTest, TruncatedProgramsAreRejected) {
  for (const CorpusProgram& program : corpus_) {
    auto header =
        FileHeader::decode(program.bytes.data(), program.bytes.size(), program.bytes.size());
    ASSERT_TRUE(header.ok()) << program.name << ": " << header.status();
    const size_t flatbuffer_end = header->program_offset + header->program_size;
    // Every length through the header and flatbuffer, then a stride through the segments.
    for (size_t size = 0; size < program.bytes.size(); size += size < flatbuffer_end ? 1 : 61) {
      std::vector<uint8_t> bytes(program.bytes.begin(), program.bytes.begin() + size);
      auto status = load_everything(bytes, program.name + " truncated to " + std::to_string(size));
      if (size < flatbuffer_end) {
        EXPECT_FALSE(status.ok()) << program.name << " truncated to " << size;
      }
    }
  }
}

// Seeded random corruption: flipped bits, bytes set to edge values, and 4/8-byte words
// overwritten with values that make offsets and sizes overflow or point elsewhere.
TEST_F(ProgramRobustnessTest, CorruptedProgramsNeverCrash) {
  constexpr int kMutationsPerProgram = 2000;
  const uint64_t kWords[] = {0,          1,          0x7f,       0x80,
                             0xff,       0xffff,     0x7fffffff, 0x80000000,
                             0xffffffff, 1ull << 32, ~0ull,      0x7fffffffffffffffull};
  std::mt19937_64 rng(20261129);
  int rejected = 0, loaded = 0;
  for (const CorpusProgram& program : corpus_) {
    auto header =
        FileHeader::decode(program.bytes.data(), program.bytes.size(), program.bytes.size());
    ASSERT_TRUE(header.ok()) << program.name;
    // Most mutations hit the header and flatbuffer, where the structure lives.
    const size_t hot_end =
        std::min<size_t>(header->program_offset + header->program_size, program.bytes.size());
    for (int i = 0; i < kMutationsPerProgram; ++i) {
      std::vector<uint8_t> bytes = program.bytes;
      const int edits = 1 + static_cast<int>(rng() % 3);
      for (int e = 0; e < edits; ++e) {
        const size_t limit = (rng() % 8 == 0) ? bytes.size() : hot_end;
        const size_t at = rng() % limit;
        switch (rng() % 3) {
          case 0:
            bytes[at] ^= static_cast<uint8_t>(1u << (rng() % 8));
            break;
          case 1:
            bytes[at] = static_cast<uint8_t>(kWords[rng() % std::size(kWords)]);
            break;
          default: {
            const size_t width = (rng() % 2) ? 4 : 8;
            const uint64_t word = kWords[rng() % std::size(kWords)];
            if (at + width <= bytes.size()) std::memcpy(bytes.data() + at, &word, width);
          }
        }
      }
      auto status = load_everything(bytes, program.name + " mutation " + std::to_string(i));
      if (status.ok()) {
        ++loaded;
      } else {
        ++rejected;
      }
    }
  }
  // Both outcomes must occur: corruption is usually caught, and some edits are harmless.
  EXPECT_GT(rejected, 0);
  RecordProperty("loaded", loaded);
  RecordProperty("rejected", rejected);
}

}  // namespace
}  // namespace kiln::tests
