// Softmax, opset-13 semantics: normalized over one axis, stable for large logits.

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
using ::testing::HasSubstr;

using Shape = std::vector<int64_t>;

// Reference softmax along `axis` of a row-major tensor of `shape`, in double.
std::vector<double> reference_softmax(const Shape& shape, const std::vector<double>& x,
                                      int64_t axis) {
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= shape[d];
  for (size_t d = static_cast<size_t>(axis) + 1; d < shape.size(); ++d) inner *= shape[d];
  const int64_t n = shape[static_cast<size_t>(axis)];
  std::vector<double> out(x.size());
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      double max = -INFINITY, sum = 0;
      for (int64_t j = 0; j < n; ++j) max = std::max(max, x[(o * n + j) * inner + i]);
      for (int64_t j = 0; j < n; ++j) sum += std::exp(x[(o * n + j) * inner + i] - max);
      for (int64_t j = 0; j < n; ++j) {
        out[(o * n + j) * inner + i] = std::exp(x[(o * n + j) * inner + i] - max) / sum;
      }
    }
  }
  return out;
}

class SoftmaxAxisTest : public ::testing::TestWithParam<int64_t> {};

// Every axis of a [2, 3, 4] tensor, given as negative and non-negative values.
TEST_P(SoftmaxAxisTest, SumsToOneAlongTheAxisAndMatchesDoubleReference) {
  const int64_t axis = GetParam();
  const int64_t normalized = axis < 0 ? axis + 3 : axis;
  const Shape shape = {2, 3, 4};
  const auto values = test_helpers::random_values<float>(24, 21, -4, 4);
  auto x = OwnedTensor::of<float>(shape, values);
  auto out = OwnedTensor::zeros(ScalarType::Float32, shape);
  ASSERT_TRUE(softmax(x.tensor(), axis, out.tensor()).ok());
  const auto result = out.values<float>();

  const auto expected =
      reference_softmax(shape, std::vector<double>(values.begin(), values.end()), normalized);
  for (size_t i = 0; i < expected.size(); ++i) EXPECT_NEAR(result[i], expected[i], 1e-6) << i;

  // Sum along the axis: every line of the axis adds up to 1.
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < normalized; ++d) outer *= shape[d];
  for (int64_t d = normalized + 1; d < 3; ++d) inner *= shape[d];
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      double sum = 0;
      for (int64_t j = 0; j < shape[normalized]; ++j) {
        sum += result[(o * shape[normalized] + j) * inner + i];
      }
      EXPECT_NEAR(sum, 1.0, 1e-6);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Axes, SoftmaxAxisTest, ::testing::Values(-3, -2, -1, 0, 1, 2),
                         [](const ::testing::TestParamInfo<int64_t>& info) {
                           return (info.param < 0 ? "minus" : "") +
                                  std::to_string(std::abs(info.param));
                         });

TEST(Softmax, LargeLogitsDoNotOverflow) {
  auto x = OwnedTensor::of<float>({1, 3}, {1000, 1001, 1002});
  auto out = OwnedTensor::zeros(ScalarType::Float32, {1, 3});
  ASSERT_TRUE(softmax(x.tensor(), -1, out.tensor()).ok());
  const auto expected = reference_softmax({1, 3}, {0, 1, 2}, 1);  // shift-invariant
  const auto result = out.values<float>();
  for (size_t i = 0; i < 3; ++i) EXPECT_NEAR(result[i], expected[i], 1e-6);
}

// Attention masks: logits of -1e9 or -inf far below the row's max give exactly 0, and the
// others the softmax of the unmasked logits alone.
TEST(Softmax, MaskedLogitsAreZeroAndTheRestSumToOne) {
  const float inf = std::numeric_limits<float>::infinity();
  auto x = OwnedTensor::of<float>({2, 4}, {0.5f, -1e9f, 1.5f, -inf, -90.0f, 2.0f, -1e9f, 2.0f});
  auto out = OwnedTensor::zeros(ScalarType::Float32, {2, 4});
  ASSERT_TRUE(softmax(x.tensor(), -1, out.tensor()).ok());
  const auto result = out.values<float>();
  const auto first = reference_softmax({1, 2}, {0.5, 1.5}, 1);
  EXPECT_NEAR(result[0], first[0], 1e-6);
  EXPECT_EQ(result[1], 0.0f);
  EXPECT_NEAR(result[2], first[1], 1e-6);
  EXPECT_EQ(result[3], 0.0f);
  EXPECT_EQ(result[4], 0.0f);  // 92 below the max: under float's normal range
  EXPECT_NEAR(result[5], 0.5f, 1e-6);
  EXPECT_EQ(result[6], 0.0f);
  EXPECT_NEAR(result[7], 0.5f, 1e-6);
}

TEST(Softmax, Float64MatchesReferenceClosely) {
  const auto values = test_helpers::random_values<double>(30, 22, -10, 10);
  auto x = OwnedTensor::of<double>({5, 6}, values);
  auto out = OwnedTensor::zeros(ScalarType::Float64, {5, 6});
  ASSERT_TRUE(softmax(x.tensor(), 1, out.tensor()).ok());
  const auto expected = reference_softmax({5, 6}, values, 1);
  const auto result = out.values<double>();
  for (size_t i = 0; i < expected.size(); ++i) EXPECT_NEAR(result[i], expected[i], 1e-14);
}

TEST(Softmax, HalfSumsToOne) {
  auto x = OwnedTensor::half_of(ScalarType::Float16, {4}, {0.5f, -1, 2, 0});
  auto out = OwnedTensor::zeros(ScalarType::Float16, {4});
  ASSERT_TRUE(softmax(x.tensor(), 0, out.tensor()).ok());
  double sum = 0;
  for (float value : out.half_values()) sum += value;
  EXPECT_NEAR(sum, 1.0, 2e-3);
}

TEST(Softmax, MayRunInPlace) {
  auto x = OwnedTensor::of<float>({2}, {0, 0});
  ASSERT_TRUE(softmax(x.tensor(), -1, x.tensor()).ok());
  EXPECT_THAT(x.values<float>(), ::testing::ElementsAre(0.5f, 0.5f));
}

TEST(Softmax, AxisOutOfRangeNamesTheAttribute) {
  auto x = OwnedTensor::of<float>({2, 2}, {1, 2, 3, 4});
  auto out = OwnedTensor::zeros(ScalarType::Float32, {2, 2});
  auto status = softmax(x.tensor(), 2, out.tensor());
  EXPECT_EQ(status.code(), Error::InvalidArgument);
  EXPECT_THAT(status.message(),
              HasSubstr("run kernel 'Softmax': attribute 'axis' is 2 (expected -2..1 for input "
                        "0 of rank 2)"));
  EXPECT_EQ(softmax(x.tensor(), -3, out.tensor()).code(), Error::InvalidArgument);
}

TEST(Softmax, RejectsRankZero) {
  auto x = OwnedTensor::of<float>({}, {1});
  auto out = OwnedTensor::zeros(ScalarType::Float32, {});
  auto status = softmax(x.tensor(), -1, out.tensor());
  EXPECT_EQ(status.code(), Error::InvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("input 0 has rank 0"));
}

TEST(LogSoftmax, MatchesDoubleReferenceAndStaysFinite) {
  const auto values = test_helpers::random_values<float>(12, 5, -4, 4);
  auto x = OwnedTensor::of<float>({3, 4}, values);
  auto out = OwnedTensor::resizable(ScalarType::Float32, 2);
  runtime::EValue in(x.tensor()), result(out.tensor());
  ASSERT_TRUE(
      test_helpers::run_kernel("LogSoftmax", {&in}, {&result}, test_helpers::attrs({{"axis", 0}}))
          .ok());
  const auto logs = out.values<float>(12);
  for (int j = 0; j < 4; ++j) {
    double sum = 0;
    for (int i = 0; i < 3; ++i) sum += std::exp(double(values[i * 4 + j]));
    for (int i = 0; i < 3; ++i) {
      EXPECT_NEAR(logs[i * 4 + j], values[i * 4 + j] - std::log(sum), 1e-5);
    }
  }
  // Far below the max, softmax underflows to 0 but its log stays finite.
  auto wide = OwnedTensor::of<float>({2}, {0, -200});
  auto wide_out = OwnedTensor::zeros(ScalarType::Float32, {2});
  ASSERT_TRUE(log_softmax(wide.tensor(), -1, wide_out.tensor()).ok());
  EXPECT_NEAR(wide_out.values<float>()[1], -200, 1e-4);
}

}  // namespace
}  // namespace kiln::kernels
