// ConvTranspose: the ONNX example, seeded random data against a naive double-precision loop
// written here, output_shape and its derived pads, and error cases.

#include <kiln/kernels/kernels.h>
#include <kiln/kernels/test/tensor_helpers.h>
#include <kiln/kernels/test/window_helpers.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace kiln::kernels {
namespace {

using runtime::ScalarType;
using runtime::Status;
using test_helpers::flat_index;
using test_helpers::Geometry;
using test_helpers::indices_of;
using test_helpers::iota;
using test_helpers::numel_of;
using test_helpers::OwnedTensor;
using test_helpers::random_values;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

using Shape = std::vector<int64_t>;

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
  std::vector<double> y(static_cast<size_t>(numel_of(out_shape)));
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
            y[flat_index(out_shape, yi)] += x[flat_index(xs, xi)] * w[flat_index(ws, wi)];
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
    const auto xv = random_values<double>(numel_of(c.x), seed++);
    const auto wv = random_values<double>(numel_of(c.w), seed++);
    const auto bv = random_values<double>(c.w[1] * c.group, seed++);
    Shape out;
    for (size_t a = 0; a + 2 < c.x.size(); ++a) {
      out.push_back(c.g.stride[a] * (c.x[2 + a] - 1) + c.output_padding[a] +
                    (c.g.kernel[a] - 1) * c.g.dilation[a] + 1 - c.g.pad_begin[a] - c.g.pad_end[a]);
    }
    Shape out_shape;
    auto expected = naive_conv_transpose(c.x, xv, c.w, wv, c.g, c.group, out, out_shape);
    const int64_t plane = numel_of(out);
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

}  // namespace
}  // namespace kiln::kernels
