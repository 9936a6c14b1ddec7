// Conv and ConvInteger: hand-computed cases (most from the ONNX operator docs), seeded random
// data against a naive double-precision loop written here, and error cases.

#include <kiln/kernels/kernels.h>
#include <kiln/kernels/test/tensor_helpers.h>
#include <kiln/kernels/test/window_helpers.h>

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
using test_helpers::flat_index;
using test_helpers::Geometry;
using test_helpers::indices_of;
using test_helpers::iota;
using test_helpers::numel_of;
using test_helpers::OwnedTensor;
using test_helpers::random_values;
using test_helpers::run_kernel;
using test_helpers::sizes_of;
using test_helpers::to_double;
using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

using Shape = std::vector<int64_t>;

// Naive Conv in double: x [N, C, in...], w [M, C/group, k...].
std::vector<double> naive_conv(const Shape& xs, const std::vector<double>& x, const Shape& ws,
                               const std::vector<double>& w, const std::vector<double>* b,
                               const Geometry& g, int64_t group, Shape& out_shape) {
  const Shape in(xs.begin() + 2, xs.end());
  const Shape kernel(ws.begin() + 2, ws.end());
  const Shape out = g.out_sizes(in);
  const int64_t n_batch = xs[0], channels = xs[1], m_out = ws[0];
  const int64_t cg = channels / group, mg = m_out / group;
  out_shape = {n_batch, m_out};
  out_shape.insert(out_shape.end(), out.begin(), out.end());
  std::vector<double> y(static_cast<size_t>(numel_of(out_shape)));
  for (int64_t n = 0; n < n_batch; ++n) {
    for (int64_t m = 0; m < m_out; ++m) {
      const int64_t grp = m / mg;
      for (const Shape& o : indices_of(out)) {
        double sum = b ? (*b)[m] : 0.0;
        for (int64_t c = 0; c < cg; ++c) {
          for (const Shape& k : indices_of(kernel)) {
            Shape i(in.size());
            bool inside = true;
            for (size_t a = 0; a < in.size(); ++a) {
              i[a] = o[a] * g.stride[a] - g.pad_begin[a] + k[a] * g.dilation[a];
              inside = inside && i[a] >= 0 && i[a] < in[a];
            }
            if (!inside) continue;
            Shape xi = {n, grp * cg + c};
            xi.insert(xi.end(), i.begin(), i.end());
            Shape wi = {m, c};
            wi.insert(wi.end(), k.begin(), k.end());
            sum += x[flat_index(xs, xi)] * w[flat_index(ws, wi)];
          }
        }
        Shape yi = {n, m};
        yi.insert(yi.end(), o.begin(), o.end());
        y[flat_index(out_shape, yi)] = sum;
      }
    }
  }
  return y;
}

struct ConvCase {
  Shape x, w;
  Geometry g;
  int64_t group;
  bool bias;
};

std::string describe(const ConvCase& c) {
  return "x " + runtime::shape_to_string(c.x) + " w " + runtime::shape_to_string(c.w) + " stride " +
         runtime::shape_to_string(c.g.stride) + " dilation " +
         runtime::shape_to_string(c.g.dilation) + " pads " + runtime::shape_to_string(c.g.pads()) +
         " group " + std::to_string(c.group) + (c.bias ? " bias" : "");
}

std::vector<ConvCase> conv_cases() {
  return {
      {{1, 1, 5, 5}, {1, 1, 3, 3}, {{3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}}, 1, false},
      {{2, 3, 7, 6}, {4, 3, 3, 2}, {{3, 2}, {2, 1}, {1, 2}, {1, 0}, {2, 1}}, 1, true},
      {{1, 4, 6, 6}, {6, 2, 3, 3}, {{3, 3}, {1, 2}, {2, 1}, {1, 1}, {0, 2}}, 2, true},
      {{1, 4, 8, 7}, {4, 1, 3, 3}, {{3, 3}, {2, 2}, {1, 1}, {1, 1}, {1, 1}}, 4, true},  // dw
      {{1, 3, 5, 5}, {6, 1, 3, 3}, {{3, 3}, {1, 1}, {1, 1}, {0, 0}, {0, 0}}, 3, false},
      {{2, 5, 4, 3}, {7, 5, 1, 1}, {{1, 1}, {1, 1}, {1, 1}, {0, 0}, {0, 0}}, 1, true},  // 1x1
      {{1, 2, 4, 4}, {3, 2, 1, 1}, {{1, 1}, {2, 2}, {1, 1}, {0, 0}, {1, 1}}, 1, false},
      {{2, 3, 11}, {4, 3, 3}, {{3}, {2}, {2}, {2}, {1}}, 1, true},  // 1-D
      {{1, 4, 9}, {4, 2, 4}, {{4}, {1}, {1}, {0}, {3}}, 2, false},
      {{1, 2, 4, 5, 4},
       {3, 2, 2, 3, 2},
       {{2, 3, 2}, {1, 2, 1}, {1, 1, 2}, {1, 0, 1}, {0, 1, 1}},
       1,
       true},  // 3-D
  };
}

ConvOptions options_of(const ConvCase& c) {
  ConvOptions o;
  o.strides = c.g.stride;
  o.dilations = c.g.dilation;
  o.pads = c.g.pads();
  o.group = c.group;
  return o;
}

TEST(Conv, BasicWithAndWithoutPadding) {
  // ONNX Conv doc: 5x5 input 0..24, 3x3 kernel of ones.
  auto x = OwnedTensor::of<float>({1, 1, 5, 5}, iota(25));
  auto w = OwnedTensor::of<float>({1, 1, 3, 3}, std::vector<float>(9, 1.f));
  ConvOptions o;
  o.pads = {1, 1, 1, 1};
  auto padded = OwnedTensor::zeros(ScalarType::Float32, {1, 1, 5, 5});
  ASSERT_TRUE(conv(x.tensor(), w.tensor(), nullptr, o, padded.tensor()).ok());
  EXPECT_THAT(padded.values<float>(),
              ElementsAre(12, 21, 27, 33, 24, 33, 54, 63, 72, 51, 63, 99, 108, 117, 81, 93, 144,
                          153, 162, 111, 72, 111, 117, 123, 84));
  o.pads = {};
  auto valid = OwnedTensor::zeros(ScalarType::Float32, {1, 1, 3, 3});
  ASSERT_TRUE(conv(x.tensor(), w.tensor(), nullptr, o, valid.tensor()).ok());
  EXPECT_THAT(valid.values<float>(), ElementsAre(54, 63, 72, 99, 108, 117, 144, 153, 162));
}

// Outputs whose patches unrolled would pass 16 MB go through the column matrix in passes
// (the kernel once unrolled them all: 6 GB for a fuzzed Conv of a 32 MB output): a 2-D and a
// 3-D Conv of large patches whose passes end inside an output row match loops over the
// definition.
TEST(Conv, LargeOutputsGoThroughTheColumnsInPassesWithTheSameResults) {
  for (const Shape& xs : {Shape{1, 64, 80, 100}, Shape{1, 32, 4, 20, 100}}) {
    SCOPED_TRACE(runtime::shape_to_string(xs));
    const bool three = xs.size() == 5;
    const Shape ws = three ? Shape{1, 32, 3, 3, 3} : Shape{2, 64, 3, 3};
    auto x = OwnedTensor::of<float>(xs, random_values(numel_of(xs), 11));
    auto w = OwnedTensor::of<float>(ws, random_values(numel_of(ws), 12));
    ConvOptions o;
    o.pads = three ? Shape{1, 1, 1, 1, 1, 1} : Shape{1, 1, 1, 1};
    Shape ys = xs;
    ys[1] = ws[0];
    auto y = OwnedTensor::zeros(ScalarType::Float32, ys);
    ASSERT_TRUE(conv(x.tensor(), w.tensor(), nullptr, o, y.tensor()).ok());
    const float* xv = x.tensor().data_ptr<float>();
    const float* wv = w.tensor().data_ptr<float>();
    const float* yv = y.tensor().data_ptr<float>();
    const int64_t d = three ? xs[2] : 1, h = xs[xs.size() - 2], wd = xs.back();
    const int64_t kd = three ? 3 : 1, channels = xs[1];
    for (int64_t m = 0; m < ws[0]; ++m) {
      for (int64_t od = 0; od < d; ++od) {
        for (int64_t oh = 0; oh < h; ++oh) {
          for (int64_t ow = 0; ow < wd; ++ow) {
            double sum = 0.0;
            for (int64_t c = 0; c < channels; ++c) {
              for (int64_t a = 0; a < kd; ++a) {
                for (int64_t b = 0; b < 3; ++b) {
                  for (int64_t e = 0; e < 3; ++e) {
                    const int64_t id = od + a - (three ? 1 : 0), ih = oh + b - 1, iw = ow + e - 1;
                    if (id < 0 || id >= d || ih < 0 || ih >= h || iw < 0 || iw >= wd) continue;
                    sum += double{xv[((c * d + id) * h + ih) * wd + iw]} *
                           wv[((m * channels + c) * kd + a) * 9 + b * 3 + e];
                  }
                }
              }
            }
            const float got = yv[((m * d + od) * h + oh) * wd + ow];
            ASSERT_NEAR(got, sum, 1e-4 * (1.0 + std::fabs(sum)))
                << "m " << m << " at " << od << ", " << oh << ", " << ow;
          }
        }
      }
    }
  }
}

TEST(Conv, StridedAsymmetricPaddingAndSameUpper) {
  // ONNX Conv doc: 7x5 input, strides 2; pads [1, 0, 1, 0].
  auto x = OwnedTensor::of<float>({1, 1, 7, 5}, iota(35));
  auto w = OwnedTensor::of<float>({1, 1, 3, 3}, std::vector<float>(9, 1.f));
  ConvOptions o;
  o.strides = {2, 2};
  o.pads = {1, 0, 1, 0};
  ASSERT_EQ(*conv_shape(x.tensor().sizes(), w.tensor().sizes(), o), (Shape{1, 1, 4, 2}));
  auto y = OwnedTensor::zeros(ScalarType::Float32, {1, 1, 4, 2});
  ASSERT_TRUE(conv(x.tensor(), w.tensor(), nullptr, o, y.tensor()).ok());
  EXPECT_THAT(y.values<float>(), ElementsAre(21, 33, 99, 117, 189, 207, 171, 183));
  // SAME_UPPER on a 5x5 input, stride 2: output 3x3, pads 1 on each side.
  auto x5 = OwnedTensor::of<float>({1, 1, 5, 5}, iota(25));
  ConvOptions same;
  same.strides = {2, 2};
  same.auto_pad = AutoPad::SameUpper;
  auto s = OwnedTensor::zeros(ScalarType::Float32, {1, 1, 3, 3});
  ASSERT_TRUE(conv(x5.tensor(), w.tensor(), nullptr, same, s.tensor()).ok());
  EXPECT_THAT(s.values<float>(), ElementsAre(12, 27, 24, 63, 108, 81, 72, 117, 84));
}

TEST(Conv, SameLowerPutsTheExtraPaddingFirst) {
  // 4 wide, kernel 2, stride 1: total padding 1; SAME_LOWER pads it at the start.
  auto x = OwnedTensor::of<float>({1, 1, 4}, {1, 2, 3, 4});
  auto w = OwnedTensor::of<float>({1, 1, 2}, {1, 10});
  ConvOptions o;
  o.auto_pad = AutoPad::SameLower;
  auto lower = OwnedTensor::zeros(ScalarType::Float32, {1, 1, 4});
  ASSERT_TRUE(conv(x.tensor(), w.tensor(), nullptr, o, lower.tensor()).ok());
  EXPECT_THAT(lower.values<float>(), ElementsAre(10, 21, 32, 43));
  o.auto_pad = AutoPad::SameUpper;
  auto upper = OwnedTensor::zeros(ScalarType::Float32, {1, 1, 4});
  ASSERT_TRUE(conv(x.tensor(), w.tensor(), nullptr, o, upper.tensor()).ok());
  EXPECT_THAT(upper.values<float>(), ElementsAre(21, 32, 43, 4));
  o.auto_pad = AutoPad::Valid;
  o.pads = {5, 5};  // ignored with VALID
  ASSERT_EQ(*conv_shape(x.tensor().sizes(), w.tensor().sizes(), o), (Shape{1, 1, 3}));
}

TEST(Conv, MatchesNaiveLoopOverRanksGroupsStridesDilationsAndPads) {
  uint32_t seed = 1;
  for (const ConvCase& c : conv_cases()) {
    SCOPED_TRACE(describe(c));
    const auto xv = random_values<double>(numel_of(c.x), seed++);
    const auto wv = random_values<double>(numel_of(c.w), seed++);
    const auto bv = random_values<double>(c.w[0], seed++);
    Shape out_shape;
    const auto expected =
        naive_conv(c.x, xv, c.w, wv, c.bias ? &bv : nullptr, c.g, c.group, out_shape);
    auto x32 = OwnedTensor::of<float>(c.x, std::vector<float>(xv.begin(), xv.end()));
    auto w32 = OwnedTensor::of<float>(c.w, std::vector<float>(wv.begin(), wv.end()));
    auto b32 = OwnedTensor::of<float>({c.w[0]}, std::vector<float>(bv.begin(), bv.end()));
    auto shape = conv_shape(c.x, c.w, options_of(c));
    ASSERT_TRUE(shape.ok()) << shape.status().message();
    ASSERT_EQ(*shape, out_shape);
    auto y32 = OwnedTensor::zeros(ScalarType::Float32, out_shape);
    Status status = conv(x32.tensor(), w32.tensor(), c.bias ? &b32.tensor() : nullptr,
                         options_of(c), y32.tensor());
    ASSERT_TRUE(status.ok()) << status.message();
    const auto got = y32.values<float>();
    for (size_t i = 0; i < expected.size(); ++i) ASSERT_NEAR(got[i], expected[i], 1e-4) << i;

    auto x64 = OwnedTensor::of<double>(c.x, xv);
    auto w64 = OwnedTensor::of<double>(c.w, wv);
    auto b64 = OwnedTensor::of<double>({c.w[0]}, bv);
    auto y64 = OwnedTensor::zeros(ScalarType::Float64, out_shape);
    ASSERT_TRUE(conv(x64.tensor(), w64.tensor(), c.bias ? &b64.tensor() : nullptr, options_of(c),
                     y64.tensor())
                    .ok());
    const auto got64 = y64.values<double>();
    for (size_t i = 0; i < expected.size(); ++i) ASSERT_NEAR(got64[i], expected[i], 1e-12) << i;
  }
}

TEST(Conv, Float16AccumulatesInFloat) {
  const auto xv = random_values<float>(2 * 3 * 6 * 6, 7);
  const auto wv = random_values<float>(4 * 3 * 3 * 3, 8);
  auto x = OwnedTensor::half_of(ScalarType::Float16, {2, 3, 6, 6}, xv);
  auto w = OwnedTensor::half_of(ScalarType::Float16, {4, 3, 3, 3}, wv);
  // The reference reads the same rounded inputs.
  const auto xr = x.half_values();
  const auto wr = w.half_values();
  Shape out_shape;
  const Geometry g{{3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}};
  const auto expected = naive_conv({2, 3, 6, 6}, to_double(xr), {4, 3, 3, 3}, to_double(wr),
                                   nullptr, g, 1, out_shape);
  ConvOptions o;
  o.pads = g.pads();
  auto y = OwnedTensor::zeros(ScalarType::Float16, out_shape);
  ASSERT_TRUE(conv(x.tensor(), w.tensor(), nullptr, o, y.tensor()).ok());
  const auto got = y.half_values();
  for (size_t i = 0; i < expected.size(); ++i) {
    ASSERT_NEAR(got[i], expected[i], 2e-3 * (1 + std::fabs(expected[i]))) << i;
  }
}

TEST(Conv, RejectsBadShapesAndAttributes) {
  auto x = OwnedTensor::of<float>({1, 4, 5, 5}, iota(100));
  auto w = OwnedTensor::of<float>({3, 2, 3, 3}, iota(54));
  auto y = OwnedTensor::zeros(ScalarType::Float32, {1, 3, 3, 3});
  ConvOptions o;
  o.group = 2;  // M = 3 is not divisible by 2
  Status status = conv(x.tensor(), w.tensor(), nullptr, o, y.tensor());
  EXPECT_EQ(status.code(), Error::InvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("with group 2"));

  o.group = 1;  // W has 2 channels, X 4
  status = conv(x.tensor(), w.tensor(), nullptr, o, y.tensor());
  EXPECT_THAT(status.message(), HasSubstr("W[1] * group = C"));

  auto w4 = OwnedTensor::of<float>({3, 4, 3, 3}, iota(108));
  o.strides = {1, 0};
  status = conv(x.tensor(), w4.tensor(), nullptr, o, y.tensor());
  EXPECT_EQ(status.code(), Error::InvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("attribute 'strides' [1, 0] holds 0 (expected 1.."));

  o.strides = {};
  o.pads = {1, 1};
  status = conv(x.tensor(), w4.tensor(), nullptr, o, y.tensor());
  EXPECT_THAT(status.message(), HasSubstr("attribute 'pads' [1, 1] has 2 values (expected 4)"));

  o.pads = {};
  o.kernel_shape = {2, 2};
  status = conv(x.tensor(), w4.tensor(), nullptr, o, y.tensor());
  EXPECT_THAT(status.message(), HasSubstr("attribute 'kernel_shape' [2, 2] differs"));

  o.kernel_shape = {};
  o.dilations = {3, 3};  // dilated kernel 7 > 5
  status = conv(x.tensor(), w4.tensor(), nullptr, o, y.tensor());
  EXPECT_THAT(status.message(), HasSubstr("expected at least the dilated window size 7"));

  o.dilations = {};
  auto bad_bias = OwnedTensor::of<float>({2}, {1, 2});
  status = conv(x.tensor(), w4.tensor(), &bad_bias.tensor(), o, y.tensor());
  EXPECT_THAT(status.message(), HasSubstr("input 2 (B) has shape [2] (expected [3]"));

  auto wrong_out = OwnedTensor::zeros(ScalarType::Float32, {1, 3, 5, 5});
  status = conv(x.tensor(), w4.tensor(), nullptr, o, wrong_out.tensor());
  EXPECT_THAT(status.message(), HasSubstr("output 0 has shape [1, 3, 5, 5]"));

  auto x4 = OwnedTensor::of<float>({1, 1, 2, 2, 2, 2}, iota(16));
  auto w6 = OwnedTensor::of<float>({1, 1, 1, 1, 1, 1}, {1});
  EXPECT_EQ(conv_shape(x4.tensor().sizes(), w6.tensor().sizes(), {}).status().code(),
            Error::NotSupported);
  EXPECT_THAT(std::string(parse_auto_pad("Conv", "SAME").status().message()),
              HasSubstr("attribute 'auto_pad' is 'SAME' (expected NOTSET"));
}

TEST(ConvKernel, ReadsAttributesAndResizesTheOutput) {
  auto x = OwnedTensor::of<float>({1, 1, 5, 5}, iota(25));
  auto w = OwnedTensor::of<float>({1, 1, 3, 3}, std::vector<float>(9, 1.f));
  auto b = OwnedTensor::of<float>({1}, {0.5f});
  auto out = OwnedTensor::resizable(ScalarType::Float32, 4);
  EValue in_x(x.tensor()), in_w(w.tensor()), in_b(b.tensor()), result(out.tensor());
  Status status = run_kernel(
      "Conv", {&in_x, &in_w, &in_b}, {&result},
      attrs(
          {{"kernel_shape", Shape{3, 3}}, {"strides", Shape{2, 2}}, {"pads", Shape{1, 1, 1, 1}}}));
  ASSERT_TRUE(status.ok()) << status.message();
  EXPECT_EQ(sizes_of(result), (Shape{1, 1, 3, 3}));
  EXPECT_THAT(out.values<float>(9),
              ElementsAre(12.5, 27.5, 24.5, 63.5, 108.5, 81.5, 72.5, 117.5, 84.5));
  status = run_kernel("Conv", {&in_x, &in_w}, {&result}, attrs({{"auto_pad", std::string("X")}}));
  EXPECT_EQ(status.code(), Error::InvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("run kernel 'Conv': attribute 'auto_pad' is 'X'"));
}

TEST(ConvInteger, SubtractsZeroPointsAndPadsWithTheZeroPoint) {
  // ONNX ConvInteger doc: x = 2..10 (3x3), x_zero_point 1, w = ones (2x2).
  auto x = OwnedTensor::of<uint8_t>({1, 1, 3, 3}, {2, 3, 4, 5, 6, 7, 8, 9, 10});
  auto w = OwnedTensor::of<uint8_t>({1, 1, 2, 2}, {1, 1, 1, 1});
  auto zp = OwnedTensor::of<uint8_t>({}, {1});
  auto y = OwnedTensor::zeros(ScalarType::Int32, {1, 1, 2, 2});
  ASSERT_TRUE(conv_integer(x.tensor(), w.tensor(), &zp.tensor(), nullptr, {}, y.tensor()).ok());
  EXPECT_THAT(y.values<int32_t>(), ElementsAre(12, 16, 24, 28));
  ConvOptions padded;
  padded.pads = {1, 1, 1, 1};
  auto yp = OwnedTensor::zeros(ScalarType::Int32, {1, 1, 4, 4});
  ASSERT_TRUE(
      conv_integer(x.tensor(), w.tensor(), &zp.tensor(), nullptr, padded, yp.tensor()).ok());
  EXPECT_THAT(yp.values<int32_t>(),
              ElementsAre(1, 3, 5, 3, 5, 12, 16, 9, 11, 24, 28, 15, 7, 15, 17, 9));
}

TEST(ConvInteger, SignedWeightsWithPerChannelZeroPointsMatchNaive) {
  const Shape xs = {1, 2, 5, 4}, ws = {3, 2, 2, 3};
  std::vector<int8_t> xv, wv;
  for (float v : random_values<float>(40, 3, -128, 127)) xv.push_back(static_cast<int8_t>(v));
  for (float v : random_values<float>(36, 4, -128, 127)) wv.push_back(static_cast<int8_t>(v));
  const std::vector<int8_t> wzp = {-3, 0, 5};
  const int8_t xzp = 7;
  std::vector<double> xc, wc;
  for (int8_t v : xv) xc.push_back(v - xzp);
  for (size_t i = 0; i < wv.size(); ++i) wc.push_back(wv[i] - wzp[i / 12]);
  const Geometry g{{2, 3}, {2, 1}, {1, 1}, {1, 0}, {0, 2}};
  Shape out_shape;
  const auto expected = naive_conv(xs, xc, ws, wc, nullptr, g, 1, out_shape);
  auto x = OwnedTensor::of<int8_t>(xs, xv);
  auto w = OwnedTensor::of<int8_t>(ws, wv);
  auto x_zp = OwnedTensor::of<int8_t>({1}, {xzp});
  auto w_zp = OwnedTensor::of<int8_t>({3}, wzp);
  ConvOptions o;
  o.strides = g.stride;
  o.pads = g.pads();
  auto y = OwnedTensor::zeros(ScalarType::Int32, out_shape);
  Status status =
      conv_integer(x.tensor(), w.tensor(), &x_zp.tensor(), &w_zp.tensor(), o, y.tensor());
  ASSERT_TRUE(status.ok()) << status.message();
  EXPECT_THAT(to_double(y.values<int32_t>()), ElementsAreArray(expected));

  auto bad_zp = OwnedTensor::of<int8_t>({2}, {1, 2});
  status = conv_integer(x.tensor(), w.tensor(), &x_zp.tensor(), &bad_zp.tensor(), o, y.tensor());
  EXPECT_EQ(status.code(), Error::InvalidArgument);
  EXPECT_THAT(status.message(),
              HasSubstr("input 3 (w_zero_point) has shape [2] (expected a scalar or [3])"));
  auto f = OwnedTensor::of<float>(xs, std::vector<float>(40));
  EXPECT_EQ(conv_integer(f.tensor(), w.tensor(), nullptr, nullptr, o, y.tensor()).code(),
            Error::InvalidType);
}

}  // namespace
}  // namespace kiln::kernels
