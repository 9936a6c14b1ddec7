// Element-wise unary math and activations: Abs ... HardSwish, Not, Elu, Selu, LeakyRelu,
// HardSigmoid, Gelu; typed functions and their registered adapters.

#include <kiln/kernels/kernels.h>
#include <kiln/kernels/test/tensor_helpers.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <numbers>
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
using ::testing::ElementsAre;
using ::testing::HasSubstr;

using Shape = std::vector<int64_t>;

// Runs registered op `op` on f32 `values` (shape [n]) and returns the outputs.
std::vector<float> run_f32(std::string_view op, const std::vector<float>& values,
                           const runtime::Attributes& attributes = runtime::Attributes()) {
  auto x = OwnedTensor::of<float>({static_cast<int64_t>(values.size())}, values);
  auto out = OwnedTensor::resizable(ScalarType::Float32, 1);
  EValue in(x.tensor()), result(out.tensor());
  Status status = run_kernel(op, {&in}, {&result}, attributes);
  EXPECT_TRUE(status.ok()) << status.message();
  return out.values<float>(static_cast<int64_t>(values.size()));
}

// Checks op `op` against `reference` (computed in double) on seeded random f32 data.
void expect_matches(std::string_view op, std::function<double(double)> reference, double lo = -3,
                    double hi = 3, const runtime::Attributes& attributes = runtime::Attributes()) {
  const auto values = test_helpers::random_values<float>(257, 7, lo, hi);
  const auto result = run_f32(op, values, attributes);
  for (size_t i = 0; i < values.size(); ++i) {
    const double expected = reference(values[i]);
    EXPECT_NEAR(result[i], expected, 2e-6 * std::max(1.0, std::fabs(expected)))
        << op << " at x = " << values[i];
  }
}

TEST(UnaryMath, FloatOpsMatchDoubleReference) {
  expect_matches("Abs", [](double x) { return std::fabs(x); });
  expect_matches("Neg", [](double x) { return -x; });
  expect_matches("Exp", [](double x) { return std::exp(x); });
  expect_matches(
      "Log", [](double x) { return std::log(x); }, 0.01, 10);
  expect_matches(
      "Sqrt", [](double x) { return std::sqrt(x); }, 0, 10);
  expect_matches(
      "Reciprocal", [](double x) { return 1 / x; }, 0.5, 4);
  expect_matches("Sin", [](double x) { return std::sin(x); });
  expect_matches("Cos", [](double x) { return std::cos(x); });
  expect_matches("Erf", [](double x) { return std::erf(x); });
  expect_matches("Softplus", [](double x) { return std::log(1 + std::exp(x)); });
  expect_matches(
      "HardSwish", [](double x) { return x * std::clamp(x / 6 + 0.5, 0.0, 1.0); }, -5, 5);
}

TEST(UnaryMath, RoundingOps) {
  const std::vector<float> x = {-2.5f, -1.5f, -0.4f, 0.5f, 1.5f, 2.5f, 2.6f};
  EXPECT_THAT(run_f32("Round", x), ElementsAre(-2, -2, -0.0f, 0, 2, 2, 3));
  EXPECT_THAT(run_f32("Floor", x), ElementsAre(-3, -2, -1, 0, 1, 2, 2));
  EXPECT_THAT(run_f32("Ceil", x), ElementsAre(-2, -1, -0.0f, 1, 2, 3, 3));
}

TEST(UnaryMath, SignKeepsZeroAndNan) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  auto result = run_f32("Sign", {-3, 0, 2, nan});
  EXPECT_EQ(result[0], -1);
  EXPECT_EQ(result[1], 0);
  EXPECT_EQ(result[2], 1);
  EXPECT_TRUE(std::isnan(result[3]));
}

TEST(UnaryMath, SoftplusDoesNotOverflow) {
  auto result = run_f32("Softplus", {100, -100});
  EXPECT_FLOAT_EQ(result[0], 100);
  EXPECT_NEAR(result[1], 0, 1e-30);
}

TEST(UnaryMath, IntegerAbsNegSignWrap) {
  const int32_t min = std::numeric_limits<int32_t>::min();
  auto x = OwnedTensor::of<int32_t>({4}, {-5, 0, 7, min});
  auto out = OwnedTensor::zeros(ScalarType::Int32, {4});
  ASSERT_TRUE(abs(x.tensor(), out.tensor()).ok());
  EXPECT_THAT(out.values<int32_t>(), ElementsAre(5, 0, 7, min));
  ASSERT_TRUE(neg(x.tensor(), out.tensor()).ok());
  EXPECT_THAT(out.values<int32_t>(), ElementsAre(5, 0, -7, min));
  auto x64 = OwnedTensor::of<int64_t>({3}, {-5, 0, 7});
  auto out64 = OwnedTensor::zeros(ScalarType::Int64, {3});
  ASSERT_TRUE(sign(x64.tensor(), out64.tensor()).ok());
  EXPECT_THAT(out64.values<int64_t>(), ElementsAre(-1, 0, 1));
}

TEST(UnaryMath, HalfPrecisionRoundsOnce) {
  for (ScalarType dtype : {ScalarType::Float16, ScalarType::BFloat16}) {
    auto x = OwnedTensor::half_of(dtype, {3}, {0, 1, -2});
    auto out = OwnedTensor::zeros(dtype, {3});
    ASSERT_TRUE(exp(x.tensor(), out.tensor()).ok());
    const auto result = out.half_values();
    EXPECT_EQ(result[0], 1);
    EXPECT_NEAR(result[1], std::exp(1.0), 0.02);
    EXPECT_NEAR(result[2], std::exp(-2.0), 0.002);
  }
}

TEST(UnaryMath, F64IsComputedInDouble) {
  auto x = OwnedTensor::of<double>({2}, {0.25, 4});
  auto out = OwnedTensor::zeros(ScalarType::Float64, {2});
  ASSERT_TRUE(sqrt(x.tensor(), out.tensor()).ok());
  EXPECT_THAT(out.values<double>(), ElementsAre(0.5, 2));
  ASSERT_TRUE(log(x.tensor(), out.tensor()).ok());
  EXPECT_DOUBLE_EQ(out.values<double>()[1], std::log(4.0));
}

TEST(UnaryMath, IntegerInputToFloatOpIsInvalidType) {
  auto x = OwnedTensor::of<int32_t>({2}, {1, 2});
  auto out = OwnedTensor::resizable(ScalarType::Int32, 1);
  EValue in(x.tensor()), result(out.tensor());
  Status status = run_kernel("Exp", {&in}, {&result});
  EXPECT_EQ(status.code(), Error::InvalidType);
  EXPECT_THAT(
      status.message(),
      HasSubstr("run kernel 'Exp': input 0 has dtype i32 (expected f32, f64, f16 or bf16)"));
}

TEST(UnaryMath, NotNegatesBools) {
  auto x = OwnedTensor::of<bool>({3}, {true, false, true});
  auto out = OwnedTensor::resizable(ScalarType::Bool, 1);
  EValue in(x.tensor()), result(out.tensor());
  ASSERT_TRUE(run_kernel("Not", {&in}, {&result}).ok());
  EXPECT_THAT(out.values<bool>(3), ElementsAre(false, true, false));
  auto f = OwnedTensor::of<float>({1}, {1});
  EValue in_f(f.tensor());
  Status status = run_kernel("Not", {&in_f}, {&result});
  EXPECT_EQ(status.code(), Error::InvalidType);
  EXPECT_THAT(status.message(), HasSubstr("input 0 has dtype f32 (expected bool)"));
}

// ---- Activations ------------------------------------------------------------------------------

TEST(Activation, EluUsesAlpha) {
  expect_matches("Elu", [](double x) { return x < 0 ? std::exp(x) - 1 : x; });
  expect_matches(
      "Elu", [](double x) { return x < 0 ? 0.5 * (std::exp(x) - 1) : x; }, -3, 3,
      attrs({{"alpha", 0.5}}));
}

TEST(Activation, SeluDefaultsAndAttributes) {
  const double a = 1.67326319217681884765625, g = 1.05070102214813232421875;
  expect_matches("Selu", [&](double x) { return x > 0 ? g * x : g * a * (std::exp(x) - 1); });
  expect_matches(
      "Selu", [](double x) { return x > 0 ? 3 * x : 3 * 2 * (std::exp(x) - 1); }, -3, 3,
      attrs({{"alpha", 2.0}, {"gamma", 3.0}}));
}

TEST(Activation, LeakyReluAndHardSigmoid) {
  EXPECT_THAT(run_f32("LeakyRelu", {-100, 0, 3}), ElementsAre(-1, 0, 3));
  EXPECT_THAT(run_f32("LeakyRelu", {-2, 3}, attrs({{"alpha", 0.5}})), ElementsAre(-1, 3));
  EXPECT_THAT(run_f32("HardSigmoid", {-10, 0, 1, 10}), ElementsAre(0, 0.5f, 0.7f, 1));
  EXPECT_THAT(run_f32("ThresholdedRelu", {-2, 1, 1.5f}), ElementsAre(0, 0, 1.5f));
  EXPECT_THAT(run_f32("ThresholdedRelu", {-2, 1, 1.5f}, attrs({{"alpha", -3.0}})),
              ElementsAre(-2, 1, 1.5f));
  // An int attribute reads as a double.
  EXPECT_THAT(run_f32("HardSigmoid", {-1, 0, 1}, attrs({{"alpha", 1}, {"beta", 0.25}})),
              ElementsAre(0, 0.25f, 1));
}

TEST(Activation, GeluExactAndTanh) {
  expect_matches("Gelu", [](double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); });
  expect_matches(
      "Gelu",
      [](double x) {
        const double k = std::sqrt(2 / std::numbers::pi);
        return 0.5 * x * (1 + std::tanh(k * (x + 0.044715 * x * x * x)));
      },
      -3, 3, attrs({{"approximate", "tanh"}}));
}

TEST(Activation, BadAttributesNameTheAttribute) {
  auto x = OwnedTensor::of<float>({1}, {1});
  auto out = OwnedTensor::resizable(ScalarType::Float32, 1);
  EValue in(x.tensor()), result(out.tensor());
  Status status = run_kernel("Gelu", {&in}, {&result}, attrs({{"approximate", "erf"}}));
  EXPECT_EQ(status.code(), Error::InvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("attribute 'approximate' is 'erf' (expected 'none' or"));
  status = run_kernel("Elu", {&in}, {&result}, attrs({{"alpha", "big"}}));
  EXPECT_EQ(status.code(), Error::InvalidType);
  EXPECT_THAT(status.message(), HasSubstr("run kernel 'Elu'"));
  EXPECT_THAT(status.message(), HasSubstr("alpha"));
}

}  // namespace
}  // namespace kiln::kernels
