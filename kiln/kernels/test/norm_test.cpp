// LayerNormalization, BatchNormalization, InstanceNormalization, GroupNormalization, LRN and
// MeanVarianceNormalization against hand values and naive double-precision loops.

#include <kiln/kernels/kernels.h>
#include <kiln/kernels/test/tensor_helpers.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
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
using test_helpers::to_double;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

using Shape = std::vector<int64_t>;

// ---- LayerNormalization -------------------------------------------------------------------------

// Mean 2, variance 2/3 over {1, 2, 3}: y = (x - 2) / sqrt(2/3 + eps) * scale + bias.
TEST(LayerNorm, NormalizesTheLastAxisByHand) {
  auto x = OwnedTensor::of<float>({2, 3}, {1, 2, 3, 4, 4, 4});
  auto scale = OwnedTensor::of<float>({3}, {1, 2, 1});
  auto bias = OwnedTensor::of<float>({3}, {0, 0, 10});
  auto out = OwnedTensor::zeros(ScalarType::Float32, {2, 3});
  auto mean = OwnedTensor::zeros(ScalarType::Float32, {2, 1});
  auto inv_std = OwnedTensor::zeros(ScalarType::Float32, {2, 1});
  LayerNormOptions options;
  options.epsilon = 0;
  ASSERT_TRUE(layer_norm(x.tensor(), scale.tensor(), &bias.tensor(), options, out.tensor(),
                         &mean.tensor(), &inv_std.tensor())
                  .ok());
  const double r = std::sqrt(1.5);  // 1 / sqrt(2/3)
  const auto y = out.values<float>();
  EXPECT_NEAR(y[0], -r, 1e-6);
  EXPECT_NEAR(y[1], 0, 1e-6);
  EXPECT_NEAR(y[2], r + 10, 1e-5);
  EXPECT_THAT(mean.values<float>(), ElementsAre(2.0f, 4.0f));
  EXPECT_NEAR(inv_std.values<float>()[0], r, 1e-6);
  // A constant row has variance 0: with epsilon 0 its inverse deviation is inf.
  EXPECT_TRUE(std::isinf(inv_std.values<float>()[1]));
}

// Reference LayerNormalization over axes [axis, rank) of `x`, scale/bias of the normalized shape.
std::vector<double> reference_layer_norm(const Shape& shape, const std::vector<double>& x,
                                         const std::vector<double>& scale,
                                         const std::vector<double>& bias, int64_t axis,
                                         double epsilon) {
  int64_t inner = 1;
  for (size_t d = static_cast<size_t>(axis); d < shape.size(); ++d) inner *= shape[d];
  const int64_t outer = static_cast<int64_t>(x.size()) / inner;
  std::vector<double> out(x.size());
  for (int64_t o = 0; o < outer; ++o) {
    double mean = 0, var = 0;
    for (int64_t j = 0; j < inner; ++j) mean += x[o * inner + j];
    mean /= inner;
    for (int64_t j = 0; j < inner; ++j)
      var += (x[o * inner + j] - mean) * (x[o * inner + j] - mean);
    var /= inner;
    for (int64_t j = 0; j < inner; ++j) {
      out[o * inner + j] =
          (x[o * inner + j] - mean) / std::sqrt(var + epsilon) * scale[j] + bias[j];
    }
  }
  return out;
}

class LayerNormAxisTest : public ::testing::TestWithParam<int64_t> {};

// Every axis of a [2, 3, 4] tensor through the registered kernel, Mean and InvStdDev included.
TEST_P(LayerNormAxisTest, MatchesDoubleReference) {
  const int64_t axis = GetParam();
  const int64_t normalized = axis < 0 ? axis + 3 : axis;
  const Shape shape = {2, 3, 4};
  const Shape norm_shape(shape.begin() + normalized, shape.end());
  const int64_t inner = test_helpers::numel_of(norm_shape);
  const auto xs = test_helpers::random_values<float>(24, 7, -3, 3);
  const auto ss = test_helpers::random_values<float>(static_cast<size_t>(inner), 8, 0.5, 2);
  const auto bs = test_helpers::random_values<float>(static_cast<size_t>(inner), 9);
  auto x = OwnedTensor::of<float>(shape, xs);
  auto scale = OwnedTensor::of<float>(norm_shape, ss);
  auto bias = OwnedTensor::of<float>(norm_shape, bs);
  auto out = OwnedTensor::resizable(ScalarType::Float32, 3);
  auto mean = OwnedTensor::resizable(ScalarType::Float32, 3);
  auto inv_std = OwnedTensor::resizable(ScalarType::Float32, 3);
  EValue in_x(x.tensor()), in_s(scale.tensor()), in_b(bias.tensor());
  EValue r_out(out.tensor()), r_mean(mean.tensor()), r_inv(inv_std.tensor());
  ASSERT_TRUE(run_kernel("LayerNormalization", {&in_x, &in_s, &in_b}, {&r_out, &r_mean, &r_inv},
                         attrs({{"axis", EValue(axis)}, {"epsilon", EValue(1e-3)}}))
                  .ok());
  Shape stats_shape(shape.begin(), shape.begin() + normalized);
  stats_shape.resize(3, 1);
  EXPECT_EQ(sizes_of(r_mean), stats_shape);
  EXPECT_EQ(sizes_of(r_inv), stats_shape);
  const auto expected =
      reference_layer_norm(shape, to_double(xs), to_double(ss), to_double(bs), normalized, 1e-3);
  const auto result = out.values<float>(24);
  for (size_t i = 0; i < expected.size(); ++i) EXPECT_NEAR(result[i], expected[i], 1e-5) << i;
  // Row 0's statistics, recomputed.
  double m = 0, v = 0;
  for (int64_t j = 0; j < inner; ++j) m += xs[j];
  m /= inner;
  for (int64_t j = 0; j < inner; ++j) v += (xs[j] - m) * (xs[j] - m);
  v /= inner;
  EXPECT_NEAR(mean.values<float>(1)[0], m, 1e-6);
  EXPECT_NEAR(inv_std.values<float>(1)[0], 1 / std::sqrt(v + 1e-3), 1e-5);
}

INSTANTIATE_TEST_SUITE_P(Axes, LayerNormAxisTest, ::testing::Values(-3, -2, -1, 0, 1, 2),
                         [](const ::testing::TestParamInfo<int64_t>& info) {
                           return (info.param < 0 ? "minus" : "") +
                                  std::to_string(std::abs(info.param));
                         });

TEST(LayerNorm, BroadcastsScaleAndOmitsBias) {
  auto x = OwnedTensor::of<float>({1, 4}, {1, 3, 1, 3});
  auto scale = OwnedTensor::of<float>({1}, {2});
  auto out = OwnedTensor::zeros(ScalarType::Float32, {1, 4});
  LayerNormOptions options;
  options.epsilon = 0;
  ASSERT_TRUE(
      layer_norm(x.tensor(), scale.tensor(), nullptr, options, out.tensor(), nullptr, nullptr)
          .ok());
  EXPECT_THAT(out.values<float>(), ElementsAre(-2.0f, 2.0f, -2.0f, 2.0f));
}

TEST(LayerNorm, Float16ComputesInWiderPrecision) {
  auto x = OwnedTensor::half_of(ScalarType::Float16, {1, 4}, {1000, 1001, 1002, 1003});
  auto scale = OwnedTensor::half_of(ScalarType::Float16, {4}, {1, 1, 1, 1});
  auto out = OwnedTensor::zeros(ScalarType::Float16, {1, 4});
  ASSERT_TRUE(layer_norm(x.tensor(), scale.tensor(), nullptr, LayerNormOptions(), out.tensor(),
                         nullptr, nullptr)
                  .ok());
  const auto y = out.half_values();
  const double s = 1 / std::sqrt(1.25 + 1e-5);
  EXPECT_NEAR(y[0], -1.5 * s, 2e-3);
  EXPECT_NEAR(y[3], 1.5 * s, 2e-3);
}

TEST(LayerNorm, RejectsBadAxisScaleAndStashType) {
  auto x = OwnedTensor::of<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  auto scale = OwnedTensor::of<float>({2}, {1, 1});
  auto good_scale = OwnedTensor::of<float>({3}, {1, 1, 1});
  auto out = OwnedTensor::resizable(ScalarType::Float32, 2);
  EValue in_x(x.tensor()), in_s(scale.tensor()), in_good(good_scale.tensor()), r(out.tensor());

  Status status = run_kernel("LayerNormalization", {&in_x, &in_s}, {&r});
  EXPECT_EQ(status.code(), Error::InvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("input 1 (Scale) has shape [2]"));
  EXPECT_EQ(sizes_of(r), (Shape{0, 0}));  // checked before anything was resized

  status = run_kernel("LayerNormalization", {&in_x, &in_good}, {&r}, attrs({{"axis", 2}}));
  EXPECT_EQ(status.code(), Error::InvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("attribute 'axis' is 2 (expected -2..1"));

  status = run_kernel("LayerNormalization", {&in_x, &in_good}, {&r}, attrs({{"stash_type", 10}}));
  EXPECT_EQ(status.code(), Error::NotSupported);
  EXPECT_THAT(status.message(), HasSubstr("'stash_type' is 10"));

  auto half_scale = OwnedTensor::half_of(ScalarType::Float16, {3}, {1, 1, 1});
  auto typed_out = OwnedTensor::zeros(ScalarType::Float32, {2, 3});
  status = layer_norm(x.tensor(), half_scale.tensor(), nullptr, LayerNormOptions(),
                      typed_out.tensor(), nullptr, nullptr);
  EXPECT_EQ(status.code(), Error::InvalidType);
  EXPECT_THAT(status.message(), HasSubstr("input 1 (Scale) has dtype f16"));
}

// ---- BatchNormalization
// ---------------------------------------------------------------------------

TEST(BatchNorm, InferenceUsesTheGivenStatistics) {
  // [N=1, C=2, 2]: channel 0 has mean 1, var 4; channel 1 mean 0, var 1.
  auto x = OwnedTensor::of<float>({1, 2, 2}, {1, 5, 0, 2});
  auto scale = OwnedTensor::of<float>({2}, {1, 3});
  auto bias = OwnedTensor::of<float>({2}, {0, 1});
  auto mean = OwnedTensor::of<float>({2}, {1, 0});
  auto var = OwnedTensor::of<float>({2}, {4, 1});
  auto out = OwnedTensor::resizable(ScalarType::Float32, 3);
  EValue ix(x.tensor()), is(scale.tensor()), ib(bias.tensor()), im(mean.tensor()), iv(var.tensor()),
      r(out.tensor());
  ASSERT_TRUE(run_kernel("BatchNormalization", {&ix, &is, &ib, &im, &iv}, {&r},
                         attrs({{"epsilon", EValue(0.0)}}))
                  .ok());
  EXPECT_THAT(out.values<float>(4), ElementsAre(0.0f, 2.0f, 1.0f, 7.0f));
}

TEST(BatchNorm, TrainingUsesBatchStatisticsAndUpdatesRunningOnes) {
  const Shape shape = {3, 2, 4};
  const auto xs = test_helpers::random_values<float>(24, 11, -2, 2);
  auto x = OwnedTensor::of<float>(shape, xs);
  auto scale = OwnedTensor::of<float>({2}, {1.5f, 0.5f});
  auto bias = OwnedTensor::of<float>({2}, {0.25f, -1});
  auto mean = OwnedTensor::of<float>({2}, {0.1f, 0.2f});
  auto var = OwnedTensor::of<float>({2}, {1, 2});
  auto out = OwnedTensor::resizable(ScalarType::Float32, 3);
  auto running_mean = OwnedTensor::resizable(ScalarType::Float32, 1);
  auto running_var = OwnedTensor::resizable(ScalarType::Float32, 1);
  EValue ix(x.tensor()), is(scale.tensor()), ib(bias.tensor()), im(mean.tensor()), iv(var.tensor()),
      r(out.tensor()), rm(running_mean.tensor()), rv(running_var.tensor());
  ASSERT_TRUE(run_kernel("BatchNormalization", {&ix, &is, &ib, &im, &iv}, {&r, &rm, &rv},
                         attrs({{"training_mode", 1}, {"momentum", EValue(0.8)}}))
                  .ok());
  const double gamma[2] = {1.5, 0.5}, beta[2] = {0.25, -1}, m0[2] = {0.1, 0.2}, v0[2] = {1, 2};
  const auto y = out.values<float>(24);
  for (int c = 0; c < 2; ++c) {
    double mu = 0, var2 = 0;
    for (int n = 0; n < 3; ++n) {
      for (int i = 0; i < 4; ++i) mu += xs[(n * 2 + c) * 4 + i];
    }
    mu /= 12;
    for (int n = 0; n < 3; ++n) {
      for (int i = 0; i < 4; ++i) var2 += std::pow(xs[(n * 2 + c) * 4 + i] - mu, 2);
    }
    var2 /= 12;
    for (int n = 0; n < 3; ++n) {
      for (int i = 0; i < 4; ++i) {
        const int at = (n * 2 + c) * 4 + i;
        EXPECT_NEAR(y[at], (xs[at] - mu) / std::sqrt(var2 + 1e-5) * gamma[c] + beta[c], 1e-5);
      }
    }
    EXPECT_NEAR(running_mean.values<float>(2)[c], m0[c] * 0.8 + mu * 0.2, 1e-6);
    EXPECT_NEAR(running_var.values<float>(2)[c], v0[c] * 0.8 + var2 * 0.2, 1e-6);
  }
}

TEST(BatchNorm, RejectsParameterSizesAndSavedOutputs) {
  auto x = OwnedTensor::of<float>({1, 2, 2}, {1, 2, 3, 4});
  auto two = OwnedTensor::of<float>({2}, {1, 1});
  auto three = OwnedTensor::of<float>({3}, {1, 1, 1});
  auto out = OwnedTensor::resizable(ScalarType::Float32, 3);
  EValue ix(x.tensor()), i2(two.tensor()), i3(three.tensor()), r(out.tensor());
  Status status = run_kernel("BatchNormalization", {&ix, &i2, &i2, &i3, &i2}, {&r});
  EXPECT_EQ(status.code(), Error::InvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("input 3 (input_mean) has shape [3]"));
  EXPECT_EQ(sizes_of(r), (Shape{0, 0, 0}));  // nothing was resized

  EValue r1(out.tensor()), r2(out.tensor()), r3(out.tensor()), r4(out.tensor());
  status = run_kernel("BatchNormalization", {&ix, &i2, &i2, &i2, &i2}, {&r, &r1, &r2, &r3, &r4});
  EXPECT_EQ(status.code(), Error::NotSupported);
  EXPECT_THAT(status.message(), HasSubstr("saved_mean"));
}

// ---- InstanceNormalization, LRN, MeanVarianceNormalization --------------------------------------

TEST(InstanceNorm, NormalizesEachChannelOfEachSample) {
  const Shape shape = {2, 3, 5};
  const auto xs = test_helpers::random_values<float>(30, 12, -4, 4);
  auto x = OwnedTensor::of<float>(shape, xs);
  auto scale = OwnedTensor::of<float>({3}, {1, 2, 3});
  auto bias = OwnedTensor::of<float>({3}, {-1, 0, 1});
  auto out = OwnedTensor::zeros(ScalarType::Float32, shape);
  ASSERT_TRUE(instance_norm(x.tensor(), scale.tensor(), bias.tensor(), 1e-2, out.tensor()).ok());
  const auto y = out.values<float>();
  for (int plane = 0; plane < 6; ++plane) {
    double mu = 0, var = 0;
    for (int i = 0; i < 5; ++i) mu += xs[plane * 5 + i];
    mu /= 5;
    for (int i = 0; i < 5; ++i) var += std::pow(xs[plane * 5 + i] - mu, 2);
    var /= 5;
    const int c = plane % 3;
    for (int i = 0; i < 5; ++i) {
      const double expected = (xs[plane * 5 + i] - mu) / std::sqrt(var + 1e-2) * (c + 1) + (c - 1);
      EXPECT_NEAR(y[plane * 5 + i], expected, 1e-5);
    }
  }
  auto bad = OwnedTensor::of<float>({2}, {1, 1});
  Status status = instance_norm(x.tensor(), bad.tensor(), bias.tensor(), 1e-5, out.tensor());
  EXPECT_EQ(status.code(), Error::InvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("input 1 (scale) has shape [2] (expected [3]"));
}

// Statistics over each (n, group): the group's channels and all their pixels; the scale and
// bias per channel (opset 21) or per group (opset 18).
TEST(GroupNorm, NormalizesEachGroupOfEachSample) {
  const Shape shape = {2, 6, 2, 3};  // 3 groups of 2 channels, 6 pixels each
  const auto xs = test_helpers::random_values<float>(72, 21, -4, 4);
  const std::vector<float> gamma = {1, 2, 3, -1, 0.5f, 4}, beta = {-1, 0, 1, 2, 3, -2};
  auto x = OwnedTensor::of<float>(shape, xs);
  auto scale = OwnedTensor::of<float>({6}, gamma);
  auto bias = OwnedTensor::of<float>({6}, beta);
  auto out = OwnedTensor::zeros(ScalarType::Float32, shape);
  ASSERT_TRUE(group_norm(x.tensor(), scale.tensor(), bias.tensor(), 3, 1e-2, out.tensor()).ok());
  const auto y = out.values<float>();
  for (int row = 0; row < 6; ++row) {  // (n, group)
    double mu = 0, var = 0;
    for (int i = 0; i < 12; ++i) mu += xs[row * 12 + i];
    mu /= 12;
    for (int i = 0; i < 12; ++i) var += std::pow(xs[row * 12 + i] - mu, 2);
    var /= 12;
    for (int i = 0; i < 12; ++i) {
      const int c = (row % 3) * 2 + i / 6;
      const double expected = (xs[row * 12 + i] - mu) / std::sqrt(var + 1e-2) * gamma[c] + beta[c];
      EXPECT_NEAR(y[row * 12 + i], expected, 1e-5) << row << " " << i;
    }
  }

  // One group per channel is instance normalization.
  auto instance = OwnedTensor::zeros(ScalarType::Float32, shape);
  ASSERT_TRUE(
      instance_norm(x.tensor(), scale.tensor(), bias.tensor(), 1e-2, instance.tensor()).ok());
  ASSERT_TRUE(group_norm(x.tensor(), scale.tensor(), bias.tensor(), 6, 1e-2, out.tensor()).ok());
  EXPECT_EQ(out.values<float>(), instance.values<float>());

  // Opset 18: one scale and bias per group, as that value for each of its channels.
  auto group_scale = OwnedTensor::of<float>({3}, {2, -1, 4});
  auto group_bias = OwnedTensor::of<float>({3}, {0, 2, -2});
  auto channel_scale = OwnedTensor::of<float>({6}, {2, 2, -1, -1, 4, 4});
  auto channel_bias = OwnedTensor::of<float>({6}, {0, 0, 2, 2, -2, -2});
  auto expanded = OwnedTensor::zeros(ScalarType::Float32, shape);
  ASSERT_TRUE(
      group_norm(x.tensor(), group_scale.tensor(), group_bias.tensor(), 3, 1e-5, out.tensor())
          .ok());
  ASSERT_TRUE(group_norm(x.tensor(), channel_scale.tensor(), channel_bias.tensor(), 3, 1e-5,
                         expanded.tensor())
                  .ok());
  EXPECT_EQ(out.values<float>(), expanded.values<float>());

  // Through the kernel: the attributes, and the errors naming the culprit.
  auto result = OwnedTensor::resizable(ScalarType::Float32, 4);
  EValue in_x(x.tensor()), in_s(scale.tensor()), in_b(bias.tensor()), r(result.tensor());
  ASSERT_TRUE(run_kernel("GroupNormalization", {&in_x, &in_s, &in_b}, {&r},
                         attrs({{"num_groups", 3}, {"epsilon", EValue(1e-2)}}))
                  .ok());
  EXPECT_EQ(sizes_of(r), shape);
  ASSERT_TRUE(group_norm(x.tensor(), scale.tensor(), bias.tensor(), 3, 1e-2, out.tensor()).ok());
  const float* got = r.to_tensor().data_ptr<float>();
  EXPECT_EQ(std::vector<float>(got, got + 72), out.values<float>());
  Status status = run_kernel("GroupNormalization", {&in_x, &in_s, &in_b}, {&r});
  EXPECT_EQ(status.code(), Error::InvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("attribute 'num_groups' is missing"));
  status =
      run_kernel("GroupNormalization", {&in_x, &in_s, &in_b}, {&r}, attrs({{"num_groups", 4}}));
  EXPECT_EQ(status.code(), Error::InvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("num_groups is 4 (expected a divisor of the 6 channels"));
  auto bad = OwnedTensor::of<float>({2}, {1, 1});
  EValue in_bad(bad.tensor());
  status =
      run_kernel("GroupNormalization", {&in_x, &in_bad, &in_b}, {&r}, attrs({{"num_groups", 3}}));
  EXPECT_EQ(status.code(), Error::InvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("input 1 (scale) has shape [2] (expected [6]"));
  auto flat = OwnedTensor::of<float>({2, 6}, std::vector<float>(12, 1.0f));
  EValue in_flat(flat.tensor());
  status =
      run_kernel("GroupNormalization", {&in_flat, &in_s, &in_b}, {&r}, attrs({{"num_groups", 3}}));
  EXPECT_EQ(status.code(), Error::InvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("input 0 has rank 2"));
}

TEST(Lrn, SumsSquaresOverNeighbouringChannels) {
  // [1, 4, 1, 1] = {1, 2, 3, 4}, size 3: channel c sums channels c-1..c+1.
  auto x = OwnedTensor::of<float>({1, 4, 1, 1}, {1, 2, 3, 4});
  auto out = OwnedTensor::zeros(ScalarType::Float32, {1, 4, 1, 1});
  LrnOptions options;
  options.size = 3;
  options.alpha = 0.3;
  options.beta = 0.5;
  options.bias = 2;
  ASSERT_TRUE(lrn(x.tensor(), options, out.tensor()).ok());
  const double sums[4] = {1 + 4, 1 + 4 + 9, 4 + 9 + 16, 9 + 16};
  for (int c = 0; c < 4; ++c) {
    EXPECT_NEAR(out.values<float>()[c], (c + 1) / std::sqrt(2 + 0.1 * sums[c]), 1e-6);
  }
  // An even size reaches one channel further up than down: size 2 sums c..c+1.
  options.size = 2;
  ASSERT_TRUE(lrn(x.tensor(), options, out.tensor()).ok());
  EXPECT_NEAR(out.values<float>()[0], 1 / std::sqrt(2 + 0.15 * 5), 1e-6);

  options.size = 0;
  Status status = lrn(x.tensor(), options, out.tensor());
  EXPECT_EQ(status.code(), Error::InvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("attribute 'size' is 0"));
}

TEST(MeanVarianceNormalization, DefaultAxesKeepChannelsApart) {
  const Shape shape = {2, 3, 2, 2};
  const auto xs = test_helpers::random_values<float>(24, 13, -5, 5);
  auto x = OwnedTensor::of<float>(shape, xs);
  auto out = OwnedTensor::resizable(ScalarType::Float32, 4);
  EValue ix(x.tensor()), r(out.tensor());
  ASSERT_TRUE(run_kernel("MeanVarianceNormalization", {&ix}, {&r}).ok());
  const auto y = out.values<float>(24);
  for (int c = 0; c < 3; ++c) {
    std::vector<int> at;
    for (int n = 0; n < 2; ++n) {
      for (int i = 0; i < 4; ++i) at.push_back((n * 3 + c) * 4 + i);
    }
    double mu = 0, var = 0;
    for (int i : at) mu += xs[i];
    mu /= 8;
    for (int i : at) var += std::pow(xs[i] - mu, 2);
    var /= 8;
    for (int i : at) EXPECT_NEAR(y[i], (xs[i] - mu) / (std::sqrt(var) + 1e-9), 1e-5);
  }
  Status status =
      run_kernel("MeanVarianceNormalization", {&ix}, {&r}, attrs({{"axes", Shape{0, 4}}}));
  EXPECT_EQ(status.code(), Error::InvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("attribute 'axes' is 4"));
}

}  // namespace
}  // namespace kiln::kernels
