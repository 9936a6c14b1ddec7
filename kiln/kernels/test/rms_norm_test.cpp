// RMSNormalization against hand values and a naive double-precision loop.

#include <kiln/kernels/kernels.h>
#include <kiln/kernels/test/tensor_helpers.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

namespace kiln::kernels {
namespace {

using runtime::Error;
using runtime::EValue;
using runtime::ScalarType;
using runtime::Status;
using test_helpers::attrs;
using test_helpers::OwnedTensor;
using test_helpers::run_kernel;
using test_helpers::sizes_of;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

using Shape = std::vector<int64_t>;

// Mean square 4 over {2, 2, -2, -2} and 25/2 over {5, 0, 0, 5} (epsilon 0): y = x / rms * scale.
TEST(RmsNorm, DividesByTheRootMeanSquareByHand) {
  auto x = OwnedTensor::of<float>({2, 4}, {2, 2, -2, -2, 5, 0, 0, 5});
  auto scale = OwnedTensor::of<float>({4}, {1, 2, 3, 4});
  auto out = OwnedTensor::zeros(ScalarType::Float32, {2, 4});
  RmsNormOptions options;
  options.epsilon = 0;
  ASSERT_TRUE(rms_norm(x.tensor(), scale.tensor(), options, out.tensor()).ok());
  const auto y = out.values<float>();
  EXPECT_THAT(std::vector<float>(y.begin(), y.begin() + 4), ElementsAre(1, 2, -3, -4));
  const double r = std::sqrt(12.5);
  EXPECT_NEAR(y[4], 5 / r, 1e-6);
  EXPECT_NEAR(y[5], 0, 1e-7);
  EXPECT_NEAR(y[7], 4 * 5 / r, 1e-6);
}

std::vector<double> reference_rms_norm(const Shape& shape, const std::vector<float>& x,
                                       const std::vector<float>& scale, int64_t axis,
                                       double epsilon) {
  int64_t inner = 1;
  for (size_t d = static_cast<size_t>(axis); d < shape.size(); ++d) inner *= shape[d];
  std::vector<double> out(x.size());
  for (size_t o = 0; o < x.size() / static_cast<size_t>(inner); ++o) {
    double squares = 0;
    for (int64_t j = 0; j < inner; ++j) squares += double{x[o * inner + j]} * x[o * inner + j];
    const double rms = std::sqrt(squares / static_cast<double>(inner) + epsilon);
    for (int64_t j = 0; j < inner; ++j) out[o * inner + j] = x[o * inner + j] / rms * scale[j];
  }
  return out;
}

class RmsNormAxisTest : public ::testing::TestWithParam<int64_t> {};

// Every axis of a [2, 3, 4] tensor through the registered kernel.
TEST_P(RmsNormAxisTest, MatchesDoubleReference) {
  const int64_t axis = GetParam();
  const int64_t normalized = axis < 0 ? axis + 3 : axis;
  const Shape shape = {2, 3, 4};
  const Shape norm_shape(shape.begin() + normalized, shape.end());
  const int64_t inner = test_helpers::numel_of(norm_shape);
  const auto xs = test_helpers::random_values<float>(24, 17, -3, 3);
  const auto ss = test_helpers::random_values<float>(static_cast<size_t>(inner), 18, 0.5, 2);
  auto x = OwnedTensor::of<float>(shape, xs);
  auto scale = OwnedTensor::of<float>(norm_shape, ss);
  auto out = OwnedTensor::resizable(ScalarType::Float32, 3);
  EValue in_x(x.tensor()), in_s(scale.tensor()), r_out(out.tensor());
  ASSERT_TRUE(run_kernel("RMSNormalization", {&in_x, &in_s}, {&r_out},
                         attrs({{"axis", EValue(axis)}, {"epsilon", EValue(1e-3)}}))
                  .ok());
  EXPECT_EQ(sizes_of(r_out), shape);
  const auto expected = reference_rms_norm(shape, xs, ss, normalized, 1e-3);
  const auto result = out.values<float>(24);
  for (size_t i = 0; i < expected.size(); ++i) EXPECT_NEAR(result[i], expected[i], 1e-5) << i;
}

INSTANTIATE_TEST_SUITE_P(Axes, RmsNormAxisTest, ::testing::Values(-3, -2, -1, 0, 1, 2),
                         [](const ::testing::TestParamInfo<int64_t>& info) {
                           return (info.param < 0 ? "minus" : "") +
                                  std::to_string(std::abs(info.param));
                         });

TEST(RmsNorm, BroadcastsScaleAndComputesFloat16InWiderPrecision) {
  auto x = OwnedTensor::half_of(ScalarType::Float16, {1, 4}, {1000, 1000, -1000, -1000});
  auto scale = OwnedTensor::half_of(ScalarType::Float16, {1}, {2});
  auto out = OwnedTensor::zeros(ScalarType::Float16, {1, 4});
  ASSERT_TRUE(rms_norm(x.tensor(), scale.tensor(), RmsNormOptions(), out.tensor()).ok());
  // 1000^2 overflows f16; the double mean of squares does not.
  EXPECT_THAT(out.half_values(), ElementsAre(2.0f, 2.0f, -2.0f, -2.0f));
}

TEST(RmsNorm, RejectsBadAxisScaleAndStashType) {
  auto x = OwnedTensor::of<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  auto scale = OwnedTensor::of<float>({2}, {1, 1});
  auto good_scale = OwnedTensor::of<float>({3}, {1, 1, 1});
  auto out = OwnedTensor::resizable(ScalarType::Float32, 2);
  EValue in_x(x.tensor()), in_s(scale.tensor()), in_good(good_scale.tensor()), r(out.tensor());

  Status status = run_kernel("RMSNormalization", {&in_x, &in_s}, {&r});
  EXPECT_EQ(status.code(), Error::InvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("input 1 (scale) has shape [2]"));
  EXPECT_EQ(sizes_of(r), (Shape{0, 0}));  // checked before anything was resized

  status = run_kernel("RMSNormalization", {&in_x, &in_good}, {&r}, attrs({{"axis", -3}}));
  EXPECT_EQ(status.code(), Error::InvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("attribute 'axis' is -3 (expected -2..1"));

  status = run_kernel("RMSNormalization", {&in_x, &in_good}, {&r}, attrs({{"stash_type", 10}}));
  EXPECT_EQ(status.code(), Error::NotSupported);
  EXPECT_THAT(status.message(), HasSubstr("'stash_type' is 10"));

  auto half_scale = OwnedTensor::half_of(ScalarType::Float16, {3}, {1, 1, 1});
  auto typed_out = OwnedTensor::zeros(ScalarType::Float32, {2, 3});
  status = rms_norm(x.tensor(), half_scale.tensor(), RmsNormOptions(), typed_out.tensor());
  EXPECT_EQ(status.code(), Error::InvalidType);
  EXPECT_THAT(status.message(), HasSubstr("input 1 (scale) has dtype f16"));
}

}  // namespace
}  // namespace kiln::kernels
