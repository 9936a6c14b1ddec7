// Cast, Shape, Size, ConstantOfShape, Range, Concat, Transpose, Squeeze and Unsqueeze.

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
using runtime::EValue;
using runtime::ScalarType;
using runtime::Status;
using runtime::Tensor;
using test_helpers::attrs;
using test_helpers::OwnedTensor;
using test_helpers::run_kernel;
using test_helpers::sizes_of;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

using Shape = std::vector<int64_t>;

// ---- Cast -------------------------------------------------------------------------------------

TEST(Cast, FloatToIntegersTruncatesAndSaturates) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  auto x = OwnedTensor::of<float>({5}, {2.7f, -2.7f, 1e10f, -1e10f, nan});
  auto out = OwnedTensor::resizable(ScalarType::Int32, 1);
  EValue in(x.tensor()), result(out.tensor());
  ASSERT_TRUE(run_kernel("Cast", {&in}, {&result}, attrs({{"to", 6}})).ok());
  EXPECT_THAT(out.values<int32_t>(5), ElementsAre(2, -2, std::numeric_limits<int32_t>::max(),
                                                  std::numeric_limits<int32_t>::min(), 0));
}

TEST(Cast, EveryOnnxTypeNumber) {
  const std::pair<int, ScalarType> cases[] = {
      {1, ScalarType::Float32},  {2, ScalarType::UInt8},    {3, ScalarType::Int8},
      {5, ScalarType::Int16},    {6, ScalarType::Int32},    {7, ScalarType::Int64},
      {9, ScalarType::Bool},     {10, ScalarType::Float16}, {11, ScalarType::Float64},
      {16, ScalarType::BFloat16}};
  auto x = OwnedTensor::of<int64_t>({3}, {0, 1, 3});
  for (const auto& [number, dtype] : cases) {
    EXPECT_EQ(*scalar_type_from_onnx(number), dtype);
    auto out = OwnedTensor::resizable(dtype, 1);
    EValue in(x.tensor()), result(out.tensor());
    ASSERT_TRUE(run_kernel("Cast", {&in}, {&result}, attrs({{"to", number}})).ok()) << number;
    // Cast back to i64 to compare.
    auto back = OwnedTensor::zeros(ScalarType::Int64, {3});
    ASSERT_TRUE(cast(result.to_tensor(), back.tensor()).ok());
    const int64_t three = dtype == ScalarType::Bool ? 1 : 3;
    EXPECT_THAT(back.values<int64_t>(), ElementsAre(0, 1, three)) << number;
  }
}

TEST(Cast, IntegersWrapAndHalvesRound) {
  auto x = OwnedTensor::of<int32_t>({2}, {300, -1});
  auto out = OwnedTensor::zeros(ScalarType::UInt8, {2});
  ASSERT_TRUE(cast(x.tensor(), out.tensor()).ok());
  EXPECT_THAT(out.values<uint8_t>(), ElementsAre(44, 255));
  auto f = OwnedTensor::of<double>({2}, {1.0 / 3, 65504});
  auto h = OwnedTensor::zeros(ScalarType::Float16, {2});
  ASSERT_TRUE(cast(f.tensor(), h.tensor()).ok());
  EXPECT_NEAR(h.half_values()[0], 1.0 / 3, 1e-3);
  EXPECT_EQ(h.half_values()[1], 65504);
}

TEST(Cast, BadTargetNamesTheAttribute) {
  auto x = OwnedTensor::of<float>({1}, {1});
  auto out = OwnedTensor::resizable(ScalarType::Float32, 1);
  EValue in(x.tensor()), result(out.tensor());
  Status status = run_kernel("Cast", {&in}, {&result}, attrs({{"to", 8}}));
  EXPECT_EQ(status.code(), Error::InvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("run kernel 'Cast': attribute 'to' is 8 (expected"));
  status = run_kernel("Cast", {&in}, {&result});
  EXPECT_EQ(status.code(), Error::InvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("attribute 'to' is missing"));
  status = run_kernel("Cast", {&in}, {&result}, attrs({{"to", 7}}));
  EXPECT_EQ(status.code(), Error::InvalidType);
  EXPECT_THAT(status.message(), HasSubstr("output 0 has dtype f32 (expected i64)"));
}

TEST(CastLike, TakesTheDtypeOfInput1) {
  auto x = OwnedTensor::of<float>({2}, {1.9f, -3});
  auto like = OwnedTensor::of<int64_t>({0}, {});
  auto out = OwnedTensor::resizable(ScalarType::Int64, 1);
  EValue in(x.tensor()), in_like(like.tensor()), result(out.tensor());
  ASSERT_TRUE(run_kernel("CastLike", {&in, &in_like}, {&result}).ok());
  EXPECT_THAT(out.values<int64_t>(2), ElementsAre(1, -3));
  auto wrong = OwnedTensor::resizable(ScalarType::Int32, 1);
  EValue wrong_result(wrong.tensor());
  Status status = run_kernel("CastLike", {&in, &in_like}, {&wrong_result});
  EXPECT_EQ(status.code(), Error::InvalidType);
  EXPECT_THAT(status.message(), HasSubstr("output 0 has dtype i32 (expected i64)"));
}

// ---- Shape, Size, ConstantOfShape, Range ------------------------------------------------------

TEST(Shape, StartAndEndClamp) {
  auto x = OwnedTensor::zeros(ScalarType::Float32, {2, 3, 4});
  auto out = OwnedTensor::resizable(ScalarType::Int64, 1);
  EValue in(x.tensor()), result(out.tensor());
  ASSERT_TRUE(run_kernel("Shape", {&in}, {&result}).ok());
  EXPECT_THAT(out.values<int64_t>(3), ElementsAre(2, 3, 4));
  ASSERT_TRUE(run_kernel("Shape", {&in}, {&result}, attrs({{"start", -2}})).ok());
  EXPECT_EQ(sizes_of(result), (Shape{2}));
  EXPECT_THAT(out.values<int64_t>(2), ElementsAre(3, 4));
  ASSERT_TRUE(run_kernel("Shape", {&in}, {&result}, attrs({{"start", 1}, {"end", -1}})).ok());
  EXPECT_THAT(out.values<int64_t>(1), ElementsAre(3));
  ASSERT_TRUE(run_kernel("Shape", {&in}, {&result}, attrs({{"start", 5}, {"end", 100}})).ok());
  EXPECT_EQ(sizes_of(result), (Shape{0}));
}

TEST(Size, CountsElements) {
  auto x = OwnedTensor::zeros(ScalarType::Int8, {2, 3, 4});
  auto out = OwnedTensor::resizable(ScalarType::Int64, 0);
  EValue in(x.tensor()), result(out.tensor());
  ASSERT_TRUE(run_kernel("Size", {&in}, {&result}).ok());
  EXPECT_THAT(out.values<int64_t>(1), ElementsAre(24));
}

TEST(ConstantOfShape, ValueOrFloatZero) {
  auto shape = OwnedTensor::of<int64_t>({2}, {2, 3});
  auto value = OwnedTensor::of<int32_t>({1}, {7});
  auto out = OwnedTensor::resizable(ScalarType::Int32, 2);
  EValue in(shape.tensor()), result(out.tensor());
  ASSERT_TRUE(
      run_kernel("ConstantOfShape", {&in}, {&result}, attrs({{"value", EValue(value.tensor())}}))
          .ok());
  EXPECT_EQ(sizes_of(result), (Shape{2, 3}));
  EXPECT_THAT(out.values<int32_t>(6), ElementsAre(7, 7, 7, 7, 7, 7));
  auto fout = OwnedTensor::resizable(ScalarType::Float32, 2);
  EValue fresult(fout.tensor());
  ASSERT_TRUE(run_kernel("ConstantOfShape", {&in}, {&fresult}).ok());
  EXPECT_THAT(fout.values<float>(6), ElementsAre(0, 0, 0, 0, 0, 0));
  // The output's dtype must be the value's.
  Status status =
      run_kernel("ConstantOfShape", {&in}, {&fresult}, attrs({{"value", EValue(value.tensor())}}));
  EXPECT_EQ(status.code(), Error::InvalidType);
  EXPECT_THAT(status.message(), HasSubstr("output 0 has dtype f32 (expected i32)"));
}

TEST(Range, IntegerAndFloatLengths) {
  auto run_range = [](auto start, auto limit, auto delta, ScalarType dtype) {
    using T = decltype(start);
    auto s = OwnedTensor::of<T>({}, {start});
    auto l = OwnedTensor::of<T>({}, {limit});
    auto d = OwnedTensor::of<T>({}, {delta});
    auto out = OwnedTensor::resizable(dtype, 1);
    EValue in_s(s.tensor()), in_l(l.tensor()), in_d(d.tensor()), result(out.tensor());
    Status status = run_kernel("Range", {&in_s, &in_l, &in_d}, {&result});
    EXPECT_TRUE(status.ok()) << status.message();
    return out.values<T>(sizes_of(result)[0]);
  };
  EXPECT_THAT(run_range(int64_t{3}, int64_t{9}, int64_t{3}, ScalarType::Int64), ElementsAre(3, 6));
  EXPECT_THAT(run_range(int32_t{10}, int32_t{4}, int32_t{-3}, ScalarType::Int32),
              ElementsAre(10, 7));
  EXPECT_THAT(run_range(int32_t{1}, int32_t{1}, int32_t{1}, ScalarType::Int32), ElementsAre());
  EXPECT_THAT(run_range(1.0f, 2.0f, 0.25f, ScalarType::Float32),
              ElementsAre(1, 1.25f, 1.5f, 1.75f));
  EXPECT_THAT(run_range(0.0, -1.0, -0.4, ScalarType::Float64), ElementsAre(0, -0.4, -0.8));
}

TEST(Range, ZeroDeltaAndMixedDtypesAreErrors) {
  auto s = OwnedTensor::of<int64_t>({}, {0});
  auto d = OwnedTensor::of<int64_t>({}, {0});
  auto f = OwnedTensor::of<float>({}, {1});
  auto out = OwnedTensor::resizable(ScalarType::Int64, 1);
  EValue in_s(s.tensor()), in_d(d.tensor()), in_f(f.tensor()), result(out.tensor());
  Status status = run_kernel("Range", {&in_s, &in_s, &in_d}, {&result});
  EXPECT_EQ(status.code(), Error::InvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("input 2 (delta) is 0"));
  status = run_kernel("Range", {&in_s, &in_f, &in_d}, {&result});
  EXPECT_EQ(status.code(), Error::InvalidType);
  EXPECT_THAT(status.message(), HasSubstr("input 1 (limit) has dtype f32 (expected i64"));
}

// ---- Concat, Transpose ------------------------------------------------------------------------

TEST(Concat, JoinsAlongAnyAxis) {
  auto a = OwnedTensor::of<float>({2, 2}, {1, 2, 3, 4});
  auto b = OwnedTensor::of<float>({2, 1}, {5, 6});
  auto out = OwnedTensor::resizable(ScalarType::Float32, 2);
  EValue in_a(a.tensor()), in_b(b.tensor()), result(out.tensor());
  ASSERT_TRUE(run_kernel("Concat", {&in_a, &in_b}, {&result}, attrs({{"axis", -1}})).ok());
  EXPECT_EQ(sizes_of(result), (Shape{2, 3}));
  EXPECT_THAT(out.values<float>(6), ElementsAre(1, 2, 5, 3, 4, 6));
  ASSERT_TRUE(run_kernel("Concat", {&in_a, &in_a}, {&result}, attrs({{"axis", 0}})).ok());
  EXPECT_EQ(sizes_of(result), (Shape{4, 2}));
  EXPECT_THAT(out.values<float>(8), ElementsAre(1, 2, 3, 4, 1, 2, 3, 4));
}

TEST(Concat, MismatchedShapeNamesTheInput) {
  auto a = OwnedTensor::of<float>({2, 2}, {1, 2, 3, 4});
  auto b = OwnedTensor::of<float>({2, 1}, {5, 6});
  auto out = OwnedTensor::resizable(ScalarType::Float32, 2);
  EValue in_a(a.tensor()), in_b(b.tensor()), result(out.tensor());
  Status status = run_kernel("Concat", {&in_a, &in_b}, {&result}, attrs({{"axis", 0}}));
  EXPECT_EQ(status.code(), Error::InvalidArgument);
  EXPECT_THAT(status.message(),
              HasSubstr("run kernel 'Concat': input 1 has shape [2, 1] (expected the shape of "
                        "input 0, [2, 2], except along axis 0)"));
  status = run_kernel("Concat", {&in_a, &in_b}, {&result}, attrs({{"axis", 2}}));
  EXPECT_THAT(status.message(), HasSubstr("attribute 'axis' is 2 (expected -2..1"));
  status = run_kernel("Concat", {&in_a, &in_b}, {&result});
  EXPECT_THAT(status.message(), HasSubstr("attribute 'axis' is missing"));
}

TEST(Transpose, PermAndDefaultReversal) {
  std::vector<int32_t> values(24);
  for (int i = 0; i < 24; ++i) values[i] = i;
  auto x = OwnedTensor::of<int32_t>({2, 3, 4}, values);
  auto out = OwnedTensor::resizable(ScalarType::Int32, 3);
  EValue in(x.tensor()), result(out.tensor());
  ASSERT_TRUE(run_kernel("Transpose", {&in}, {&result}, attrs({{"perm", Shape{1, 2, 0}}})).ok());
  EXPECT_EQ(sizes_of(result), (Shape{3, 4, 2}));
  auto moved = out.values<int32_t>(24);
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 4; ++j) {
      for (int k = 0; k < 2; ++k) {
        EXPECT_EQ(moved[(i * 4 + j) * 2 + k], values[(k * 3 + i) * 4 + j]);
      }
    }
  }
  ASSERT_TRUE(run_kernel("Transpose", {&in}, {&result}).ok());
  EXPECT_EQ(sizes_of(result), (Shape{4, 3, 2}));
  EXPECT_EQ(out.values<int32_t>(24)[1], values[12]);  // out[0][0][1] = x[1][0][0]
  Status status = run_kernel("Transpose", {&in}, {&result}, attrs({{"perm", Shape{0, 0, 1}}}));
  EXPECT_EQ(status.code(), Error::InvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("attribute 'perm' is [0, 0, 1] (expected a permutation"));
}

// Transposes of every dimension order of a 3-D tensor and the attention transposes of a 4-D
// one (odd sizes) against the index definition, for elements of 1, 4 and 8 bytes.
template <class T>
void expect_transposes_match_the_definition(ScalarType dtype) {
  const std::vector<std::pair<Shape, std::vector<Shape>>> cases = {
      {{3, 37, 45}, {{0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}}},
      {{1, 4, 130, 33}, {{0, 1, 3, 2}, {0, 2, 1, 3}, {3, 2, 1, 0}, {0, 2, 3, 1}}},
      {{70, 20}, {{1, 0}}}};
  for (const auto& [shape, perms] : cases) {
    int64_t numel = 1;
    for (int64_t d : shape) numel *= d;
    std::vector<T> values(static_cast<size_t>(numel));
    for (int64_t i = 0; i < numel; ++i) values[static_cast<size_t>(i)] = static_cast<T>(i * 7 + 3);
    auto x = OwnedTensor::of<T>(shape, values);
    for (const Shape& perm : perms) {
      SCOPED_TRACE(runtime::shape_to_string(shape) + " perm " + runtime::shape_to_string(perm));
      auto out = OwnedTensor::resizable(dtype, shape.size(), static_cast<size_t>(numel));
      EValue in(x.tensor()), result(out.tensor());
      Status status = run_kernel("Transpose", {&in}, {&result}, attrs({{"perm", perm}}));
      ASSERT_TRUE(status.ok()) << status.to_string();
      Shape out_shape(shape.size()), in_strides(shape.size(), 1);
      for (size_t d = shape.size() - 1; d-- > 0;) in_strides[d] = in_strides[d + 1] * shape[d + 1];
      for (size_t d = 0; d < shape.size(); ++d) out_shape[d] = shape[static_cast<size_t>(perm[d])];
      ASSERT_EQ(sizes_of(result), out_shape);
      auto moved = out.template values<T>(numel);
      int wrong = 0;
      for (int64_t o = 0; o < numel && wrong < 3; ++o) {
        int64_t rest = o, at = 0;
        for (size_t d = out_shape.size(); d-- > 0;) {
          at += (rest % out_shape[d]) * in_strides[static_cast<size_t>(perm[d])];
          rest /= out_shape[d];
        }
        if (moved[static_cast<size_t>(o)] != values[static_cast<size_t>(at)]) {
          ADD_FAILURE() << "output element " << o << " (expected input element " << at << ")";
          ++wrong;
        }
      }
    }
  }
}

TEST(Transpose, LargeTransposesMatchTheIndexDefinition) {
  expect_transposes_match_the_definition<uint8_t>(ScalarType::UInt8);
  expect_transposes_match_the_definition<int32_t>(ScalarType::Int32);
  expect_transposes_match_the_definition<int64_t>(ScalarType::Int64);
}

// ---- Squeeze, Unsqueeze -----------------------------------------------------------------------

TEST(Squeeze, AxesFromInputAttributeOrAllOnes) {
  auto x = OwnedTensor::of<float>({1, 2, 1}, {5, 6});
  auto axes = OwnedTensor::of<int64_t>({1}, {-1});
  auto out = OwnedTensor::resizable(ScalarType::Float32, 2);
  EValue in(x.tensor()), in_axes(axes.tensor()), result(out.tensor());
  ASSERT_TRUE(run_kernel("Squeeze", {&in, &in_axes}, {&result}).ok());
  EXPECT_EQ(sizes_of(result), (Shape{1, 2}));
  EXPECT_THAT(out.values<float>(2), ElementsAre(5, 6));
  ASSERT_TRUE(run_kernel("Squeeze", {&in}, {&result}, attrs({{"axes", Shape{0}}})).ok());
  EXPECT_EQ(sizes_of(result), (Shape{2, 1}));
  auto flat = OwnedTensor::resizable(ScalarType::Float32, 1);
  EValue flat_result(flat.tensor());
  ASSERT_TRUE(run_kernel("Squeeze", {&in}, {&flat_result}).ok());
  EXPECT_EQ(sizes_of(flat_result), (Shape{2}));
  Status status = run_kernel("Squeeze", {&in}, {&result}, attrs({{"axes", Shape{1}}}));
  EXPECT_EQ(status.code(), Error::InvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("axis 1 of input 0 of shape [1, 2, 1] has size 2 "
                                          "(expected 1)"));
}

TEST(Unsqueeze, AxesIndexTheOutput) {
  EXPECT_EQ(*unsqueeze_shape(Shape{3, 4}, {0, -1}), (Shape{1, 3, 4, 1}));
  EXPECT_EQ(*unsqueeze_shape(Shape{3, 4}, {2, 0}), (Shape{1, 3, 1, 4}));
  EXPECT_EQ(*unsqueeze_shape(Shape{}, {0}), (Shape{1}));
  auto x = OwnedTensor::of<int64_t>({2}, {8, 9});
  auto axes = OwnedTensor::of<int32_t>({1}, {1});
  auto out = OwnedTensor::resizable(ScalarType::Int64, 2);
  EValue in(x.tensor()), in_axes(axes.tensor()), result(out.tensor()), none;
  ASSERT_TRUE(run_kernel("Unsqueeze", {&in, &in_axes}, {&result}).ok());
  EXPECT_EQ(sizes_of(result), (Shape{2, 1}));
  EXPECT_THAT(out.values<int64_t>(2), ElementsAre(8, 9));
  Status status = run_kernel("Unsqueeze", {&in, &none}, {&result});
  EXPECT_EQ(status.code(), Error::InvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("axes are missing"));
  status = run_kernel("Unsqueeze", {&in}, {&result}, attrs({{"axes", Shape{2}}}));
  EXPECT_EQ(status.code(), Error::InvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("have 2 (expected -2..1)"));
  status = run_kernel("Unsqueeze", {&in}, {&result}, attrs({{"axes", Shape{0, -3}}}));
  EXPECT_THAT(status.message(), HasSubstr("repeat axis 0"));
}

}  // namespace
}  // namespace kiln::kernels
