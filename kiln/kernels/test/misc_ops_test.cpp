// Dropout, Trilu, CumSum, TopK, Hardmax, EyeLike, IsNaN, IsInf, Shrink, Softsign, Celu, Mish,
// the trigonometric and hyperbolic functions, BitShift and Det.

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
using test_helpers::attrs;
using test_helpers::OwnedTensor;
using test_helpers::run_kernel;
using test_helpers::sizes_of;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

using Shape = std::vector<int64_t>;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

// ---- Unary math ---------------------------------------------------------------------------------

struct UnaryCase {
  const char* op;
  Status (*typed)(const runtime::Tensor&, runtime::Tensor&);
  double (*reference)(double);
  double lo, hi;
};

class MiscUnaryTest : public ::testing::TestWithParam<UnaryCase> {};

// Seeded values in each op's domain, through the typed function and the registered kernel.
TEST_P(MiscUnaryTest, MatchesDoubleReference) {
  const UnaryCase& c = GetParam();
  const auto xs = test_helpers::random_values<float>(64, 5, c.lo, c.hi);
  auto x = OwnedTensor::of<float>({8, 8}, xs);
  auto out = OwnedTensor::zeros(ScalarType::Float32, {8, 8});
  ASSERT_TRUE(c.typed(x.tensor(), out.tensor()).ok());
  const auto y = out.values<float>();
  for (size_t i = 0; i < xs.size(); ++i) {
    const double expected = c.reference(xs[i]);
    EXPECT_NEAR(y[i], expected, 1e-6 * std::max(1.0, std::fabs(expected))) << c.op << " " << xs[i];
  }
  auto resized = OwnedTensor::resizable(ScalarType::Float32, 2);
  EValue in(x.tensor()), result(resized.tensor());
  ASSERT_TRUE(run_kernel(c.op, {&in}, {&result}).ok());
  EXPECT_EQ(resized.values<float>(64), y);

  auto ints = OwnedTensor::of<int32_t>({1}, {1});
  auto int_out = OwnedTensor::resizable(ScalarType::Int32, 1);
  EValue in_int(ints.tensor()), r_int(int_out.tensor());
  Status status = run_kernel(c.op, {&in_int}, {&r_int});
  EXPECT_EQ(status.code(), Error::InvalidType);
  EXPECT_THAT(status.message(), HasSubstr("input 0 has dtype i32"));
}

double softsign_ref(double x) { return x / (1 + std::fabs(x)); }
double mish_ref(double x) { return x * std::tanh(std::log1p(std::exp(x))); }

INSTANTIATE_TEST_SUITE_P(
    Ops, MiscUnaryTest,
    ::testing::Values(UnaryCase{"Tan", tan, [](double v) { return std::tan(v); }, -1.5, 1.5},
                      UnaryCase{"Asin", asin, [](double v) { return std::asin(v); }, -1, 1},
                      UnaryCase{"Acos", acos, [](double v) { return std::acos(v); }, -1, 1},
                      UnaryCase{"Atan", atan, [](double v) { return std::atan(v); }, -10, 10},
                      UnaryCase{"Sinh", sinh, [](double v) { return std::sinh(v); }, -5, 5},
                      UnaryCase{"Cosh", cosh, [](double v) { return std::cosh(v); }, -5, 5},
                      UnaryCase{"Asinh", asinh, [](double v) { return std::asinh(v); }, -9, 9},
                      UnaryCase{"Acosh", acosh, [](double v) { return std::acosh(v); }, 1, 9},
                      UnaryCase{"Atanh", atanh, [](double v) { return std::atanh(v); }, -0.99,
                                0.99},
                      UnaryCase{"Softsign", softsign, softsign_ref, -9, 9},
                      UnaryCase{"Mish", mish, mish_ref, -9, 9}),
    [](const ::testing::TestParamInfo<UnaryCase>& info) { return std::string(info.param.op); });

TEST(Mish, DoesNotOverflowForLargeInputs) {
  auto x = OwnedTensor::of<float>({3}, {1000, -1000, 0});
  auto out = OwnedTensor::zeros(ScalarType::Float32, {3});
  ASSERT_TRUE(mish(x.tensor(), out.tensor()).ok());
  EXPECT_THAT(out.values<float>(), ElementsAre(1000.0f, -0.0f, 0.0f));
}

TEST(Celu, MatchesTheFormulaAndRejectsZeroAlpha) {
  auto x = OwnedTensor::of<float>({3}, {-2, 0, 3});
  auto out = OwnedTensor::resizable(ScalarType::Float32, 1);
  EValue in(x.tensor()), r(out.tensor());
  ASSERT_TRUE(run_kernel("Celu", {&in}, {&r}, attrs({{"alpha", EValue(2.0)}})).ok());
  const auto y = out.values<float>(3);
  EXPECT_NEAR(y[0], 2 * std::expm1(-1.0), 1e-6);
  EXPECT_EQ(y[1], 0.0f);
  EXPECT_EQ(y[2], 3.0f);
  Status status = run_kernel("Celu", {&in}, {&r}, attrs({{"alpha", EValue(0.0)}}));
  EXPECT_EQ(status.code(), Error::InvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("attribute 'alpha' is 0"));
}

TEST(Shrink, SoftAndHardForFloatsAndIntegers) {
  auto x = OwnedTensor::of<float>({5}, {-2, -1, 0, 1, 2});
  auto out = OwnedTensor::resizable(ScalarType::Float32, 1);
  EValue in(x.tensor()), r(out.tensor());
  ASSERT_TRUE(
      run_kernel("Shrink", {&in}, {&r}, attrs({{"lambd", EValue(1.5)}, {"bias", EValue(1.5)}}))
          .ok());
  EXPECT_THAT(out.values<float>(5), ElementsAre(-0.5f, 0.0f, 0.0f, 0.0f, 0.5f));
  ASSERT_TRUE(run_kernel("Shrink", {&in}, {&r}, attrs({{"lambd", EValue(1.5)}})).ok());
  EXPECT_THAT(out.values<float>(5), ElementsAre(-2.0f, 0.0f, 0.0f, 0.0f, 2.0f));
  auto bytes = OwnedTensor::of<uint8_t>({3}, {0, 10, 250});
  auto byte_out = OwnedTensor::zeros(ScalarType::UInt8, {3});
  ASSERT_TRUE(shrink(bytes.tensor(), 5, -10, byte_out.tensor()).ok());
  EXPECT_THAT(byte_out.values<uint8_t>(), ElementsAre(0, 20, 255));  // 260 saturates
}

TEST(IsNaNIsInf, DetectAsAsked) {
  auto x = OwnedTensor::of<float>({4}, {kNaN, kInf, -kInf, 1});
  auto out = OwnedTensor::resizable(ScalarType::Bool, 1);
  EValue in(x.tensor()), r(out.tensor());
  ASSERT_TRUE(run_kernel("IsNaN", {&in}, {&r}).ok());
  EXPECT_THAT(out.values<bool>(4), ElementsAre(true, false, false, false));
  ASSERT_TRUE(run_kernel("IsInf", {&in}, {&r}).ok());
  EXPECT_THAT(out.values<bool>(4), ElementsAre(false, true, true, false));
  ASSERT_TRUE(run_kernel("IsInf", {&in}, {&r}, attrs({{"detect_positive", 0}})).ok());
  EXPECT_THAT(out.values<bool>(4), ElementsAre(false, false, true, false));
  ASSERT_TRUE(run_kernel("IsInf", {&in}, {&r}, attrs({{"detect_negative", 0}})).ok());
  EXPECT_THAT(out.values<bool>(4), ElementsAre(false, true, false, false));
  auto f32_out = OwnedTensor::resizable(ScalarType::Float32, 1);
  EValue wrong(f32_out.tensor());
  Status status = run_kernel("IsNaN", {&in}, {&wrong});
  EXPECT_EQ(status.code(), Error::InvalidType);
  EXPECT_THAT(status.message(), HasSubstr("output 0 has dtype f32 (expected bool)"));
}

// ---- Dropout ------------------------------------------------------------------------------------

TEST(Dropout, InferenceIsIdentityWithAnAllTrueMask) {
  auto x = OwnedTensor::of<float>({2, 2}, {1, -2, 3, -4});
  auto ratio = OwnedTensor::of<float>({}, {0.7f});
  auto training = OwnedTensor::of<bool>({}, {false});
  auto out = OwnedTensor::resizable(ScalarType::Float32, 2);
  auto mask = OwnedTensor::resizable(ScalarType::Bool, 2);
  EValue ix(x.tensor()), ir(ratio.tensor()), it(training.tensor()), r(out.tensor()),
      m(mask.tensor());
  ASSERT_TRUE(run_kernel("Dropout", {&ix, &ir, &it}, {&r, &m}).ok());
  EXPECT_THAT(out.values<float>(4), ElementsAre(1.0f, -2.0f, 3.0f, -4.0f));
  EXPECT_THAT(mask.values<bool>(4), ElementsAre(true, true, true, true));
  EXPECT_EQ(sizes_of(m), (Shape{2, 2}));
}

TEST(Dropout, TrainingNeedsRatioZero) {
  auto x = OwnedTensor::of<float>({2}, {1, 2});
  auto zero = OwnedTensor::of<float>({}, {0.0f});
  auto half = OwnedTensor::of<float>({}, {0.5f});
  auto training = OwnedTensor::of<bool>({}, {true});
  auto out = OwnedTensor::resizable(ScalarType::Float32, 1);
  EValue ix(x.tensor()), iz(zero.tensor()), ih(half.tensor()), it(training.tensor()),
      r(out.tensor());
  ASSERT_TRUE(run_kernel("Dropout", {&ix, &iz, &it}, {&r}).ok());
  EXPECT_THAT(out.values<float>(2), ElementsAre(1.0f, 2.0f));
  Status status = run_kernel("Dropout", {&ix, &ih, &it}, {&r});
  EXPECT_EQ(status.code(), Error::NotSupported);
  EXPECT_THAT(status.message(), HasSubstr("training_mode is true with ratio 0.5"));
  EValue none;
  status = run_kernel("Dropout", {&ix, &none, &it}, {&r});  // default ratio 0.5
  EXPECT_EQ(status.code(), Error::NotSupported);
}

// ---- Trilu, CumSum ------------------------------------------------------------------------------

TEST(Trilu, KeepsTheTriangleAboveOrBelowTheKthDiagonal) {
  auto x = OwnedTensor::of<int64_t>({3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  auto out = OwnedTensor::zeros(ScalarType::Int64, {3, 3});
  ASSERT_TRUE(trilu(x.tensor(), 0, true, out.tensor()).ok());
  EXPECT_THAT(out.values<int64_t>(), ElementsAre(1, 2, 3, 0, 5, 6, 0, 0, 9));
  ASSERT_TRUE(trilu(x.tensor(), -1, false, out.tensor()).ok());
  EXPECT_THAT(out.values<int64_t>(), ElementsAre(0, 0, 0, 4, 0, 0, 7, 8, 0));
  ASSERT_TRUE(trilu(x.tensor(), 1, true, out.tensor()).ok());
  EXPECT_THAT(out.values<int64_t>(), ElementsAre(0, 2, 3, 0, 0, 6, 0, 0, 0));
  ASSERT_TRUE(trilu(x.tensor(), std::numeric_limits<int64_t>::min(), false, out.tensor()).ok());
  EXPECT_THAT(out.values<int64_t>(), ElementsAre(0, 0, 0, 0, 0, 0, 0, 0, 0));

  auto k = OwnedTensor::of<int64_t>({}, {-1});
  auto resized = OwnedTensor::resizable(ScalarType::Int64, 2);
  EValue ix(x.tensor()), ik(k.tensor()), r(resized.tensor());
  ASSERT_TRUE(run_kernel("Trilu", {&ix, &ik}, {&r}, attrs({{"upper", 1}})).ok());
  EXPECT_THAT(resized.values<int64_t>(9), ElementsAre(1, 2, 3, 4, 5, 6, 0, 8, 9));

  auto vector = OwnedTensor::of<float>({3}, {1, 2, 3});
  EValue iv(vector.tensor());
  Status status = run_kernel("Trilu", {&iv}, {&r});
  EXPECT_EQ(status.code(), Error::InvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("input 0 has rank 1 (expected rank >= 2)"));
}

TEST(CumSum, ExclusiveAndReverseAlongAnAxis) {
  auto x = OwnedTensor::of<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  auto out = OwnedTensor::zeros(ScalarType::Float32, {2, 3});
  ASSERT_TRUE(cumsum(x.tensor(), 1, {}, out.tensor()).ok());
  EXPECT_THAT(out.values<float>(), ElementsAre(1, 3, 6, 4, 9, 15));
  ASSERT_TRUE(cumsum(x.tensor(), -1, {true, false}, out.tensor()).ok());
  EXPECT_THAT(out.values<float>(), ElementsAre(0, 1, 3, 0, 4, 9));
  ASSERT_TRUE(cumsum(x.tensor(), 1, {false, true}, out.tensor()).ok());
  EXPECT_THAT(out.values<float>(), ElementsAre(6, 5, 3, 15, 11, 6));
  ASSERT_TRUE(cumsum(x.tensor(), 0, {true, true}, out.tensor()).ok());
  EXPECT_THAT(out.values<float>(), ElementsAre(4, 5, 6, 0, 0, 0));

  auto ints = OwnedTensor::of<int32_t>({2}, {std::numeric_limits<int32_t>::max(), 1});
  auto int_out = OwnedTensor::resizable(ScalarType::Int32, 1);
  auto axis = OwnedTensor::of<int32_t>({1}, {0});
  EValue ii(ints.tensor()), ia(axis.tensor()), r(int_out.tensor());
  ASSERT_TRUE(run_kernel("CumSum", {&ii, &ia}, {&r}).ok());
  EXPECT_THAT(int_out.values<int32_t>(2), ElementsAre(std::numeric_limits<int32_t>::max(),
                                                      std::numeric_limits<int32_t>::min()));
  auto bad_axis = OwnedTensor::of<int64_t>({}, {1});
  EValue ib(bad_axis.tensor());
  Status status = run_kernel("CumSum", {&ii, &ib}, {&r});
  EXPECT_EQ(status.code(), Error::InvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("input 1 (axis) is 1 (expected -1..0"));
}

// ---- TopK, Hardmax ------------------------------------------------------------------------------

TEST(TopK, LargestAndSmallestWithStableTies) {
  auto x = OwnedTensor::of<float>({2, 4}, {3, 1, 3, 2, kNaN, 0, 5, 0});
  auto values = OwnedTensor::zeros(ScalarType::Float32, {2, 3});
  auto indices = OwnedTensor::zeros(ScalarType::Int64, {2, 3});
  ASSERT_TRUE(top_k(x.tensor(), 3, {}, values.tensor(), indices.tensor()).ok());
  EXPECT_THAT(indices.values<int64_t>(), ElementsAre(0, 2, 3, 0, 2, 1));
  const auto v = values.values<float>();
  EXPECT_EQ(v[0], 3);
  EXPECT_TRUE(std::isnan(v[3]));
  TopKOptions smallest;
  smallest.largest = false;
  ASSERT_TRUE(top_k(x.tensor(), 3, smallest, values.tensor(), indices.tensor()).ok());
  EXPECT_THAT(indices.values<int64_t>(), ElementsAre(1, 3, 0, 1, 3, 2));
  EXPECT_THAT(values.values<float>(), ElementsAre(1, 2, 3, 0, 0, 5));
}

TEST(TopK, AlongAnInnerAxisThroughTheKernel) {
  const auto xs = test_helpers::random_values<float>(24, 3, -5, 5);
  auto x = OwnedTensor::of<float>({2, 3, 4}, xs);
  auto k = OwnedTensor::of<int64_t>({1}, {2});
  auto values = OwnedTensor::resizable(ScalarType::Float32, 3);
  auto indices = OwnedTensor::resizable(ScalarType::Int64, 3);
  EValue ix(x.tensor()), ik(k.tensor()), rv(values.tensor()), ri(indices.tensor());
  ASSERT_TRUE(run_kernel("TopK", {&ix, &ik}, {&rv, &ri}, attrs({{"axis", -2}})).ok());
  EXPECT_EQ(sizes_of(rv), (Shape{2, 2, 4}));
  const auto v = values.values<float>(16);
  const auto idx = indices.values<int64_t>(16);
  for (int o = 0; o < 2; ++o) {
    for (int i = 0; i < 4; ++i) {
      std::vector<std::pair<float, int>> line;
      for (int j = 0; j < 3; ++j) line.push_back({xs[(o * 3 + j) * 4 + i], j});
      std::sort(line.begin(), line.end(), [](auto a, auto b) { return a.first > b.first; });
      for (int j = 0; j < 2; ++j) {
        EXPECT_EQ(v[(o * 2 + j) * 4 + i], line[j].first);
        EXPECT_EQ(idx[(o * 2 + j) * 4 + i], line[j].second);
      }
    }
  }
  auto big_k = OwnedTensor::of<int64_t>({1}, {4});
  EValue ibig(big_k.tensor());
  Status status = run_kernel("TopK", {&ix, &ibig}, {&rv, &ri}, attrs({{"axis", 1}}));
  EXPECT_EQ(status.code(), Error::InvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("k is 4 (expected 0..3"));
  // Opset 1 gives k as an attribute.
  ASSERT_TRUE(run_kernel("TopK", {&ix}, {&rv, &ri}, attrs({{"k", 1}})).ok());
  EXPECT_EQ(sizes_of(ri), (Shape{2, 3, 1}));
}

TEST(Hardmax, MarksTheFirstMaximumAlongTheAxis) {
  auto x = OwnedTensor::of<float>({2, 3}, {1, 3, 3, 5, 4, 2});
  auto out = OwnedTensor::zeros(ScalarType::Float32, {2, 3});
  ASSERT_TRUE(hardmax(x.tensor(), -1, false, out.tensor()).ok());
  EXPECT_THAT(out.values<float>(), ElementsAre(0, 1, 0, 1, 0, 0));
  ASSERT_TRUE(hardmax(x.tensor(), 0, false, out.tensor()).ok());
  EXPECT_THAT(out.values<float>(), ElementsAre(0, 0, 1, 1, 1, 0));
  // Flattened (opset < 13) at axis 0: one line of all six elements.
  ASSERT_TRUE(hardmax(x.tensor(), 0, true, out.tensor()).ok());
  EXPECT_THAT(out.values<float>(), ElementsAre(0, 0, 0, 1, 0, 0));
  Status status = hardmax(x.tensor(), 2, false, out.tensor());
  EXPECT_EQ(status.code(), Error::InvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("attribute 'axis' is 2"));
}

// ---- EyeLike, BitShift, Det ---------------------------------------------------------------------

TEST(EyeLike, OnesOnTheKthDiagonalInTheRequestedDtype) {
  auto x = OwnedTensor::of<int32_t>({2, 3}, {7, 7, 7, 7, 7, 7});
  auto out = OwnedTensor::resizable(ScalarType::Float64, 2);
  EValue ix(x.tensor()), r(out.tensor());
  ASSERT_TRUE(run_kernel("EyeLike", {&ix}, {&r}, attrs({{"dtype", 11}, {"k", 1}})).ok());
  EXPECT_THAT(out.values<double>(6), ElementsAre(0, 1, 0, 0, 0, 1));
  auto same = OwnedTensor::resizable(ScalarType::Int32, 2);
  EValue rs(same.tensor());
  ASSERT_TRUE(run_kernel("EyeLike", {&ix}, {&rs}, attrs({{"k", -1}})).ok());
  EXPECT_THAT(same.values<int32_t>(6), ElementsAre(0, 0, 0, 1, 0, 0));
  Status status = run_kernel("EyeLike", {&ix}, {&rs}, attrs({{"dtype", 8}}));
  EXPECT_EQ(status.code(), Error::InvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("attribute 'dtype' is 8"));
}

TEST(BitShift, LeftAndRightWithBroadcast) {
  auto x = OwnedTensor::of<uint8_t>({4}, {16, 4, 1, 255});
  auto y = OwnedTensor::of<uint8_t>({4}, {1, 2, 3, 9});
  auto out = OwnedTensor::resizable(ScalarType::UInt8, 1);
  EValue ix(x.tensor()), iy(y.tensor()), r(out.tensor());
  ASSERT_TRUE(run_kernel("BitShift", {&ix, &iy}, {&r}, attrs({{"direction", "LEFT"}})).ok());
  EXPECT_THAT(out.values<uint8_t>(4), ElementsAre(32, 16, 8, 0));
  ASSERT_TRUE(run_kernel("BitShift", {&ix, &iy}, {&r}, attrs({{"direction", "RIGHT"}})).ok());
  EXPECT_THAT(out.values<uint8_t>(4), ElementsAre(8, 1, 0, 0));
  Status status = run_kernel("BitShift", {&ix, &iy}, {&r}, attrs({{"direction", "UP"}}));
  EXPECT_EQ(status.code(), Error::InvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("attribute 'direction' is 'UP'"));
  auto ints = OwnedTensor::of<int32_t>({1}, {1});
  EValue ii(ints.tensor());
  status = run_kernel("BitShift", {&ii, &ii}, {&r}, attrs({{"direction", "LEFT"}}));
  EXPECT_EQ(status.code(), Error::InvalidType);
}

TEST(Det, BatchedDeterminantsMatchCofactorExpansion) {
  const auto xs = test_helpers::random_values<float>(18, 17, -2, 2);
  auto x = OwnedTensor::of<float>({2, 3, 3}, xs);
  auto out = OwnedTensor::resizable(ScalarType::Float32, 1);
  EValue ix(x.tensor()), r(out.tensor());
  ASSERT_TRUE(run_kernel("Det", {&ix}, {&r}).ok());
  EXPECT_EQ(sizes_of(r), (Shape{2}));
  for (int m = 0; m < 2; ++m) {
    const float* a = xs.data() + m * 9;
    const double expected = a[0] * (double(a[4]) * a[8] - double(a[5]) * a[7]) -
                            a[1] * (double(a[3]) * a[8] - double(a[5]) * a[6]) +
                            a[2] * (double(a[3]) * a[7] - double(a[4]) * a[6]);
    EXPECT_NEAR(out.values<float>(2)[m], expected, 1e-5);
  }
  auto singular = OwnedTensor::of<float>({2, 2}, {1, 2, 2, 4});
  auto scalar = OwnedTensor::zeros(ScalarType::Float32, {});
  ASSERT_TRUE(det(singular.tensor(), scalar.tensor()).ok());
  EXPECT_EQ(scalar.values<float>()[0], 0.0f);
  auto swap = OwnedTensor::of<float>({2, 2}, {0, 1, 1, 0});
  ASSERT_TRUE(det(swap.tensor(), scalar.tensor()).ok());
  EXPECT_EQ(scalar.values<float>()[0], -1.0f);
  auto wide = OwnedTensor::of<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  Status status = det(wide.tensor(), scalar.tensor());
  EXPECT_EQ(status.code(), Error::InvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("input 0 has shape [2, 3] (expected [..., M, M]"));
}

}  // namespace
}  // namespace kiln::kernels
