// Expand, Tile, Slice, Gather and Split.

#include <kiln/kernels/kernels.h>
#include <kiln/kernels/test/tensor_helpers.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <limits>
#include <string>
#include <vector>

namespace kiln::kernels {
namespace {

using runtime::Error;
using runtime::EValue;
using runtime::ScalarType;
using runtime::Status;
using test_helpers::attrs;
using test_helpers::iota;
using test_helpers::OwnedTensor;
using test_helpers::run_kernel;
using test_helpers::sizes_of;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

using Shape = std::vector<int64_t>;

TEST(Expand, BroadcastsBothWays) {
  auto x = OwnedTensor::of<float>({3, 1}, {1, 2, 3});
  auto shape = OwnedTensor::of<int64_t>({3}, {2, 1, 2});
  auto out = OwnedTensor::resizable(ScalarType::Float32, 3);
  EValue in(x.tensor()), in_shape(shape.tensor()), result(out.tensor());
  ASSERT_TRUE(run_kernel("Expand", {&in, &in_shape}, {&result}).ok());
  EXPECT_EQ(sizes_of(result), (Shape{2, 3, 2}));
  EXPECT_THAT(out.values<float>(12), ElementsAre(1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3, 3));
  auto bad = OwnedTensor::of<int64_t>({2}, {2, 1});
  EValue in_bad(bad.tensor());
  Status status = run_kernel("Expand", {&in, &in_bad}, {&result});
  EXPECT_EQ(status.code(), Error::InvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("run kernel 'Expand': broadcast shape [3, 1] with "
                                          "shape [2, 1]"));
}

TEST(Tile, RepeatsEachDimension) {
  auto x = OwnedTensor::of<int32_t>({2, 2}, {1, 2, 3, 4});
  auto repeats = OwnedTensor::of<int64_t>({2}, {2, 3});
  auto out = OwnedTensor::resizable(ScalarType::Int32, 2, 64);
  EValue in(x.tensor()), in_repeats(repeats.tensor()), result(out.tensor());
  ASSERT_TRUE(run_kernel("Tile", {&in, &in_repeats}, {&result}).ok());
  EXPECT_EQ(sizes_of(result), (Shape{4, 6}));
  auto values = out.values<int32_t>(24);
  for (int i = 0; i < 4; ++i) {
    for (int j = 0; j < 6; ++j) EXPECT_EQ(values[i * 6 + j], 1 + (i % 2) * 2 + j % 2);
  }
  auto wrong = OwnedTensor::of<int64_t>({1}, {2});
  EValue in_wrong(wrong.tensor());
  Status status = run_kernel("Tile", {&in, &in_wrong}, {&result});
  EXPECT_EQ(status.code(), Error::InvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("input 1 (repeats) has 1 elements (expected 2"));
}

// ---- Slice ------------------------------------------------------------------------------------

// Slices a [3, 4] tensor holding 0..11 with the given inputs (opset 10+ form).
std::pair<Shape, std::vector<float>> slice_3x4(Shape starts, Shape ends, Shape axes = {},
                                               Shape steps = {}) {
  auto x = OwnedTensor::of<float>({3, 4}, iota(12));
  auto s = OwnedTensor::of<int64_t>({static_cast<int64_t>(starts.size())}, starts);
  auto e = OwnedTensor::of<int64_t>({static_cast<int64_t>(ends.size())}, ends);
  auto a = OwnedTensor::of<int64_t>({static_cast<int64_t>(axes.size())}, axes);
  auto t = OwnedTensor::of<int64_t>({static_cast<int64_t>(steps.size())}, steps);
  auto out = OwnedTensor::resizable(ScalarType::Float32, 2);
  EValue in(x.tensor()), in_s(s.tensor()), in_e(e.tensor()), in_a(a.tensor()), in_t(t.tensor()),
      none, result(out.tensor());
  std::vector<EValue*> inputs = {&in, &in_s, &in_e, axes.empty() ? &none : &in_a};
  if (!steps.empty()) inputs.push_back(&in_t);
  Status status = run_kernel("Slice", inputs, {&result});
  EXPECT_TRUE(status.ok()) << status.message();
  const Shape shape = sizes_of(result);
  return {shape, out.values<float>(test_helpers::numel_of(shape))};
}

TEST(Slice, StartsEndsAxesSteps) {
  auto [shape, values] = slice_3x4({1, 1}, {3, 3});
  EXPECT_EQ(shape, (Shape{2, 2}));
  EXPECT_THAT(values, ElementsAre(5, 6, 9, 10));
  std::tie(shape, values) = slice_3x4({1}, {-1}, {-1});  // columns 1..2
  EXPECT_EQ(shape, (Shape{3, 2}));
  EXPECT_THAT(values, ElementsAre(1, 2, 5, 6, 9, 10));
  std::tie(shape, values) = slice_3x4({0, 0}, {3, 4}, {0, 1}, {2, 3});
  EXPECT_EQ(shape, (Shape{2, 2}));
  EXPECT_THAT(values, ElementsAre(0, 3, 8, 11));
}

TEST(Slice, NegativeStepsAndClamping) {
  const int64_t big = std::numeric_limits<int64_t>::max();
  const int64_t small = std::numeric_limits<int64_t>::min();
  // Reverse the columns: start past the end, end before the start.
  auto [shape, values] = slice_3x4({-1}, {small}, {1}, {-1});
  EXPECT_EQ(shape, (Shape{3, 4}));
  EXPECT_THAT(values, ElementsAre(3, 2, 1, 0, 7, 6, 5, 4, 11, 10, 9, 8));
  std::tie(shape, values) = slice_3x4({big}, {0}, {0}, {-2});  // rows 2 (then 0 excluded)
  EXPECT_EQ(shape, (Shape{1, 4}));
  EXPECT_THAT(values, ElementsAre(8, 9, 10, 11));
  std::tie(shape, values) = slice_3x4({2}, {big}, {1});
  EXPECT_EQ(shape, (Shape{3, 2}));
  std::tie(shape, values) = slice_3x4({3}, {1}, {1});  // empty
  EXPECT_EQ(shape, (Shape{3, 0}));
}

TEST(Slice, AttributeFormAndErrors) {
  auto x = OwnedTensor::of<float>({3, 4}, iota(12));
  auto out = OwnedTensor::resizable(ScalarType::Float32, 2);
  EValue in(x.tensor()), result(out.tensor());
  ASSERT_TRUE(run_kernel("Slice", {&in}, {&result},
                         attrs({{"starts", Shape{1}}, {"ends", Shape{2}}, {"axes", Shape{0}}}))
                  .ok());
  EXPECT_EQ(sizes_of(result), (Shape{1, 4}));
  EXPECT_THAT(out.values<float>(4), ElementsAre(4, 5, 6, 7));
  Status status = run_kernel("Slice", {&in}, {&result}, attrs({{"starts", Shape{1}}}));
  EXPECT_EQ(status.code(), Error::InvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("ends are missing"));
  auto s = OwnedTensor::of<int64_t>({1}, {0});
  auto zero = OwnedTensor::of<int64_t>({1}, {0});
  auto axis = OwnedTensor::of<int64_t>({1}, {2});
  EValue in_s(s.tensor()), in_zero(zero.tensor()), in_axis(axis.tensor()), none;
  status = run_kernel("Slice", {&in, &in_s, &in_s, &none, &in_zero}, {&result});
  EXPECT_THAT(status.message(), HasSubstr("steps [0] have 0 at position 0"));
  status = run_kernel("Slice", {&in, &in_s, &in_s, &in_axis}, {&result});
  EXPECT_THAT(status.message(), HasSubstr("axes [2] have 2 (expected -2..1)"));
}

// ---- Gather -----------------------------------------------------------------------------------

TEST(Gather, AxisZeroAndNegativeIndices) {
  auto data = OwnedTensor::of<float>({3, 2}, {1, 2, 3, 4, 5, 6});
  auto indices = OwnedTensor::of<int64_t>({2, 2}, {0, 2, -1, 1});
  auto out = OwnedTensor::resizable(ScalarType::Float32, 3);
  EValue in(data.tensor()), in_indices(indices.tensor()), result(out.tensor());
  ASSERT_TRUE(run_kernel("Gather", {&in, &in_indices}, {&result}).ok());
  EXPECT_EQ(sizes_of(result), (Shape{2, 2, 2}));
  EXPECT_THAT(out.values<float>(8), ElementsAre(1, 2, 5, 6, 5, 6, 3, 4));
}

TEST(Gather, InnerAxisAndScalarIndex) {
  auto data = OwnedTensor::of<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  auto indices = OwnedTensor::of<int32_t>({}, {2});
  auto out = OwnedTensor::resizable(ScalarType::Float32, 1);
  EValue in(data.tensor()), in_indices(indices.tensor()), result(out.tensor());
  ASSERT_TRUE(run_kernel("Gather", {&in, &in_indices}, {&result}, attrs({{"axis", -1}})).ok());
  EXPECT_EQ(sizes_of(result), (Shape{2}));
  EXPECT_THAT(out.values<float>(2), ElementsAre(3, 6));
}

TEST(Gather, OutOfRangeIndexIsAnError) {
  auto data = OwnedTensor::of<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  auto indices = OwnedTensor::of<int64_t>({2}, {1, -3});
  auto out = OwnedTensor::resizable(ScalarType::Float32, 2);
  EValue in(data.tensor()), in_indices(indices.tensor()), result(out.tensor());
  Status status = run_kernel("Gather", {&in, &in_indices}, {&result});
  EXPECT_EQ(status.code(), Error::InvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("run kernel 'Gather': input 1 (indices) has -3 at "
                                          "element 1 (expected -2..1 for axis 0 of size 2)"));
  auto floats = OwnedTensor::of<float>({1}, {0});
  EValue in_floats(floats.tensor());
  status = run_kernel("Gather", {&in, &in_floats}, {&result});
  EXPECT_EQ(status.code(), Error::InvalidType);
  EXPECT_THAT(status.message(), HasSubstr("input 1 (indices) has dtype f32 (expected i32 or i64)"));
}

TEST(GatherElements, PicksAlongTheAxis) {
  auto data = OwnedTensor::of<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  auto indices = OwnedTensor::of<int64_t>({2, 2}, {2, 0, -1, 1});
  auto out = OwnedTensor::resizable(ScalarType::Float32, 2);
  EValue in(data.tensor()), in_indices(indices.tensor()), result(out.tensor());
  ASSERT_TRUE(
      run_kernel("GatherElements", {&in, &in_indices}, {&result}, attrs({{"axis", 1}})).ok());
  EXPECT_EQ(sizes_of(result), (Shape{2, 2}));
  EXPECT_THAT(out.values<float>(4), ElementsAre(3, 1, 6, 5));
  auto rows = OwnedTensor::of<int32_t>({1, 3}, {1, 0, 1});
  EValue in_rows(rows.tensor());
  ASSERT_TRUE(run_kernel("GatherElements", {&in, &in_rows}, {&result}).ok());
  EXPECT_THAT(out.values<float>(3), ElementsAre(4, 2, 6));
  auto bad = OwnedTensor::of<int64_t>({1, 1}, {2});
  EValue in_bad(bad.tensor());
  Status status = run_kernel("GatherElements", {&in, &in_bad}, {&result});
  EXPECT_EQ(status.code(), Error::InvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("input 1 (indices) has 2 at element 0 (expected -2..1"));
}

// ---- Split ------------------------------------------------------------------------------------

TEST(Split, PartsFromInputAttributeOrEqual) {
  auto x = OwnedTensor::of<float>({2, 5}, iota(10));
  auto a = OwnedTensor::resizable(ScalarType::Float32, 2);
  auto b = OwnedTensor::resizable(ScalarType::Float32, 2);
  auto parts = OwnedTensor::of<int64_t>({2}, {2, 3});
  EValue in(x.tensor()), in_parts(parts.tensor()), out_a(a.tensor()), out_b(b.tensor());
  ASSERT_TRUE(run_kernel("Split", {&in, &in_parts}, {&out_a, &out_b}, attrs({{"axis", 1}})).ok());
  EXPECT_EQ(sizes_of(out_a), (Shape{2, 2}));
  EXPECT_EQ(sizes_of(out_b), (Shape{2, 3}));
  EXPECT_THAT(a.values<float>(4), ElementsAre(0, 1, 5, 6));
  EXPECT_THAT(b.values<float>(6), ElementsAre(2, 3, 4, 7, 8, 9));
  ASSERT_TRUE(
      run_kernel("Split", {&in}, {&out_a, &out_b}, attrs({{"axis", -1}, {"split", Shape{4, 1}}}))
          .ok());
  EXPECT_EQ(sizes_of(out_a), (Shape{2, 4}));
  EXPECT_THAT(b.values<float>(2), ElementsAre(4, 9));
  // Equal parts: ceil(5 / 2) = 3, then the 2 left (opset 18 num_outputs).
  ASSERT_TRUE(
      run_kernel("Split", {&in}, {&out_a, &out_b}, attrs({{"axis", 1}, {"num_outputs", 2}})).ok());
  EXPECT_EQ(sizes_of(out_a), (Shape{2, 3}));
  EXPECT_EQ(sizes_of(out_b), (Shape{2, 2}));
  ASSERT_TRUE(run_kernel("Split", {&in}, {&out_a, &out_b}).ok());  // axis 0
  EXPECT_THAT(a.values<float>(5), ElementsAre(0, 1, 2, 3, 4));
  EXPECT_THAT(b.values<float>(5), ElementsAre(5, 6, 7, 8, 9));
}

TEST(Split, BadPartsAreErrors) {
  auto x = OwnedTensor::of<float>({4}, iota(4));
  auto a = OwnedTensor::resizable(ScalarType::Float32, 1);
  auto b = OwnedTensor::resizable(ScalarType::Float32, 1);
  auto parts = OwnedTensor::of<int64_t>({2}, {1, 2});
  EValue in(x.tensor()), in_parts(parts.tensor()), out_a(a.tensor()), out_b(b.tensor());
  Status status = run_kernel("Split", {&in, &in_parts}, {&out_a, &out_b});
  EXPECT_EQ(status.code(), Error::InvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("run kernel 'Split': split [1, 2] (expected 2 sizes "
                                          ">= 0 that add up to 4"));
  status = run_kernel("Split", {&in}, {&out_a, &out_b}, attrs({{"num_outputs", 3}}));
  EXPECT_THAT(status.message(), HasSubstr("attribute 'num_outputs' is 3 (expected 2"));
}

}  // namespace
}  // namespace kiln::kernels
