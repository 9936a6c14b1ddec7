// Element-wise ops: Add, Sub, Mul, Div with numpy broadcasting; Relu, Sigmoid, Tanh.

#include <kiln/kernels/broadcast.h>
#include <kiln/kernels/kernels.h>
#include <kiln/kernels/test/tensor_helpers.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

namespace kiln::kernels {
namespace {

using runtime::Error;
using runtime::ScalarType;
using test_helpers::OwnedTensor;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

using Shape = std::vector<int64_t>;

// ---- broadcast_shape --------------------------------------------------------------------------

TEST(BroadcastShape, FollowsNumpyRules) {
  EXPECT_EQ(*broadcast_shape(Shape{2, 3}, Shape{2, 3}), (Shape{2, 3}));
  EXPECT_EQ(*broadcast_shape(Shape{2, 3}, Shape{}), (Shape{2, 3}));            // scalar
  EXPECT_EQ(*broadcast_shape(Shape{2, 3}, Shape{3}), (Shape{2, 3}));           // row
  EXPECT_EQ(*broadcast_shape(Shape{2, 1}, Shape{1, 3}), (Shape{2, 3}));        // column x row
  EXPECT_EQ(*broadcast_shape(Shape{4, 1, 3}, Shape{2, 1}), (Shape{4, 2, 3}));  // rank differs
  EXPECT_EQ(*broadcast_shape(Shape{0, 3}, Shape{1, 3}), (Shape{0, 3}));        // 0 with 1 is 0
}

TEST(BroadcastShape, MismatchNamesShapesAndDimension) {
  auto shape = broadcast_shape(Shape{2, 3}, Shape{4});
  ASSERT_FALSE(shape.ok());
  EXPECT_EQ(shape.error(), Error::InvalidArgument);
  EXPECT_THAT(shape.status().message(), HasSubstr("[2, 3] with shape [4]"));
  EXPECT_THAT(shape.status().message(), HasSubstr("dimension -1 has sizes 3 and 4"));
}

TEST(BroadcastLoop, MergesDimensionsSoRowsAreLong) {
  // [8, 3, 4, 4] + [1, 3, 1, 1]: the bias is constant over each 4x4 plane.
  const Shape out = {8, 3, 4, 4};
  const auto loop = make_broadcast_loop<2>(
      out, {broadcast_strides(out, out), broadcast_strides(Shape{1, 3, 1, 1}, out)});
  EXPECT_THAT(loop.sizes, ElementsAre(8, 3, 16));
  EXPECT_THAT(loop.strides[0], ElementsAre(48, 16, 1));
  EXPECT_THAT(loop.strides[1], ElementsAre(0, 1, 0));
}

// ---- Add, Sub, Mul, Div -----------------------------------------------------------------------

TEST(Add, SameShape) {
  auto a = OwnedTensor::of<float>({2, 2}, {1, 2, 3, 4});
  auto b = OwnedTensor::of<float>({2, 2}, {10, 20, 30, 40});
  auto out = OwnedTensor::zeros(ScalarType::Float32, {2, 2});
  ASSERT_TRUE(add(a.tensor(), b.tensor(), out.tensor()).ok());
  EXPECT_THAT(out.values<float>(), ElementsAre(11, 22, 33, 44));
}

TEST(Add, ScalarBroadcastsToEveryElement) {
  auto a = OwnedTensor::of<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  auto b = OwnedTensor::of<float>({}, {100});
  auto out = OwnedTensor::zeros(ScalarType::Float32, {2, 3});
  ASSERT_TRUE(add(a.tensor(), b.tensor(), out.tensor()).ok());
  EXPECT_THAT(out.values<float>(), ElementsAre(101, 102, 103, 104, 105, 106));
  // The scalar may be on either side.
  ASSERT_TRUE(add(b.tensor(), a.tensor(), out.tensor()).ok());
  EXPECT_THAT(out.values<float>(), ElementsAre(101, 102, 103, 104, 105, 106));
}

TEST(Add, RowBroadcastsOverRows) {
  auto a = OwnedTensor::of<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  auto row = OwnedTensor::of<float>({3}, {10, 20, 30});
  auto out = OwnedTensor::zeros(ScalarType::Float32, {2, 3});
  ASSERT_TRUE(add(a.tensor(), row.tensor(), out.tensor()).ok());
  EXPECT_THAT(out.values<float>(), ElementsAre(11, 22, 33, 14, 25, 36));
}

TEST(Add, ColumnBroadcastsOverColumns) {
  auto a = OwnedTensor::of<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  auto column = OwnedTensor::of<float>({2, 1}, {10, 20});
  auto out = OwnedTensor::zeros(ScalarType::Float32, {2, 3});
  ASSERT_TRUE(add(a.tensor(), column.tensor(), out.tensor()).ok());
  EXPECT_THAT(out.values<float>(), ElementsAre(11, 12, 13, 24, 25, 26));
}

TEST(Add, ColumnPlusRowGivesOuterSum) {
  auto column = OwnedTensor::of<int32_t>({3, 1}, {100, 200, 300});
  auto row = OwnedTensor::of<int32_t>({1, 2}, {1, 2});
  auto out = OwnedTensor::zeros(ScalarType::Int32, {3, 2});
  ASSERT_TRUE(add(column.tensor(), row.tensor(), out.tensor()).ok());
  EXPECT_THAT(out.values<int32_t>(), ElementsAre(101, 102, 201, 202, 301, 302));
}

// Rank-different operands on seeded random data, checked against a plain double loop.
TEST(Add, RankDifferentMatchesDoubleLoop) {
  const Shape shape_a = {2, 3, 4};
  const Shape shape_b = {3, 1};
  auto values_a = test_helpers::random_values<double>(24, 1);
  auto values_b = test_helpers::random_values<double>(3, 2);
  auto a = OwnedTensor::of<double>(shape_a, values_a);
  auto b = OwnedTensor::of<double>(shape_b, values_b);
  auto out = OwnedTensor::zeros(ScalarType::Float64, {2, 3, 4});
  ASSERT_TRUE(add(a.tensor(), b.tensor(), out.tensor()).ok());
  auto result = out.values<double>();
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 3; ++j) {
      for (int k = 0; k < 4; ++k) {
        EXPECT_EQ(result[(i * 3 + j) * 4 + k], values_a[(i * 3 + j) * 4 + k] + values_b[j]);
      }
    }
  }
}

TEST(Sub, BroadcastsTheSecondOperand) {
  auto a = OwnedTensor::of<int64_t>({2, 2}, {10, 20, 30, 40});
  auto b = OwnedTensor::of<int64_t>({2}, {1, 2});
  auto out = OwnedTensor::zeros(ScalarType::Int64, {2, 2});
  ASSERT_TRUE(sub(a.tensor(), b.tensor(), out.tensor()).ok());
  EXPECT_THAT(out.values<int64_t>(), ElementsAre(9, 18, 29, 38));
  // Order matters: b - a broadcasts b over a's rows.
  ASSERT_TRUE(sub(b.tensor(), a.tensor(), out.tensor()).ok());
  EXPECT_THAT(out.values<int64_t>(), ElementsAre(-9, -18, -29, -38));
}

TEST(Mul, MultipliesElementwise) {
  auto a = OwnedTensor::of<float>({3}, {1.5f, -2, 0});
  auto b = OwnedTensor::of<float>({3}, {2, 3, 7});
  auto out = OwnedTensor::zeros(ScalarType::Float32, {3});
  ASSERT_TRUE(mul(a.tensor(), b.tensor(), out.tensor()).ok());
  EXPECT_THAT(out.values<float>(), ElementsAre(3, -6, 0));
}

TEST(Mul, IntegerOverflowWraps) {
  auto a = OwnedTensor::of<int32_t>({2}, {std::numeric_limits<int32_t>::max(), 65536});
  auto b = OwnedTensor::of<int32_t>({2}, {2, 65536});
  auto out = OwnedTensor::zeros(ScalarType::Int32, {2});
  ASSERT_TRUE(mul(a.tensor(), b.tensor(), out.tensor()).ok());
  EXPECT_THAT(out.values<int32_t>(), ElementsAre(-2, 0));
}

TEST(Add, IntegerOverflowWraps) {
  auto a = OwnedTensor::of<int32_t>({1}, {std::numeric_limits<int32_t>::max()});
  auto b = OwnedTensor::of<int32_t>({1}, {1});
  auto out = OwnedTensor::zeros(ScalarType::Int32, {1});
  ASSERT_TRUE(add(a.tensor(), b.tensor(), out.tensor()).ok());
  EXPECT_THAT(out.values<int32_t>(), ElementsAre(std::numeric_limits<int32_t>::min()));
}

TEST(Div, FloatFollowsIeee) {
  auto a = OwnedTensor::of<float>({4}, {1, -3, 1, 0});
  auto b = OwnedTensor::of<float>({4}, {4, 2, 0, 0});
  auto out = OwnedTensor::zeros(ScalarType::Float32, {4});
  ASSERT_TRUE(div(a.tensor(), b.tensor(), out.tensor()).ok());
  auto result = out.values<float>();
  EXPECT_EQ(result[0], 0.25f);
  EXPECT_EQ(result[1], -1.5f);
  EXPECT_TRUE(std::isinf(result[2]));
  EXPECT_TRUE(std::isnan(result[3]));
}

TEST(Div, IntegerTruncatesTowardZero) {
  auto a = OwnedTensor::of<int32_t>({4}, {7, -7, 7, -7});
  auto b = OwnedTensor::of<int32_t>({4}, {2, 2, -2, -2});
  auto out = OwnedTensor::zeros(ScalarType::Int32, {4});
  ASSERT_TRUE(div(a.tensor(), b.tensor(), out.tensor()).ok());
  EXPECT_THAT(out.values<int32_t>(), ElementsAre(3, -3, -3, 3));
}

TEST(Div, IntegerMinByMinusOneWraps) {
  auto a = OwnedTensor::of<int64_t>({1}, {std::numeric_limits<int64_t>::min()});
  auto b = OwnedTensor::of<int64_t>({1}, {-1});
  auto out = OwnedTensor::zeros(ScalarType::Int64, {1});
  ASSERT_TRUE(div(a.tensor(), b.tensor(), out.tensor()).ok());
  EXPECT_THAT(out.values<int64_t>(), ElementsAre(std::numeric_limits<int64_t>::min()));
}

TEST(Div, IntegerDivisionByZeroIsAnError) {
  auto a = OwnedTensor::of<int64_t>({3}, {1, 2, 3});
  auto b = OwnedTensor::of<int64_t>({3}, {1, 0, 1});
  auto out = OwnedTensor::zeros(ScalarType::Int64, {3});
  auto status = div(a.tensor(), b.tensor(), out.tensor());
  EXPECT_EQ(status.code(), Error::InvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("run kernel 'Div': input 1 has 0 at element 1"));
  EXPECT_THAT(out.values<int64_t>(), ElementsAre(0, 0, 0));  // nothing written
}

TEST(Add, HalfAndBFloat16ComputeInFloat) {
  for (ScalarType dtype : {ScalarType::Float16, ScalarType::BFloat16}) {
    auto a = OwnedTensor::half_of(dtype, {3}, {1.5f, -2, 0.25f});
    auto b = OwnedTensor::half_of(dtype, {}, {0.5f});
    auto out = OwnedTensor::zeros(dtype, {3});
    ASSERT_TRUE(add(a.tensor(), b.tensor(), out.tensor()).ok());
    EXPECT_THAT(out.half_values(), ElementsAre(2, -1.5f, 0.75f)) << runtime::to_string(dtype);
  }
}

TEST(Add, EmptyBroadcastWritesNothing) {
  auto a = OwnedTensor::of<float>({0, 3}, {});
  auto b = OwnedTensor::of<float>({3}, {1, 2, 3});
  auto out = OwnedTensor::zeros(ScalarType::Float32, {0, 3});
  EXPECT_TRUE(add(a.tensor(), b.tensor(), out.tensor()).ok());
}

TEST(Add, DtypeMismatchIsInvalidType) {
  auto a = OwnedTensor::of<float>({2}, {1, 2});
  auto b = OwnedTensor::of<int32_t>({2}, {1, 2});
  auto out = OwnedTensor::zeros(ScalarType::Float32, {2});
  auto status = add(a.tensor(), b.tensor(), out.tensor());
  EXPECT_EQ(status.code(), Error::InvalidType);
  EXPECT_THAT(status.message(),
              HasSubstr("run kernel 'Add': input 1 has dtype i32 (expected f32, the dtype of "
                        "input 0)"));
}

TEST(Add, UnsupportedDtypeListsTheAcceptedOnes) {
  auto a = OwnedTensor::of<bool>({2}, {true, false});
  auto out = OwnedTensor::zeros(ScalarType::Bool, {2});
  auto status = add(a.tensor(), a.tensor(), out.tensor());
  EXPECT_EQ(status.code(), Error::InvalidType);
  EXPECT_THAT(status.message(), HasSubstr("input 0 has dtype bool (expected f32, f64, f16, bf16, "
                                          "i8, u8, i16, i32 or i64)"));
}

TEST(Add, WrongOutputShapeIsAnError) {
  auto a = OwnedTensor::of<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  auto b = OwnedTensor::of<float>({3}, {1, 2, 3});
  auto out = OwnedTensor::zeros(ScalarType::Float32, {3, 2});
  auto status = add(a.tensor(), b.tensor(), out.tensor());
  EXPECT_EQ(status.code(), Error::InvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("output 0 has shape [3, 2] (expected [2, 3])"));
}

TEST(Add, IncompatibleShapesNameTheOp) {
  auto a = OwnedTensor::of<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  auto b = OwnedTensor::of<float>({2}, {1, 2});
  auto out = OwnedTensor::zeros(ScalarType::Float32, {2, 3});
  auto status = add(a.tensor(), b.tensor(), out.tensor());
  EXPECT_EQ(status.code(), Error::InvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("run kernel 'Add': broadcast shape [2, 3] with"));
}

// ---- Relu, Sigmoid, Tanh ----------------------------------------------------------------------

TEST(Relu, ClampsNegativesToZero) {
  auto x = OwnedTensor::of<float>({5}, {-2, -0.5f, 0, 0.5f, 2});
  auto out = OwnedTensor::zeros(ScalarType::Float32, {5});
  ASSERT_TRUE(relu(x.tensor(), out.tensor()).ok());
  EXPECT_THAT(out.values<float>(), ElementsAre(0, 0, 0, 0.5f, 2));
}

TEST(Relu, PropagatesNanAndAcceptsIntegers) {
  auto x = OwnedTensor::of<double>({1}, {std::nan("")});
  auto out = OwnedTensor::zeros(ScalarType::Float64, {1});
  ASSERT_TRUE(relu(x.tensor(), out.tensor()).ok());
  EXPECT_TRUE(std::isnan(out.values<double>()[0]));

  auto ints = OwnedTensor::of<int64_t>({3}, {-5, 0, 5});
  auto int_out = OwnedTensor::zeros(ScalarType::Int64, {3});
  ASSERT_TRUE(relu(ints.tensor(), int_out.tensor()).ok());
  EXPECT_THAT(int_out.values<int64_t>(), ElementsAre(0, 0, 5));
}

TEST(Relu, MayRunInPlace) {
  auto x = OwnedTensor::of<float>({3}, {-1, 0, 1});
  ASSERT_TRUE(relu(x.tensor(), x.tensor()).ok());
  EXPECT_THAT(x.values<float>(), ElementsAre(0, 0, 1));
}

TEST(Sigmoid, MatchesDoubleFormula) {
  const std::vector<double> inputs = {-20, -3, -0.5, 0, 0.5, 3, 20};
  auto x = OwnedTensor::of<double>({7}, inputs);
  auto out = OwnedTensor::zeros(ScalarType::Float64, {7});
  ASSERT_TRUE(sigmoid(x.tensor(), out.tensor()).ok());
  auto result = out.values<double>();
  for (size_t i = 0; i < inputs.size(); ++i) {
    EXPECT_NEAR(result[i], 1.0 / (1.0 + std::exp(-inputs[i])), 1e-15) << inputs[i];
  }
}

TEST(Sigmoid, StaysFiniteForHugeInputs) {
  auto x = OwnedTensor::of<float>({2}, {-1000, 1000});
  auto out = OwnedTensor::zeros(ScalarType::Float32, {2});
  ASSERT_TRUE(sigmoid(x.tensor(), out.tensor()).ok());
  EXPECT_THAT(out.values<float>(), ElementsAre(0, 1));
}

TEST(Sigmoid, RejectsIntegers) {
  auto x = OwnedTensor::of<int32_t>({1}, {1});
  auto out = OwnedTensor::zeros(ScalarType::Int32, {1});
  auto status = sigmoid(x.tensor(), out.tensor());
  EXPECT_EQ(status.code(), Error::InvalidType);
  EXPECT_THAT(status.message(), HasSubstr("run kernel 'Sigmoid': input 0 has dtype i32"));
}

TEST(Tanh, MatchesStdTanh) {
  auto inputs = test_helpers::random_values<float>(64, 3, -5, 5);
  auto x = OwnedTensor::of<float>({8, 8}, inputs);
  auto out = OwnedTensor::zeros(ScalarType::Float32, {8, 8});
  ASSERT_TRUE(kernels::tanh(x.tensor(), out.tensor()).ok());
  auto result = out.values<float>();
  for (size_t i = 0; i < inputs.size(); ++i) {
    EXPECT_NEAR(result[i], std::tanh(static_cast<double>(inputs[i])), 1e-6);
  }
}

TEST(Tanh, HalfRoundsOnce) {
  auto x = OwnedTensor::half_of(ScalarType::Float16, {2}, {0.5f, -1});
  auto out = OwnedTensor::zeros(ScalarType::Float16, {2});
  ASSERT_TRUE(kernels::tanh(x.tensor(), out.tensor()).ok());
  auto result = out.half_values();
  EXPECT_NEAR(result[0], std::tanh(0.5), 1e-3);
  EXPECT_NEAR(result[1], std::tanh(-1.0), 1e-3);
}

}  // namespace
}  // namespace kiln::kernels
