// Where on kiln's own loops against the reference kernel: broadcasts of every kind of row,
// constant inputs, rows with and without a tail past the last 16 lanes, special values.
#include <kiln/engine/cpu/test/op_case.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace kiln::engine::cpu {
namespace {

using namespace test_support;  // NOLINT: the case helpers
using runtime::Error;

OwnedTensor random_mask(std::vector<int64_t> sizes, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<bool> values(static_cast<size_t>(kernels::test_helpers::numel_of(sizes)));
  for (size_t i = 0; i < values.size(); ++i) values[i] = (rng() & 1) != 0;
  return OwnedTensor::of(std::move(sizes), values);
}

struct Shapes {
  std::vector<int64_t> condition, x, y;
};

std::string name(const Shapes& s) {
  return runtime::shape_to_string(s.condition) + " ? " + runtime::shape_to_string(s.x) + " : " +
         runtime::shape_to_string(s.y);
}

// Same bits as the reference (a select computes nothing, so NaN payloads pass too).
void expect_same_bits(const OwnedTensor& actual, const OwnedTensor& expected) {
  ASSERT_EQ(actual.tensor().numel(), expected.tensor().numel());
  ASSERT_EQ(std::memcmp(actual.tensor().data(), expected.tensor().data(), actual.tensor().nbytes()),
            0);
}

TEST(WhereOp, MatchesTheReferenceOverBroadcastsAndConstantInputs) {
  const std::vector<Shapes> shapes = {
      {{1, 1, 5, 37}, {}, {1, 3, 5, 37}},     // a causal mask, a fill value, scores
      {{1, 1, 16, 16}, {1}, {1, 4, 16, 16}},  // rows of whole vectors
      {{2, 3, 40}, {2, 3, 40}, {2, 3, 40}},   // all contiguous
      {{}, {3, 21}, {3, 21}},                 // one condition for all
      {{3, 21}, {3, 21}, {}},                 // a fill value on the other side
      {{4, 1}, {1, 33}, {4, 33}},             // a column condition: rows repeat it
      {{1, 7}, {}, {}},                       // only the condition is a tensor
      {{2, 1, 3}, {1, 5, 1}, {2, 5, 3}},      // rows of 3, each input its own pattern
      {{9}, {9}, {9}},                        // less than a vector
  };
  uint32_t seed = 7100;
  for (const Shapes& s : shapes) {
    for (int constants = 0; constants < 8; ++constants) {
      SCOPED_TRACE(name(s) + " constants " + std::to_string(constants));
      Case c("Where", {});
      c.add(random_mask(s.condition, seed++), (constants & 1) != 0);
      c.add(random_tensor(s.x, seed++), (constants & 2) != 0);
      c.add(random_tensor(s.y, seed++), (constants & 4) != 0);
      std::vector<int64_t> out;
      ASSERT_TRUE(kernels::broadcast_shape(s.condition, s.x).ok());
      out = *kernels::broadcast_shape(*kernels::broadcast_shape(s.condition, s.x), s.y);
      OwnedTensor expected = zeros(out);
      ASSERT_TRUE(kernels::where(c.at(0), c.at(1), c.at(2), expected.tensor()).ok());
      auto op = c.create();
      ASSERT_TRUE(op.ok()) << op.status();
      EXPECT_EQ((*op)->provider(), "kiln");
      EXPECT_EQ((*op)->outputs()[0].sizes, out);
      expect_same_bits(c.run(**op), expected);
    }
  }
}

TEST(WhereOp, SelectsInfinitiesAndNaNsUnchanged) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> scores(40);
  for (size_t i = 0; i < scores.size(); ++i) scores[i] = i % 3 == 0 ? nan : inf * (i % 2 ? 1 : -1);
  std::vector<bool> mask(40);
  for (size_t i = 0; i < mask.size(); ++i) mask[i] = i % 5 == 0;
  Case c("Where", {});
  c.add(OwnedTensor::of({2, 20}, mask), false);
  c.add(OwnedTensor::of<float>({}, {-inf}), true);
  c.add(OwnedTensor::of({2, 20}, scores), false);
  OwnedTensor expected = zeros({2, 20});
  ASSERT_TRUE(kernels::where(c.at(0), c.at(1), c.at(2), expected.tensor()).ok());
  auto op = c.create();
  ASSERT_TRUE(op.ok()) << op.status();
  expect_same_bits(c.run(**op), expected);
}

TEST(WhereOp, EmptyShapesRunAndConstantsAreVerifiedBeforeTheyAreRead) {
  {
    Case c("Where", {});
    c.add(random_mask({0, 4}, 5), false);
    c.add(random_tensor({0, 4}, 6), false);
    c.add(random_tensor({1}, 7), true);
    auto op = c.create();
    ASSERT_TRUE(op.ok()) << op.status();
    EXPECT_EQ((*op)->outputs()[0].sizes, (std::vector<int64_t>{0, 4}));
    c.run(**op);  // expects each run to succeed
  }
  Case c("Where", {});
  c.add(random_mask({4}, 8), true);
  c.add(random_tensor({4}, 9), false);
  c.add(random_tensor({4}, 10), false);
  c.desc.verify_constant = [](size_t input) {
    return runtime::Status(Error::InvalidExternalData,
                           "weight of input " + std::to_string(input) + " fails its hash");
  };
  auto op = c.create();
  ASSERT_FALSE(op.ok());
  EXPECT_EQ(op.error(), Error::InvalidExternalData);
  EXPECT_NE(op.status().message().find("input 0 fails its hash"), std::string::npos) << op.status();
}

TEST(WhereOp, DeclinesWhatItLacksAndNamesShapesThatDoNotBroadcast) {
  {  // Not f32 values: the reference kernel takes them.
    Case c("Where", {});
    c.add(random_mask({4}, 1), false);
    c.add(OwnedTensor::of<int64_t>({4}, {1, 2, 3, 4}), false);
    c.add(OwnedTensor::of<int64_t>({4}, {5, 6, 7, 8}), false);
    auto op = c.create();
    ASSERT_FALSE(op.ok());
    EXPECT_EQ(op.error(), Error::NotSupported);
    EXPECT_NE(op.status().message().find("bool condition selecting f32"), std::string::npos)
        << op.status();
  }
  {
    Case c("Where", {});
    c.add(random_mask({3, 4}, 2), false);
    c.add(random_tensor({3, 5}, 3), false);
    c.add(random_tensor({1}, 4), false);
    auto op = c.create();
    ASSERT_FALSE(op.ok());
    EXPECT_EQ(op.error(), Error::InvalidArgument);
    EXPECT_NE(op.status().message().find("[3, 4]"), std::string::npos) << op.status();
    EXPECT_NE(op.status().message().find("[3, 5]"), std::string::npos) << op.status();
  }
}

}  // namespace
}  // namespace kiln::engine::cpu
