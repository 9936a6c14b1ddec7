// Conv, ConvInteger, ConvTranspose, MaxPool, AveragePool, LpPool, the global pools and
// MaxUnpool: hand-computed cases (most from the ONNX operator docs), seeded random data against
// naive double-precision loops written here, and error cases.

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
using test_helpers::random_values;
using test_helpers::run_kernel;
using test_helpers::sizes_of;
using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

using Shape = std::vector<int64_t>;

std::vector<float> iota(int64_t n, float start = 0) {
  std::vector<float> v(static_cast<size_t>(n));
  for (size_t i = 0; i < v.size(); ++i) v[i] = start + static_cast<float>(i);
  return v;
}

// Every multi-index of `sizes`, row-major.
std::vector<Shape> indices_of(const Shape& sizes) {
  std::vector<Shape> all;
  if (test_helpers::numel_of(sizes) == 0) return all;
  Shape at(sizes.size(), 0);
  while (true) {
    all.push_back(at);
    int d = static_cast<int>(sizes.size()) - 1;
    for (; d >= 0; --d) {
      if (++at[d] < sizes[d]) break;
      at[d] = 0;
    }
    if (d < 0) return all;
  }
}

int64_t flat(const Shape& sizes, const Shape& at) {
  int64_t index = 0;
  for (size_t d = 0; d < sizes.size(); ++d) index = index * sizes[d] + at[d];
  return index;
}

// One sliding window over S spatial axes with explicit pads (the naive loops' input).
struct Geometry {
  Shape kernel, stride, dilation, pad_begin, pad_end;
  Shape out_sizes(const Shape& in) const {
    Shape out;
    for (size_t a = 0; a < in.size(); ++a) {
      const int64_t extent = (kernel[a] - 1) * dilation[a] + 1;
      out.push_back((in[a] + pad_begin[a] + pad_end[a] - extent) / stride[a] + 1);
    }
    return out;
  }
  Shape pads() const {
    Shape p = pad_begin;
    p.insert(p.end(), pad_end.begin(), pad_end.end());
    return p;
  }
};

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
  std::vector<double> y(static_cast<size_t>(test_helpers::numel_of(out_shape)));
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
            sum += x[flat(xs, xi)] * w[flat(ws, wi)];
          }
        }
        Shape yi = {n, m};
        yi.insert(yi.end(), o.begin(), o.end());
        y[flat(out_shape, yi)] = sum;
      }
    }
  }
  return y;
}

template <typename T>
std::vector<double> to_double(const std::vector<T>& v) {
  return std::vector<double>(v.begin(), v.end());
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
    const auto xv = random_values<double>(test_helpers::numel_of(c.x), seed++);
    const auto wv = random_values<double>(test_helpers::numel_of(c.w), seed++);
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

// Naive ConvTranspose in double: every x element scatters x * w into the full output, which
// is then cropped by the pads (begin) and sized `out` (positions past the full size stay 0).
std::vector<double> naive_conv_transpose(const Shape& xs, const std::vector<double>& x,
                                         const Shape& ws, const std::vector<double>& w,
                                         const Geometry& g, int64_t group, const Shape& out,
                                         Shape& out_shape) {
  const Shape in(xs.begin() + 2, xs.end());
  const Shape kernel(ws.begin() + 2, ws.end());
  const int64_t cg = xs[1] / group, mg = ws[1];
  out_shape = {xs[0], mg * group};
  out_shape.insert(out_shape.end(), out.begin(), out.end());
  std::vector<double> y(static_cast<size_t>(test_helpers::numel_of(out_shape)));
  for (int64_t n = 0; n < xs[0]; ++n) {
    for (int64_t c = 0; c < xs[1]; ++c) {
      const int64_t grp = c / cg;
      for (const Shape& i : indices_of(in)) {
        Shape xi = {n, c};
        xi.insert(xi.end(), i.begin(), i.end());
        for (int64_t m = 0; m < mg; ++m) {
          for (const Shape& k : indices_of(kernel)) {
            Shape o(in.size());
            bool inside = true;
            for (size_t a = 0; a < in.size(); ++a) {
              o[a] = i[a] * g.stride[a] + k[a] * g.dilation[a] - g.pad_begin[a];
              inside = inside && o[a] >= 0 && o[a] < out[a];
            }
            if (!inside) continue;
            Shape wi = {c, m};
            wi.insert(wi.end(), k.begin(), k.end());
            Shape yi = {n, grp * mg + m};
            yi.insert(yi.end(), o.begin(), o.end());
            y[flat(out_shape, yi)] += x[flat(xs, xi)] * w[flat(ws, wi)];
          }
        }
      }
    }
  }
  return y;
}

TEST(ConvTranspose, SameUpperMatchesTheOnnxExample) {
  auto x = OwnedTensor::of<float>({1, 1, 3, 3}, iota(9));
  auto w = OwnedTensor::of<float>({1, 2, 3, 3}, std::vector<float>(18, 1.f));
  ConvTransposeOptions o;
  o.auto_pad = AutoPad::SameUpper;
  o.strides = {2, 2};
  ASSERT_EQ(*conv_transpose_shape(x.tensor().sizes(), w.tensor().sizes(), o), (Shape{1, 2, 6, 6}));
  auto y = OwnedTensor::zeros(ScalarType::Float32, {1, 2, 6, 6});
  ASSERT_TRUE(conv_transpose(x.tensor(), w.tensor(), nullptr, o, y.tensor()).ok());
  const auto v = y.values<float>();
  EXPECT_THAT(std::vector<float>(v.begin(), v.begin() + 12),
              ElementsAre(0, 0, 1, 1, 3, 2, 0, 0, 1, 1, 3, 2));
  EXPECT_THAT(std::vector<float>(v.begin() + 12, v.begin() + 18), ElementsAre(3, 3, 8, 5, 12, 7));
}

TEST(ConvTranspose, MatchesNaiveLoop) {
  struct Case {
    Shape x, w;
    Geometry g;
    Shape output_padding;
    int64_t group;
  };
  const Case cases[] = {
      {{1, 1, 3, 3}, {1, 2, 3, 3}, {{3, 3}, {1, 1}, {1, 1}, {0, 0}, {0, 0}}, {0, 0}, 1},
      {{2, 2, 3, 4}, {2, 3, 3, 2}, {{3, 2}, {3, 2}, {1, 1}, {1, 0}, {2, 1}}, {1, 1}, 1},
      {{1, 4, 3, 3}, {4, 2, 2, 2}, {{2, 2}, {2, 1}, {2, 2}, {0, 1}, {1, 0}}, {1, 0}, 2},
      {{1, 3, 5}, {3, 2, 3}, {{3}, {2}, {1}, {1}, {1}}, {1}, 1},
      {{1, 2, 2, 3, 2},
       {2, 1, 2, 2, 3},
       {{2, 2, 3}, {2, 1, 2}, {1, 2, 1}, {0, 1, 1}, {1, 0, 0}},
       {0, 0, 1},
       1},
  };
  uint32_t seed = 30;
  for (const Case& c : cases) {
    SCOPED_TRACE(runtime::shape_to_string(c.x) + " " + runtime::shape_to_string(c.w));
    const auto xv = random_values<double>(test_helpers::numel_of(c.x), seed++);
    const auto wv = random_values<double>(test_helpers::numel_of(c.w), seed++);
    const auto bv = random_values<double>(c.w[1] * c.group, seed++);
    Shape out;
    for (size_t a = 0; a + 2 < c.x.size(); ++a) {
      out.push_back(c.g.stride[a] * (c.x[2 + a] - 1) + c.output_padding[a] +
                    (c.g.kernel[a] - 1) * c.g.dilation[a] + 1 - c.g.pad_begin[a] - c.g.pad_end[a]);
    }
    Shape out_shape;
    auto expected = naive_conv_transpose(c.x, xv, c.w, wv, c.g, c.group, out, out_shape);
    const int64_t plane = test_helpers::numel_of(out);
    for (size_t i = 0; i < expected.size(); ++i) expected[i] += bv[(i / plane) % bv.size()];
    ConvTransposeOptions o;
    o.strides = c.g.stride;
    o.dilations = c.g.dilation;
    o.pads = c.g.pads();
    o.output_padding = c.output_padding;
    o.group = c.group;
    auto shape = conv_transpose_shape(c.x, c.w, o);
    ASSERT_TRUE(shape.ok()) << shape.status().message();
    ASSERT_EQ(*shape, out_shape);
    auto x = OwnedTensor::of<float>(c.x, std::vector<float>(xv.begin(), xv.end()));
    auto w = OwnedTensor::of<float>(c.w, std::vector<float>(wv.begin(), wv.end()));
    auto b = OwnedTensor::of<float>({c.w[1] * c.group}, std::vector<float>(bv.begin(), bv.end()));
    auto y = OwnedTensor::zeros(ScalarType::Float32, out_shape);
    Status status = conv_transpose(x.tensor(), w.tensor(), &b.tensor(), o, y.tensor());
    ASSERT_TRUE(status.ok()) << status.message();
    const auto got = y.values<float>();
    for (size_t i = 0; i < expected.size(); ++i) ASSERT_NEAR(got[i], expected[i], 1e-4) << i;
  }
}

TEST(ConvTranspose, OutputShapeDerivesThePads) {
  // Full size 3 * (3 - 1) + 3 = 9 rows, 2 * 2 + 3 = 7 columns; output_shape [10, 8] pads the
  // end with bias-only positions, as output_padding [1, 1] does.
  auto x = OwnedTensor::of<float>({1, 1, 3, 3}, iota(9));
  auto w = OwnedTensor::of<float>({1, 2, 3, 3}, std::vector<float>(18, 1.f));
  ConvTransposeOptions by_shape;
  by_shape.strides = {3, 2};
  by_shape.output_shape = {10, 8};
  ConvTransposeOptions by_padding = by_shape;
  by_padding.output_shape = {};
  by_padding.output_padding = {1, 1};
  auto a = OwnedTensor::zeros(ScalarType::Float32, {1, 2, 10, 8});
  auto b = OwnedTensor::zeros(ScalarType::Float32, {1, 2, 10, 8});
  ASSERT_TRUE(conv_transpose(x.tensor(), w.tensor(), nullptr, by_shape, a.tensor()).ok());
  ASSERT_TRUE(conv_transpose(x.tensor(), w.tensor(), nullptr, by_padding, b.tensor()).ok());
  EXPECT_EQ(a.values<float>(), b.values<float>());
  // A smaller output_shape crops: NOTSET puts the odd padding (9 - 8 = 1) at the start.
  by_shape.output_shape = {1, 2, 8, 7};
  ASSERT_EQ(*conv_transpose_shape(x.tensor().sizes(), w.tensor().sizes(), by_shape),
            (Shape{1, 2, 8, 7}));
  auto c = OwnedTensor::zeros(ScalarType::Float32, {1, 2, 8, 7});
  ASSERT_TRUE(conv_transpose(x.tensor(), w.tensor(), nullptr, by_shape, c.tensor()).ok());
  const auto full = b.values<float>();
  const auto cropped = c.values<float>();
  for (int64_t r = 0; r < 8; ++r) {
    for (int64_t col = 0; col < 7; ++col) {
      ASSERT_EQ(cropped[r * 7 + col], full[(r + 1) * 8 + col]) << r << "," << col;
    }
  }
}

TEST(ConvTranspose, RejectsBadShapes) {
  auto x = OwnedTensor::of<float>({1, 2, 3, 3}, iota(18));
  auto w = OwnedTensor::of<float>({3, 1, 2, 2}, iota(12));
  ConvTransposeOptions o;
  EXPECT_THAT(conv_transpose_shape(x.tensor().sizes(), w.tensor().sizes(), o).status().message(),
              HasSubstr("expected W[0] = C"));
  auto w2 = OwnedTensor::of<float>({2, 1, 2, 2}, iota(8));
  o.output_padding = {-1, 0};
  EXPECT_THAT(conv_transpose_shape(x.tensor().sizes(), w2.tensor().sizes(), o).status().message(),
              HasSubstr("attribute 'output_padding' [-1, 0] holds -1"));
  o.output_padding = {};
  o.pads = {3, 3, 3, 3};
  EXPECT_THAT(conv_transpose_shape(x.tensor().sizes(), w2.tensor().sizes(), o).status().message(),
              HasSubstr("has output size -2"));
  o.pads = {};
  o.output_shape = {4, 4, 4};
  EXPECT_THAT(conv_transpose_shape(x.tensor().sizes(), w2.tensor().sizes(), o).status().message(),
              HasSubstr("attribute 'output_shape' [4, 4, 4] has 3 values"));
}

// Naive pooling over explicit pads: `visit(values in window, count in padded extent)`.
template <typename Fn>
std::vector<double> naive_pool(const Shape& xs, const std::vector<double>& x, const Geometry& g,
                               Shape& out_shape, Fn&& fn) {
  const Shape in(xs.begin() + 2, xs.end());
  const Shape out = g.out_sizes(in);
  out_shape = {xs[0], xs[1]};
  out_shape.insert(out_shape.end(), out.begin(), out.end());
  std::vector<double> y;
  for (int64_t nc = 0; nc < xs[0] * xs[1]; ++nc) {
    for (const Shape& o : indices_of(out)) {
      std::vector<double> values;
      std::vector<int64_t> positions;
      int64_t padded = 0;
      for (const Shape& k : indices_of(g.kernel)) {
        bool inside = true, in_pads = true;
        Shape i(in.size());
        for (size_t a = 0; a < in.size(); ++a) {
          i[a] = o[a] * g.stride[a] - g.pad_begin[a] + k[a] * g.dilation[a];
          inside = inside && i[a] >= 0 && i[a] < in[a];
          in_pads = in_pads && i[a] >= -g.pad_begin[a] && i[a] < in[a] + g.pad_end[a];
        }
        padded += in_pads;
        if (!inside) continue;
        values.push_back(x[nc * test_helpers::numel_of(in) + flat(in, i)]);
        positions.push_back(nc * test_helpers::numel_of(in) + flat(in, i));
      }
      y.push_back(fn(values, positions, padded));
    }
  }
  return y;
}

const Geometry kPoolGeometries[] = {
    {{3, 3}, {2, 2}, {1, 1}, {1, 1}, {1, 1}},
    {{2, 3}, {1, 2}, {2, 1}, {0, 1}, {1, 2}},
    {{3}, {2}, {2}, {2}, {1}},
    {{2, 2, 2}, {2, 1, 2}, {1, 1, 1}, {1, 0, 0}, {0, 1, 1}},
    {{1, 1}, {3, 3}, {1, 1}, {0, 0}, {0, 0}},
};

Shape spatial_input(size_t rank) {
  return rank == 1 ? Shape{2, 3, 11} : rank == 2 ? Shape{2, 3, 7, 8} : Shape{1, 2, 5, 4, 6};
}

PoolOptions pool_options(const Geometry& g) {
  PoolOptions o;
  o.kernel_shape = g.kernel;
  o.strides = g.stride;
  o.dilations = g.dilation;
  o.pads = g.pads();
  return o;
}

TEST(Pool, MaxAverageAndLpMatchNaiveLoops) {
  uint32_t seed = 50;
  for (const Geometry& g : kPoolGeometries) {
    const Shape xs = spatial_input(g.kernel.size());
    SCOPED_TRACE(runtime::shape_to_string(xs) + " k " + runtime::shape_to_string(g.kernel) +
                 " pads " + runtime::shape_to_string(g.pads()));
    // Values exact in float, so the maxima compare exactly.
    const auto xv = to_double(random_values<float>(test_helpers::numel_of(xs), seed++));
    auto x = OwnedTensor::of<float>(xs, std::vector<float>(xv.begin(), xv.end()));
    Shape out_shape;
    std::vector<int64_t> argmax;
    const auto max = naive_pool(xs, xv, g, out_shape, [&](auto& v, auto& pos, int64_t) {
      size_t best = 0;
      for (size_t i = 1; i < v.size(); ++i) best = v[i] > v[best] ? i : best;
      argmax.push_back(pos[best]);
      return v[best];
    });
    const auto avg = naive_pool(xs, xv, g, out_shape, [](auto& v, auto&, int64_t) {
      double s = 0;
      for (double e : v) s += e;
      return s / static_cast<double>(v.size());
    });
    const auto avg_pad = naive_pool(xs, xv, g, out_shape, [](auto& v, auto&, int64_t padded) {
      double s = 0;
      for (double e : v) s += e;
      return s / static_cast<double>(padded);
    });
    const auto lp3 = naive_pool(xs, xv, g, out_shape, [](auto& v, auto&, int64_t) {
      double s = 0;
      for (double e : v) s += std::pow(std::fabs(e), 3.0);
      return std::pow(s, 1.0 / 3.0);
    });
    PoolOptions o = pool_options(g);
    ASSERT_EQ(*pool_shape(xs, o), out_shape);
    auto y = OwnedTensor::zeros(ScalarType::Float32, out_shape);
    auto indices = OwnedTensor::zeros(ScalarType::Int64, out_shape);
    ASSERT_TRUE(max_pool(x.tensor(), o, y.tensor(), &indices.tensor()).ok());
    EXPECT_THAT(to_double(y.values<float>()), ElementsAreArray(max));
    EXPECT_EQ(indices.values<int64_t>(), argmax);
    ASSERT_TRUE(average_pool(x.tensor(), o, y.tensor()).ok());
    auto got = y.values<float>();
    for (size_t i = 0; i < avg.size(); ++i) ASSERT_NEAR(got[i], avg[i], 1e-6) << i;
    o.count_include_pad = true;
    ASSERT_TRUE(average_pool(x.tensor(), o, y.tensor()).ok());
    got = y.values<float>();
    for (size_t i = 0; i < avg.size(); ++i) ASSERT_NEAR(got[i], avg_pad[i], 1e-6) << i;
    o.p = 3;
    ASSERT_TRUE(lp_pool(x.tensor(), o, y.tensor()).ok());
    got = y.values<float>();
    for (size_t i = 0; i < avg.size(); ++i) ASSERT_NEAR(got[i], lp3[i], 1e-5) << i;
  }
}

TEST(MaxPool, IndicesInColumnMajorOrderAndIntegerInputs) {
  // ONNX MaxPool doc (with_argmax_2d_precomputed_strides): 5x5 input 1..25, kernel 2, stride 2.
  auto x = OwnedTensor::of<float>({1, 1, 5, 5}, iota(25, 1));
  PoolOptions o;
  o.kernel_shape = {2, 2};
  o.strides = {2, 2};
  o.storage_order = 1;
  auto y = OwnedTensor::zeros(ScalarType::Float32, {1, 1, 2, 2});
  auto i = OwnedTensor::zeros(ScalarType::Int64, {1, 1, 2, 2});
  ASSERT_TRUE(max_pool(x.tensor(), o, y.tensor(), &i.tensor()).ok());
  EXPECT_THAT(y.values<float>(), ElementsAre(7, 9, 17, 19));
  EXPECT_THAT(i.values<int64_t>(), ElementsAre(6, 16, 8, 18));

  auto u = OwnedTensor::of<uint8_t>({1, 1, 2, 3}, {5, 200, 7, 255, 1, 0});
  PoolOptions same;
  same.kernel_shape = {2, 2};
  same.auto_pad = AutoPad::SameUpper;
  auto yu = OwnedTensor::zeros(ScalarType::UInt8, {1, 1, 2, 3});
  ASSERT_TRUE(max_pool(u.tensor(), same, yu.tensor(), nullptr).ok());
  EXPECT_THAT(yu.values<uint8_t>(), ElementsAre(255, 200, 7, 255, 1, 0));
  auto i32 = OwnedTensor::of<int32_t>({1, 1, 2, 3}, {1, 2, 3, 4, 5, 6});
  auto y32 = OwnedTensor::zeros(ScalarType::Int32, {1, 1, 2, 3});
  EXPECT_EQ(max_pool(i32.tensor(), same, y32.tensor(), nullptr).code(), Error::InvalidType);
}

TEST(Pool, HalfAndSignedBytePools) {
  auto x = OwnedTensor::half_of(ScalarType::Float16, {1, 1, 2, 3}, {0.5f, -2, 3, 1.25f, 4, -6});
  PoolOptions o;
  o.kernel_shape = {2, 2};
  o.pads = {0, 0, 0, 1};
  auto y = OwnedTensor::zeros(ScalarType::Float16, {1, 1, 1, 3});
  ASSERT_TRUE(max_pool(x.tensor(), o, y.tensor(), nullptr).ok());
  EXPECT_THAT(y.half_values(), ElementsAre(4, 4, 3));
  ASSERT_TRUE(average_pool(x.tensor(), o, y.tensor()).ok());
  EXPECT_THAT(y.half_values(), ElementsAre(0.9375f, -0.25f, -1.5f));
  // Negative bytes: the maximum starts from the lowest value, not 0.
  auto b = OwnedTensor::of<int8_t>({1, 1, 2, 3}, {-5, -128, -7, -3, -9, -100});
  auto yb = OwnedTensor::zeros(ScalarType::Int8, {1, 1, 1, 3});
  auto i = OwnedTensor::zeros(ScalarType::Int64, {1, 1, 1, 3});
  ASSERT_TRUE(max_pool(b.tensor(), o, yb.tensor(), &i.tensor()).ok());
  EXPECT_THAT(yb.values<int8_t>(), ElementsAre(-3, -7, -7));
  EXPECT_THAT(i.values<int64_t>(), ElementsAre(3, 2, 2));
}

TEST(Pool, CeilModeDropsAWindowStartingInThePadding) {
  // ONNX doc (maxpool_2d_ceil): 4x4 input 1..16, kernel 3, stride 2, ceil_mode: 2x2.
  auto x = OwnedTensor::of<float>({1, 1, 4, 4}, iota(16, 1));
  PoolOptions o;
  o.kernel_shape = {3, 3};
  o.strides = {2, 2};
  o.ceil_mode = true;
  auto y = OwnedTensor::zeros(ScalarType::Float32, {1, 1, 2, 2});
  ASSERT_TRUE(max_pool(x.tensor(), o, y.tensor(), nullptr).ok());
  EXPECT_THAT(y.values<float>(), ElementsAre(11, 12, 15, 16));
  ASSERT_TRUE(average_pool(x.tensor(), o, y.tensor()).ok());
  EXPECT_THAT(y.values<float>(), ElementsAre(6, 7.5, 12, 13.5));
  // 5 wide, kernel 2, stride 2, pad 1 at the end: ceil gives 3 windows, the third starts at
  // 4, inside the input; with input 4 wide it would start at 4 = in + pad_begin: dropped.
  EXPECT_EQ(*pool_shape(Shape{1, 1, 5}, {{2}, {2}, {}, {0, 1}, AutoPad::NotSet, true}),
            (Shape{1, 1, 3}));
  EXPECT_EQ(*pool_shape(Shape{1, 1, 4}, {{2}, {2}, {}, {0, 1}, AutoPad::NotSet, true}),
            (Shape{1, 1, 2}));
}

TEST(AveragePool, SameLowerAndCountIncludePad) {
  // ONNX doc (averagepool_2d_pads_count_include_pad) on a 5x5 input 1..25, kernel 3, pads 2:
  // the corner window covers 1 input element out of 9.
  auto x = OwnedTensor::of<float>({1, 1, 5, 5}, iota(25, 1));
  PoolOptions o;
  o.kernel_shape = {3, 3};
  o.pads = {2, 2, 2, 2};
  o.count_include_pad = true;
  ASSERT_EQ(*pool_shape(x.tensor().sizes(), o), (Shape{1, 1, 7, 7}));
  auto y = OwnedTensor::zeros(ScalarType::Float32, {1, 1, 7, 7});
  ASSERT_TRUE(average_pool(x.tensor(), o, y.tensor()).ok());
  EXPECT_FLOAT_EQ(y.values<float>()[0], 1.f / 9);
  EXPECT_FLOAT_EQ(y.values<float>()[1], 3.f / 9);
  o.count_include_pad = false;
  ASSERT_TRUE(average_pool(x.tensor(), o, y.tensor()).ok());
  EXPECT_FLOAT_EQ(y.values<float>()[0], 1.f);
  EXPECT_FLOAT_EQ(y.values<float>()[1], 1.5f);
  // SAME_LOWER, kernel 2: the padding goes first, so output 0 averages x[0] only.
  PoolOptions lower;
  lower.kernel_shape = {2};
  lower.auto_pad = AutoPad::SameLower;
  auto x1 = OwnedTensor::of<float>({1, 1, 3}, {2, 4, 8});
  auto y1 = OwnedTensor::zeros(ScalarType::Float32, {1, 1, 3});
  ASSERT_TRUE(average_pool(x1.tensor(), lower, y1.tensor()).ok());
  EXPECT_THAT(y1.values<float>(), ElementsAre(2, 3, 6));
}

TEST(Pool, RejectsBadAttributes) {
  auto x = OwnedTensor::of<float>({1, 1, 4, 4}, iota(16));
  auto y = OwnedTensor::zeros(ScalarType::Float32, {1, 1, 2, 2});
  PoolOptions o;
  Status status = max_pool(x.tensor(), o, y.tensor(), nullptr);
  EXPECT_EQ(status.code(), Error::InvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("attribute 'kernel_shape' is missing"));
  o.kernel_shape = {2, 2, 2};
  EXPECT_THAT(max_pool(x.tensor(), o, y.tensor(), nullptr).message(),
              HasSubstr("attribute 'kernel_shape' [2, 2, 2] has 3 values (expected 2)"));
  o.kernel_shape = {5, 5};
  EXPECT_THAT(average_pool(x.tensor(), o, y.tensor()).message(),
              HasSubstr("run kernel 'AveragePool': spatial axis 0"));
  o.kernel_shape = {2, 2};
  o.p = 0;
  EXPECT_THAT(lp_pool(x.tensor(), o, y.tensor()).message(), HasSubstr("attribute 'p' is 0"));
  o.p = 2;
  o.storage_order = 2;
  EXPECT_THAT(max_pool(x.tensor(), o, y.tensor(), nullptr).message(),
              HasSubstr("attribute 'storage_order' is 2"));
  auto x2 = OwnedTensor::of<float>({4, 4}, iota(16));
  EXPECT_THAT(global_pool_shape(x2.tensor().sizes()).status().message(), HasSubstr("has rank 2"));
}

TEST(PoolKernel, MaxPoolWritesIndicesAsSecondOutput) {
  auto x = OwnedTensor::of<float>({1, 1, 2, 4}, {1, 8, 3, 2, 5, 4, 9, 0});
  auto out = OwnedTensor::resizable(ScalarType::Float32, 4);
  auto idx = OwnedTensor::resizable(ScalarType::Int64, 4);
  EValue in(x.tensor()), result(out.tensor()), indices(idx.tensor());
  Status status = run_kernel("MaxPool", {&in}, {&result, &indices},
                             attrs({{"kernel_shape", Shape{2, 2}}, {"strides", Shape{2, 2}}}));
  ASSERT_TRUE(status.ok()) << status.message();
  EXPECT_EQ(sizes_of(result), (Shape{1, 1, 1, 2}));
  EXPECT_EQ(sizes_of(indices), (Shape{1, 1, 1, 2}));
  EXPECT_THAT(out.values<float>(2), ElementsAre(8, 9));
  EXPECT_THAT(idx.values<int64_t>(2), ElementsAre(1, 6));
  auto avg = OwnedTensor::resizable(ScalarType::Float32, 4);
  EValue avg_result(avg.tensor());
  status = run_kernel("AveragePool", {&in}, {&avg_result},
                      attrs({{"kernel_shape", Shape{1, 2}}, {"strides", Shape{1, 2}}}));
  ASSERT_TRUE(status.ok()) << status.message();
  EXPECT_THAT(avg.values<float>(4), ElementsAre(4.5, 2.5, 4.5, 4.5));
}

TEST(GlobalPool, AverageMaxAndLp) {
  auto x = OwnedTensor::of<float>({1, 2, 2, 2}, {1, -2, 3, 4, 5, 6, -7, 8});
  auto y = OwnedTensor::zeros(ScalarType::Float32, {1, 2, 1, 1});
  ASSERT_TRUE(global_average_pool(x.tensor(), y.tensor()).ok());
  EXPECT_THAT(y.values<float>(), ElementsAre(1.5, 3));
  ASSERT_TRUE(global_max_pool(x.tensor(), y.tensor()).ok());
  EXPECT_THAT(y.values<float>(), ElementsAre(4, 8));
  ASSERT_TRUE(global_lp_pool(x.tensor(), 2, y.tensor()).ok());
  EXPECT_FLOAT_EQ(y.values<float>()[0], std::sqrt(30.f));
  ASSERT_TRUE(global_lp_pool(x.tensor(), 1, y.tensor()).ok());
  EXPECT_THAT(y.values<float>(), ElementsAre(10, 26));
  auto out = OwnedTensor::resizable(ScalarType::Float32, 4);
  EValue in(x.tensor()), result(out.tensor());
  ASSERT_TRUE(run_kernel("GlobalLpPool", {&in}, {&result}, attrs({{"p", int64_t{3}}})).ok());
  EXPECT_EQ(sizes_of(result), (Shape{1, 2, 1, 1}));
  EXPECT_NEAR(out.values<float>(2)[0], std::cbrt(1 + 8 + 27 + 64.0), 1e-5);
}

TEST(MaxUnpool, InvertsMaxPoolIndicesAndChecksThem) {
  // ONNX doc (maxunpool_export_without_output_shape): kernel 2, stride 2.
  auto x = OwnedTensor::of<float>({1, 1, 2, 2}, {1, 2, 3, 4});
  auto i = OwnedTensor::of<int64_t>({1, 1, 2, 2}, {5, 7, 13, 15});
  MaxUnpoolOptions o;
  o.kernel_shape = {2, 2};
  o.strides = {2, 2};
  ASSERT_EQ(*max_unpool_shape(x.tensor().sizes(), o, nullptr), (Shape{1, 1, 4, 4}));
  auto y = OwnedTensor::zeros(ScalarType::Float32, {1, 1, 4, 4});
  ASSERT_TRUE(max_unpool(x.tensor(), i.tensor(), o, y.tensor()).ok());
  EXPECT_THAT(y.values<float>(), ElementsAre(0, 0, 0, 0, 0, 1, 0, 2, 0, 0, 0, 0, 0, 3, 0, 4));

  auto bad = OwnedTensor::of<int64_t>({1, 1, 2, 2}, {5, 7, 16, 15});
  Status status = max_unpool(x.tensor(), bad.tensor(), o, y.tensor());
  EXPECT_EQ(status.code(), Error::InvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("input 1 (I) holds 16 at element 2 (expected 0..15"));
  const Shape wrong = {1, 1, 3, 5};
  EXPECT_THAT(max_unpool_shape(x.tensor().sizes(), o, &wrong).status().message(),
              HasSubstr("input 2 (output_shape) [1, 1, 3, 5] does not fit"));
}

TEST(MaxUnpool, ALargerOutputShapePadsTheUnpooledResultAtTheEnd) {
  // ONNX doc (maxunpool_export_with_output_shape): indices count in the unpooled 4x4 shape.
  auto x = OwnedTensor::of<float>({1, 1, 2, 2}, {5, 6, 7, 8});
  auto i = OwnedTensor::of<int64_t>({1, 1, 2, 2}, {5, 7, 13, 15});
  auto shape = OwnedTensor::of<int64_t>({4}, {1, 1, 5, 5});
  auto out = OwnedTensor::resizable(ScalarType::Float32, 4);
  EValue in_x(x.tensor()), in_i(i.tensor()), in_shape(shape.tensor()), result(out.tensor());
  Status status = run_kernel("MaxUnpool", {&in_x, &in_i, &in_shape}, {&result},
                             attrs({{"kernel_shape", Shape{2, 2}}, {"strides", Shape{2, 2}}}));
  ASSERT_TRUE(status.ok()) << status.message();
  EXPECT_EQ(sizes_of(result), (Shape{1, 1, 5, 5}));
  EXPECT_THAT(out.values<float>(25), ElementsAre(0, 0, 0, 0, 0, 0, 5, 0, 6, 0, 0, 0, 0, 0, 0, 0, 7,
                                                 0, 8, 0, 0, 0, 0, 0, 0));
}

}  // namespace
}  // namespace kiln::kernels
