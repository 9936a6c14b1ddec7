// Broadcast binary ops beyond Add..Div: Pow, Mod, PRelu, comparisons, logic, the variadic
// Max/Min/Sum/Mean, Where and Clip.

#include <kiln/kernels/kernels.h>
#include <kiln/kernels/test/tensor_helpers.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
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

// Runs `op` on tensors `a` and `b` into a resizable output of `out_dtype`.
struct BinaryRun {
  Status status;
  OwnedTensor out;
  Shape shape;
};
BinaryRun run_binary(std::string_view op, const OwnedTensor& a, const OwnedTensor& b,
                     ScalarType out_dtype, const runtime::Attributes& attributes = {}) {
  const auto rank = static_cast<size_t>(std::max(a.tensor().dim(), b.tensor().dim()));
  auto out = OwnedTensor::resizable(out_dtype, rank);
  EValue in_a(a.tensor()), in_b(b.tensor()), result(out.tensor());
  Status status = run_kernel(op, {&in_a, &in_b}, {&result}, attributes);
  Shape shape = status.ok() ? sizes_of(result) : Shape{};
  return {status, std::move(out), shape};
}

TEST(Pow, FloatMatchesDoubleLoopWithBroadcast) {
  auto base_values = test_helpers::random_values<float>(12, 3, 0.1, 3);
  auto a = OwnedTensor::of<float>({4, 3}, base_values);
  auto b = OwnedTensor::of<float>({3}, {2, 0.5f, -1.5f});
  auto run = run_binary("Pow", a, b, ScalarType::Float32);
  ASSERT_TRUE(run.status.ok()) << run.status.message();
  EXPECT_EQ(run.shape, (Shape{4, 3}));
  const double exponents[3] = {2, 0.5, -1.5};
  auto result = run.out.values<float>(12);
  for (int i = 0; i < 12; ++i) {
    EXPECT_NEAR(result[i], std::pow(double(base_values[i]), exponents[i % 3]), 1e-5);
  }
}

TEST(Pow, IntegersAreExact) {
  auto a = OwnedTensor::of<int64_t>({5}, {3, -2, 2, 1, -1});
  auto b = OwnedTensor::of<int64_t>({5}, {4, 3, -1, -5, -3});
  auto run = run_binary("Pow", a, b, ScalarType::Int64);
  ASSERT_TRUE(run.status.ok());
  EXPECT_THAT(run.out.values<int64_t>(5), ElementsAre(81, -8, 0, 1, -1));
}

TEST(Pow, FloatBaseWithExponentOfAnotherDtype) {
  auto a = OwnedTensor::of<float>({3}, {2, 3, 0.5f});
  auto b = OwnedTensor::of<int64_t>({}, {2});
  auto run = run_binary("Pow", a, b, ScalarType::Float32);
  ASSERT_TRUE(run.status.ok()) << run.status.message();
  EXPECT_THAT(run.out.values<float>(3), ElementsAre(4, 9, 0.25f));
  auto h = OwnedTensor::half_of(ScalarType::Float16, {2}, {4, 9});
  auto half_exponent = OwnedTensor::of<double>({1}, {0.5});
  run = run_binary("Pow", h, half_exponent, ScalarType::Float16);
  ASSERT_TRUE(run.status.ok()) << run.status.message();
  const auto bits = run.out.values<uint16_t>(2);
  EXPECT_EQ(runtime::half_to_float(bits[0]), 2);
  EXPECT_EQ(runtime::half_to_float(bits[1]), 3);
  auto i = OwnedTensor::of<int32_t>({2}, {2, 3});
  auto f = OwnedTensor::of<float>({2}, {3, 0.5f});
  run = run_binary("Pow", i, f, ScalarType::Int32);
  ASSERT_TRUE(run.status.ok()) << run.status.message();
  EXPECT_THAT(run.out.values<int32_t>(2), ElementsAre(8, 1));  // sqrt(3) truncates
  auto u = OwnedTensor::of<uint8_t>({1}, {2});
  run = run_binary("Pow", i, u, ScalarType::Int32);
  EXPECT_EQ(run.status.code(), Error::InvalidType);
  EXPECT_THAT(run.status.message(),
              HasSubstr("run kernel 'Pow': input 1 has dtype u8 (expected f32, f64, f16, bf16"));
}

TEST(Mod, IntegerSignFollowsDivisorUnlessFmod) {
  auto a = OwnedTensor::of<int32_t>({4}, {7, -7, 7, -7});
  auto b = OwnedTensor::of<int32_t>({4}, {3, 3, -3, -3});
  auto run = run_binary("Mod", a, b, ScalarType::Int32);
  ASSERT_TRUE(run.status.ok());
  EXPECT_THAT(run.out.values<int32_t>(4), ElementsAre(1, 2, -2, -1));
  run = run_binary("Mod", a, b, ScalarType::Int32, attrs({{"fmod", 1}}));
  ASSERT_TRUE(run.status.ok());
  EXPECT_THAT(run.out.values<int32_t>(4), ElementsAre(1, -1, 1, -1));
}

TEST(Mod, FloatFmod) {
  auto a = OwnedTensor::of<float>({3}, {5.5f, -5.5f, 4});
  auto b = OwnedTensor::of<float>({}, {2});
  auto run = run_binary("Mod", a, b, ScalarType::Float32, attrs({{"fmod", 1}}));
  ASSERT_TRUE(run.status.ok());
  EXPECT_THAT(run.out.values<float>(3), ElementsAre(1.5f, -1.5f, 0));
  run = run_binary("Mod", a, b, ScalarType::Float32);
  EXPECT_THAT(run.out.values<float>(3), ElementsAre(1.5f, 0.5f, 0));
}

TEST(Mod, ErrorsNameTheCulprit) {
  auto a = OwnedTensor::of<int32_t>({2}, {1, 2});
  auto b = OwnedTensor::of<int32_t>({2}, {1, 0});
  auto run = run_binary("Mod", a, b, ScalarType::Int32);
  EXPECT_EQ(run.status.code(), Error::InvalidArgument);
  EXPECT_THAT(run.status.message(), HasSubstr("run kernel 'Mod': input 1 has 0 at element 1"));
  run = run_binary("Mod", a, a, ScalarType::Int32, attrs({{"fmod", 2}}));
  EXPECT_EQ(run.status.code(), Error::InvalidArgument);
  EXPECT_THAT(run.status.message(), HasSubstr("attribute 'fmod' is 2 (expected 0 or 1)"));
}

TEST(PRelu, SlopePerChannel) {
  auto x = OwnedTensor::of<float>({1, 2, 2}, {-1, 2, -3, 4});
  auto slope = OwnedTensor::of<float>({2, 1}, {0.5f, 0.25f});
  auto run = run_binary("PRelu", x, slope, ScalarType::Float32);
  ASSERT_TRUE(run.status.ok());
  EXPECT_EQ(run.shape, (Shape{1, 2, 2}));
  EXPECT_THAT(run.out.values<float>(4), ElementsAre(-0.5f, 2, -0.75f, 4));
  // The slope broadcasts to x, never x to the slope.
  auto wide = OwnedTensor::of<float>({2, 2, 2}, std::vector<float>(8, 1));
  run = run_binary("PRelu", x, wide, ScalarType::Float32);
  EXPECT_EQ(run.status.code(), Error::InvalidArgument);
  EXPECT_THAT(run.status.message(), HasSubstr("input 1 (slope) has shape [2, 2, 2]"));
}

// ---- Comparisons and logic --------------------------------------------------------------------

TEST(Compare, EveryOperatorBroadcasts) {
  auto a = OwnedTensor::of<float>({2, 2}, {1, 2, 3, 4});
  auto b = OwnedTensor::of<float>({2}, {2, 3});
  const std::pair<const char*, std::vector<bool>> cases[] = {
      {"Equal", {false, false, false, false}},
      {"Greater", {false, false, true, true}},
      {"Less", {true, true, false, false}},
      {"GreaterOrEqual", {false, false, true, true}},
      {"LessOrEqual", {true, true, false, false}}};
  for (const auto& [op, expected] : cases) {
    auto run = run_binary(op, a, b, ScalarType::Bool);
    ASSERT_TRUE(run.status.ok()) << op << ": " << run.status.message();
    EXPECT_EQ(run.shape, (Shape{2, 2}));
    EXPECT_EQ(run.out.values<bool>(4), expected) << op;
  }
  auto c = OwnedTensor::of<float>({2}, {2, 2});
  auto run = run_binary("GreaterOrEqual", a, c, ScalarType::Bool);
  EXPECT_THAT(run.out.values<bool>(4), ElementsAre(false, true, true, true));
}

TEST(Compare, IntegersHalvesAndBools) {
  auto a = OwnedTensor::of<int64_t>({3}, {-1, 5, 7});
  auto b = OwnedTensor::of<int64_t>({}, {5});
  EXPECT_THAT(run_binary("Equal", a, b, ScalarType::Bool).out.values<bool>(3),
              ElementsAre(false, true, false));
  auto h = OwnedTensor::half_of(ScalarType::Float16, {2}, {1.5f, -2});
  auto g = OwnedTensor::half_of(ScalarType::Float16, {2}, {1, 1});
  EXPECT_THAT(run_binary("Less", h, g, ScalarType::Bool).out.values<bool>(2),
              ElementsAre(false, true));
  auto t = OwnedTensor::of<bool>({2}, {true, false});
  EXPECT_THAT(run_binary("Equal", t, t, ScalarType::Bool).out.values<bool>(2),
              ElementsAre(true, true));
  auto run = run_binary("Greater", t, t, ScalarType::Bool);
  EXPECT_EQ(run.status.code(), Error::InvalidType);
  EXPECT_THAT(run.status.message(), HasSubstr("input 0 has dtype bool"));
}

TEST(Compare, NanComparesFalse) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  auto a = OwnedTensor::of<float>({2}, {nan, 1});
  EXPECT_THAT(run_binary("Equal", a, a, ScalarType::Bool).out.values<bool>(2),
              ElementsAre(false, true));
}

TEST(Compare, OutputMustBeBool) {
  auto a = OwnedTensor::of<float>({2}, {1, 2});
  auto run = run_binary("Less", a, a, ScalarType::Float32);
  EXPECT_EQ(run.status.code(), Error::InvalidType);
  EXPECT_THAT(run.status.message(),
              HasSubstr("run kernel 'Less': output 0 has dtype f32 (expected bool)"));
}

TEST(Logic, AndOrXorWithBroadcast) {
  auto a = OwnedTensor::of<bool>({2, 2}, {true, true, false, false});
  auto b = OwnedTensor::of<bool>({2}, {true, false});
  EXPECT_THAT(run_binary("And", a, b, ScalarType::Bool).out.values<bool>(4),
              ElementsAre(true, false, false, false));
  EXPECT_THAT(run_binary("Or", a, b, ScalarType::Bool).out.values<bool>(4),
              ElementsAre(true, true, true, false));
  EXPECT_THAT(run_binary("Xor", a, b, ScalarType::Bool).out.values<bool>(4),
              ElementsAre(false, true, true, false));
  auto f = OwnedTensor::of<float>({2}, {1, 0});
  auto run = run_binary("And", f, f, ScalarType::Bool);
  EXPECT_EQ(run.status.code(), Error::InvalidType);
  EXPECT_THAT(run.status.message(), HasSubstr("input 0 has dtype f32 (expected bool)"));
}

// ---- Variadic ---------------------------------------------------------------------------------

TEST(Variadic, MaxMinSumMeanOverThreeBroadcastInputs) {
  auto a = OwnedTensor::of<float>({2, 1}, {1, 5});
  auto b = OwnedTensor::of<float>({3}, {0, 3, 6});
  auto c = OwnedTensor::of<float>({}, {2});
  const std::pair<const char*, std::vector<float>> cases[] = {
      {"Max", {2, 3, 6, 5, 5, 6}},
      {"Min", {0, 1, 1, 0, 2, 2}},
      {"Sum", {3, 6, 9, 7, 10, 13}},
      {"Mean", {1, 2, 3, 7.f / 3, 10.f / 3, 13.f / 3}}};
  for (const auto& [op, expected] : cases) {
    auto out = OwnedTensor::resizable(ScalarType::Float32, 2);
    EValue in_a(a.tensor()), in_b(b.tensor()), in_c(c.tensor()), result(out.tensor());
    Status status = run_kernel(op, {&in_a, &in_b, &in_c}, {&result});
    ASSERT_TRUE(status.ok()) << op << ": " << status.message();
    EXPECT_EQ(sizes_of(result), (Shape{2, 3}));
    auto values = out.values<float>(6);
    for (size_t i = 0; i < 6; ++i) EXPECT_FLOAT_EQ(values[i], expected[i]) << op << " " << i;
  }
}

TEST(Variadic, SingleInputAndIntegersAndNan) {
  auto a = OwnedTensor::of<int32_t>({3}, {4, -2, 9});
  auto b = OwnedTensor::of<int32_t>({3}, {1, 7, 9});
  auto out = OwnedTensor::zeros(ScalarType::Int32, {3});
  const Tensor* one[] = {&a.tensor()};
  ASSERT_TRUE(sum(one, out.tensor()).ok());
  EXPECT_THAT(out.values<int32_t>(), ElementsAre(4, -2, 9));
  const Tensor* two[] = {&a.tensor(), &b.tensor()};
  ASSERT_TRUE(maximum(two, out.tensor()).ok());
  EXPECT_THAT(out.values<int32_t>(), ElementsAre(4, 7, 9));
  ASSERT_TRUE(minimum(two, out.tensor()).ok());
  EXPECT_THAT(out.values<int32_t>(), ElementsAre(1, -2, 9));
  const float nan = std::numeric_limits<float>::quiet_NaN();
  auto x = OwnedTensor::of<float>({2}, {nan, 1});
  auto y = OwnedTensor::of<float>({2}, {0, nan});
  auto fout = OwnedTensor::zeros(ScalarType::Float32, {2});
  const Tensor* xy[] = {&x.tensor(), &y.tensor()};
  ASSERT_TRUE(maximum(xy, fout.tensor()).ok());
  EXPECT_TRUE(std::isnan(fout.values<float>()[0]));
  EXPECT_TRUE(std::isnan(fout.values<float>()[1]));
}

TEST(Variadic, ErrorsNameTheInput) {
  auto a = OwnedTensor::of<float>({2}, {1, 2});
  auto b = OwnedTensor::of<int32_t>({2}, {1, 2});
  auto c = OwnedTensor::of<float>({3}, {1, 2, 3});
  auto out = OwnedTensor::resizable(ScalarType::Float32, 1);
  EValue in_a(a.tensor()), in_b(b.tensor()), in_c(c.tensor()), result(out.tensor());
  Status status = run_kernel("Max", {&in_a, &in_a, &in_b}, {&result});
  EXPECT_EQ(status.code(), Error::InvalidType);
  EXPECT_THAT(status.message(), HasSubstr("run kernel 'Max': input 2 has dtype i32"));
  status = run_kernel("Sum", {&in_a, &in_c}, {&result});
  EXPECT_EQ(status.code(), Error::InvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("run kernel 'Sum': broadcast shape [2] with shape [3]"));
  status = run_kernel("Mean", {}, {&result});
  EXPECT_EQ(status.code(), Error::InvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("got 0 inputs"));
  status = run_kernel("Mean", {&in_b}, {&result});
  EXPECT_EQ(status.code(), Error::InvalidType);
}

// ---- Where and Clip ---------------------------------------------------------------------------

TEST(Where, ThreeWayBroadcast) {
  auto condition = OwnedTensor::of<bool>({2, 1}, {true, false});
  auto x = OwnedTensor::of<int64_t>({3}, {1, 2, 3});
  auto y = OwnedTensor::of<int64_t>({}, {-1});
  auto out = OwnedTensor::resizable(ScalarType::Int64, 2);
  EValue in_c(condition.tensor()), in_x(x.tensor()), in_y(y.tensor()), result(out.tensor());
  ASSERT_TRUE(run_kernel("Where", {&in_c, &in_x, &in_y}, {&result}).ok());
  EXPECT_EQ(sizes_of(result), (Shape{2, 3}));
  EXPECT_THAT(out.values<int64_t>(6), ElementsAre(1, 2, 3, -1, -1, -1));
}

TEST(Where, HalfValuesAndErrors) {
  auto condition = OwnedTensor::of<bool>({2}, {false, true});
  auto x = OwnedTensor::half_of(ScalarType::BFloat16, {2}, {1, 2});
  auto y = OwnedTensor::half_of(ScalarType::BFloat16, {2}, {3, 4});
  auto out = OwnedTensor::zeros(ScalarType::BFloat16, {2});
  ASSERT_TRUE(where(condition.tensor(), x.tensor(), y.tensor(), out.tensor()).ok());
  EXPECT_THAT(out.half_values(), ElementsAre(3, 2));
  auto f = OwnedTensor::of<float>({2}, {1, 2});
  auto fout = OwnedTensor::resizable(ScalarType::Float32, 1);
  EValue in_c(condition.tensor()), in_x(x.tensor()), in_f(f.tensor()), result(fout.tensor());
  Status status = run_kernel("Where", {&in_c, &in_x, &in_f}, {&result});
  EXPECT_EQ(status.code(), Error::InvalidType);
  EXPECT_THAT(status.message(), HasSubstr("input 2 has dtype f32 (expected bf16)"));
  status = run_kernel("Where", {&in_f, &in_f, &in_f}, {&result});
  EXPECT_EQ(status.code(), Error::InvalidType);
  EXPECT_THAT(status.message(), HasSubstr("input 0 (condition) has dtype f32 (expected bool)"));
}

TEST(Clip, BoundsAsInputs) {
  auto x = OwnedTensor::of<float>({5}, {-3, -1, 0, 1, 3});
  auto lo = OwnedTensor::of<float>({}, {-1.5f});
  auto hi = OwnedTensor::of<float>({}, {2});
  auto out = OwnedTensor::resizable(ScalarType::Float32, 1);
  EValue in_x(x.tensor()), in_lo(lo.tensor()), in_hi(hi.tensor()), none, result(out.tensor());
  ASSERT_TRUE(run_kernel("Clip", {&in_x, &in_lo, &in_hi}, {&result}).ok());
  EXPECT_THAT(out.values<float>(5), ElementsAre(-1.5f, -1, 0, 1, 2));
  ASSERT_TRUE(run_kernel("Clip", {&in_x, &none, &in_hi}, {&result}).ok());
  EXPECT_THAT(out.values<float>(5), ElementsAre(-3, -1, 0, 1, 2));
  ASSERT_TRUE(run_kernel("Clip", {&in_x}, {&result}).ok());
  EXPECT_THAT(out.values<float>(5), ElementsAre(-3, -1, 0, 1, 3));
  // min > max: everything becomes max.
  ASSERT_TRUE(run_kernel("Clip", {&in_x, &in_hi, &in_lo}, {&result}).ok());
  EXPECT_THAT(out.values<float>(5), ElementsAre(-1.5f, -1.5f, -1.5f, -1.5f, -1.5f));
}

TEST(Clip, BoundsAsAttributesAndIntegers) {
  auto x = OwnedTensor::of<float>({3}, {-3, 0.5f, 3});
  auto out = OwnedTensor::resizable(ScalarType::Float32, 1);
  EValue in_x(x.tensor()), result(out.tensor());
  ASSERT_TRUE(run_kernel("Clip", {&in_x}, {&result}, attrs({{"min", 0.0}, {"max", 1.0}})).ok());
  EXPECT_THAT(out.values<float>(3), ElementsAre(0, 0.5f, 1));
  auto xi = OwnedTensor::of<int32_t>({3}, {-30, 5, 30});
  auto hi = OwnedTensor::of<int32_t>({1}, {10});
  auto outi = OwnedTensor::resizable(ScalarType::Int32, 1);
  EValue in_xi(xi.tensor()), none, in_hi(hi.tensor()), result_i(outi.tensor());
  ASSERT_TRUE(run_kernel("Clip", {&in_xi, &none, &in_hi}, {&result_i}).ok());
  EXPECT_THAT(outi.values<int32_t>(3), ElementsAre(-30, 5, 10));
}

TEST(Clip, BadBoundsNameTheInput) {
  auto x = OwnedTensor::of<float>({2}, {1, 2});
  auto two = OwnedTensor::of<float>({2}, {0, 1});
  auto wrong = OwnedTensor::of<int32_t>({}, {0});
  auto out = OwnedTensor::resizable(ScalarType::Float32, 1);
  EValue in_x(x.tensor()), in_two(two.tensor()), in_wrong(wrong.tensor()), result(out.tensor());
  Status status = run_kernel("Clip", {&in_x, &in_two}, {&result});
  EXPECT_EQ(status.code(), Error::InvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("input 1 (min) has shape [2] (expected one element)"));
  status = run_kernel("Clip", {&in_x, &in_x, &in_wrong}, {&result});
  EXPECT_EQ(status.code(), Error::InvalidArgument);
  status = run_kernel("Clip", {&in_x, &in_wrong}, {&result});
  EXPECT_EQ(status.code(), Error::InvalidType);
  EXPECT_THAT(status.message(), HasSubstr("input 1 (min) has dtype i32 (expected f32"));
}

}  // namespace
}  // namespace kiln::kernels

namespace kiln::kernels {
namespace {

// ---- Narrow integers (i8, u8, i16) ------------------------------------------------------------

TEST(NarrowIntegers, ArithmeticWraps) {
  auto a = OwnedTensor::of<uint8_t>({3}, {250, 3, 0});
  auto b = OwnedTensor::of<uint8_t>({3}, {10, 4, 1});
  auto out = OwnedTensor::zeros(ScalarType::UInt8, {3});
  ASSERT_TRUE(add(a.tensor(), b.tensor(), out.tensor()).ok());
  EXPECT_THAT(out.values<uint8_t>(), ElementsAre(4, 7, 1));
  ASSERT_TRUE(sub(a.tensor(), b.tensor(), out.tensor()).ok());
  EXPECT_THAT(out.values<uint8_t>(), ElementsAre(240, 255, 255));
  auto c = OwnedTensor::of<int16_t>({2}, {-32768, 300});
  auto d = OwnedTensor::of<int16_t>({2}, {-1, 300});
  auto out16 = OwnedTensor::zeros(ScalarType::Int16, {2});
  ASSERT_TRUE(mul(c.tensor(), d.tensor(), out16.tensor()).ok());
  EXPECT_THAT(out16.values<int16_t>(), ElementsAre(-32768, static_cast<int16_t>(90000)));
  ASSERT_TRUE(div(c.tensor(), d.tensor(), out16.tensor()).ok());
  EXPECT_THAT(out16.values<int16_t>(), ElementsAre(-32768, 1));
}

TEST(NarrowIntegers, ModMaxMinClip) {
  auto a = OwnedTensor::of<int8_t>({4}, {7, -7, 7, -7});
  auto b = OwnedTensor::of<int8_t>({4}, {3, 3, -3, -3});
  auto out = OwnedTensor::zeros(ScalarType::Int8, {4});
  ASSERT_TRUE(mod(a.tensor(), b.tensor(), false, out.tensor()).ok());
  EXPECT_THAT(out.values<int8_t>(), ElementsAre(1, 2, -2, -1));
  const Tensor* both[] = {&a.tensor(), &b.tensor()};
  ASSERT_TRUE(maximum(both, out.tensor()).ok());
  EXPECT_THAT(out.values<int8_t>(), ElementsAre(7, 3, 7, -3));
  ASSERT_TRUE(minimum(both, out.tensor()).ok());
  EXPECT_THAT(out.values<int8_t>(), ElementsAre(3, -7, -3, -7));
  auto lo = OwnedTensor::of<int8_t>({}, {-5});
  ASSERT_TRUE(clip(a.tensor(), &lo.tensor(), nullptr, out.tensor()).ok());
  EXPECT_THAT(out.values<int8_t>(), ElementsAre(7, -5, 7, -5));
  auto u = OwnedTensor::of<uint8_t>({2}, {200, 7});
  auto v = OwnedTensor::of<uint8_t>({2}, {7, 200});
  auto out_u = OwnedTensor::zeros(ScalarType::UInt8, {2});
  ASSERT_TRUE(mod(u.tensor(), v.tensor(), false, out_u.tensor()).ok());
  EXPECT_THAT(out_u.values<uint8_t>(), ElementsAre(4, 7));
}

}  // namespace
}  // namespace kiln::kernels
