#include <kiln/engine/ir/xxh3.h>

// The header-only implementation, at the build's baseline vector path, is the reference the
// run-time choice of path must agree with.
#define XXH_INLINE_ALL
#include <xxhash.h>

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

namespace kiln::engine::ir {
namespace {

std::vector<uint8_t> random_bytes(size_t size, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> bytes(size);
  for (auto& b : bytes) b = static_cast<uint8_t>(rng());
  return bytes;
}

TEST(Xxh3, MatchesTheBaselineImplementationAtEverySize) {
  // XXH3 has separate code for 0-16, 17-128, 129-240 and longer inputs; the long path is the
  // vectorized one, with a tail after its last full stripe and block.
  const std::vector<uint8_t> bytes = random_bytes((size_t{3} << 20) + 77, 7);
  for (size_t size :
       {size_t{0}, size_t{1}, size_t{16}, size_t{17}, size_t{128}, size_t{129}, size_t{240},
        size_t{241}, size_t{1024}, size_t{1025}, size_t{65536 + 3}, bytes.size()}) {
    EXPECT_EQ(xxh3_64(bytes.data(), size), XXH3_64bits(bytes.data(), size)) << size << " bytes";
  }
  EXPECT_EQ(xxh3_64(nullptr, 0), 0x2d06800538d394c2ULL);  // XXH3-64 of nothing, seed 0
}

TEST(Xxh3, StreamEqualsTheHashOfTheConcatenation) {
  const std::vector<uint8_t> bytes = random_bytes((size_t{1} << 20) + 5, 11);
  for (size_t cut : {size_t{0}, size_t{3}, size_t{255}, size_t{4096}, size_t{700001}}) {
    Xxh3Stream stream;
    stream.update(bytes.data(), cut);
    stream.update(nullptr, 0);
    stream.update(bytes.data() + cut, bytes.size() - cut);
    EXPECT_EQ(stream.digest(), xxh3_64(bytes.data(), bytes.size())) << "cut at " << cut;
  }
  const std::vector<uint8_t> other = random_bytes(bytes.size(), 12);
  Xxh3Stream stream;
  stream.update(other.data(), other.size());
  EXPECT_NE(stream.digest(), xxh3_64(bytes.data(), bytes.size()));
}

}  // namespace
}  // namespace kiln::engine::ir
