// Resize, Upsample, GridSample, RoiAlign and NonMaxSuppression: values from the ONNX
// operator documentation, seeded random data against naive double-precision versions of the
// ONNX reference implementations, and error cases.

#include <kiln/kernels/image_ops.h>
#include <kiln/kernels/kernels.h>
#include <kiln/kernels/test/tensor_helpers.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

namespace kiln::kernels {
namespace {

using runtime::Error;
using runtime::EValue;
using runtime::ScalarType;
using runtime::Status;
using test_helpers::attrs;
using test_helpers::iota;
using test_helpers::numel_of;
using test_helpers::OwnedTensor;
using test_helpers::random_values;
using test_helpers::run_kernel;
using test_helpers::sizes_of;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

using Shape = std::vector<int64_t>;

void expect_near_all(const std::vector<float>& actual, const std::vector<double>& expected,
                     double tolerance = 1e-5) {
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < actual.size(); ++i) {
    EXPECT_NEAR(actual[i], expected[i], tolerance * (1 + std::abs(expected[i]))) << "at " << i;
  }
}

// ---- A naive Resize, transcribed from the ONNX reference (op_resize.py) ------------------

struct RefResize {
  std::string mode = "nearest";
  std::string coordinates = "half_pixel";
  std::string nearest = "round_prefer_floor";
  double a = -0.75;
  bool exclude_outside = false;
  double extrapolation = 0.0;
  bool antialias = false;
};

std::vector<double> ref_coeffs(const RefResize& o, double ratio, double scale) {
  if (o.mode == "nearest") {
    if (ratio == std::floor(ratio)) return {0, 1};
    if (o.nearest == "round_prefer_floor") return {ratio <= 0.5 ? 1.0 : 0.0, ratio > 0.5 ? 1.0 : 0.0};
    if (o.nearest == "round_prefer_ceil") return {ratio < 0.5 ? 1.0 : 0.0, ratio >= 0.5 ? 1.0 : 0.0};
    if (o.nearest == "floor") return {1, 0};
    return {0, 1};
  }
  const double a = o.a;
  if (!o.antialias) {
    if (o.mode == "linear") return {1 - ratio, ratio};
    const double r1 = ratio + 1, q = 1 - ratio, q1 = 2 - ratio;
    return {((a * r1 - 5 * a) * r1 + 8 * a) * r1 - 4 * a,
            ((a + 2) * ratio - (a + 3)) * ratio * ratio + 1, ((a + 2) * q - (a + 3)) * q * q + 1,
            ((a * q1 - 5 * a) * q1 + 8 * a) * q1 - 4 * a};
  }
  const double s = std::min(scale, 1.0);
  std::vector<double> c;
  if (o.mode == "linear") {
    const int start = static_cast<int>(std::floor(-1 / s) + 1);
    for (int i = start; i < start + 2 - 2 * start; ++i) {
      c.push_back(std::clamp(1 - std::abs((i - ratio) * s), 0.0, 1.0));
    }
  } else {
    const int start = static_cast<int>(std::floor(-2 / s) + 1);
    for (int i = start; i < 2 - start; ++i) {
      const double x = std::abs(s * (i - ratio));
      c.push_back(x <= 1  ? (a + 2) * x * x * x - (a + 3) * x * x + 1
                  : x < 2 ? a * x * x * x - 5 * a * x * x + 8 * a * x - 4 * a
                          : 0.0);
    }
  }
  double sum = 0;
  for (double v : c) sum += v;
  for (double& v : c) v /= sum;
  return c;
}

double ref_interpolate_1d(const RefResize& o, const std::vector<double>& data, double scale,
                          int64_t out_int, double x, double roi_start, double roi_end) {
  const auto in = static_cast<double>(data.size());
  const double out_w = scale * in;
  double xo = 0;
  if (o.coordinates == "align_corners") {
    xo = out_w == 1 ? 0 : x * (in - 1) / (out_w - 1);
  } else if (o.coordinates == "asymmetric") {
    xo = x / scale;
  } else if (o.coordinates == "tf_crop_and_resize") {
    xo = out_w == 1 ? (roi_end - roi_start) * (in - 1) / 2
                    : x * (roi_end - roi_start) * (in - 1) / (out_w - 1);
    xo += roi_start * (in - 1);
    if (xo < 0 || xo > in - 1) return o.extrapolation;
  } else if (o.coordinates == "pytorch_half_pixel") {
    xo = out_w == 1 ? -0.5 : (x + 0.5) / scale - 0.5;
  } else if (o.coordinates == "half_pixel_symmetric") {
    xo = in / 2 * (1 - static_cast<double>(out_int) / out_w) + (x + 0.5) / scale - 0.5;
  } else {
    xo = (x + 0.5) / scale - 0.5;
  }
  const double ratio = xo == std::floor(xo) ? 1.0 : xo - std::floor(xo);
  std::vector<double> c = ref_coeffs(o, ratio, scale);
  const auto n = static_cast<int64_t>(c.size());
  const int64_t pad = (n + 1) / 2;
  std::vector<int64_t> idx;
  const auto limit = static_cast<int64_t>(data.size()) + 2 * pad;
  for (int64_t i = 0; i < limit; ++i) idx.push_back(i);
  std::stable_sort(idx.begin(), idx.end(), [&](int64_t l, int64_t r) {
    return std::abs(xo + pad - l) < std::abs(xo + pad - r);
  });
  idx.resize(static_cast<size_t>(n));
  std::sort(idx.begin(), idx.end());
  double sum_c = 0;
  for (int64_t k = 0; k < n; ++k) {
    const int64_t i = idx[k] - pad;
    if (o.exclude_outside && (i < 0 || i >= static_cast<int64_t>(data.size()))) c[k] = 0;
    sum_c += c[k];
  }
  double out = 0;
  for (int64_t k = 0; k < n; ++k) {
    const int64_t i = std::clamp<int64_t>(idx[k] - pad, 0, static_cast<int64_t>(data.size()) - 1);
    out += (o.exclude_outside ? c[k] / sum_c : c[k]) * data[static_cast<size_t>(i)];
  }
  return out;
}

// The reference's recursion: interpolate every slice along the inner axes, then axis 0.
double ref_interpolate_nd(const RefResize& o, const std::vector<double>& data, const Shape& shape,
                          const std::vector<double>& scales, const Shape& out,
                          const std::vector<int64_t>& x, const std::vector<double>& roi) {
  const size_t r = shape.size();
  if (r == 1) return ref_interpolate_1d(o, data, scales[0], out[0], x[0], roi[0], roi[1]);
  const int64_t inner = numel_of(Shape(shape.begin() + 1, shape.end()));
  std::vector<double> roi_inner(roi.begin() + 1, roi.begin() + r);
  roi_inner.insert(roi_inner.end(), roi.begin() + r + 1, roi.end());
  std::vector<double> column;
  for (int64_t i = 0; i < shape[0]; ++i) {
    std::vector<double> slice(data.begin() + i * inner, data.begin() + (i + 1) * inner);
    column.push_back(ref_interpolate_nd(
        o, slice, Shape(shape.begin() + 1, shape.end()),
        std::vector<double>(scales.begin() + 1, scales.end()), Shape(out.begin() + 1, out.end()),
        std::vector<int64_t>(x.begin() + 1, x.end()), roi_inner));
  }
  return ref_interpolate_1d(o, column, scales[0], out[0], static_cast<double>(x[0]), roi[0],
                            roi[r]);
}

std::vector<double> ref_resize(const RefResize& o, const std::vector<float>& input,
                               const Shape& shape, const std::vector<double>& scales,
                               const Shape& out, std::vector<double> roi = {}) {
  if (roi.empty()) {
    roi.assign(shape.size(), 0.0);
    roi.resize(2 * shape.size(), 1.0);
  }
  std::vector<double> data(input.begin(), input.end());
  std::vector<double> result;
  std::vector<int64_t> x(out.size(), 0);
  for (int64_t e = 0; e < numel_of(out); ++e) {
    result.push_back(ref_interpolate_nd(o, data, shape, scales, out, x, roi));
    for (size_t d = out.size(); d-- > 0;) {
      if (++x[d] < out[d]) break;
      x[d] = 0;
    }
  }
  return result;
}

runtime::Attributes resize_attributes(const RefResize& o, std::vector<int64_t> axes = {}) {
  std::vector<std::pair<std::string, EValue>> entries = {
      {"mode", o.mode},
      {"coordinate_transformation_mode", o.coordinates},
      {"nearest_mode", o.nearest},
      {"cubic_coeff_a", o.a},
      {"exclude_outside", int64_t{o.exclude_outside}},
      {"extrapolation_value", o.extrapolation},
      {"antialias", int64_t{o.antialias}}};
  if (!axes.empty()) entries.emplace_back("axes", std::move(axes));
  return attrs(std::move(entries));
}

// Runs the Resize adapter on X with scales (f32) or sizes (i64), roi when not empty.
Status run_resize(const OwnedTensor& x, const std::vector<float>& roi,
                  const std::vector<float>& scales, const std::vector<int64_t>& sizes,
                  const runtime::Attributes& attributes, OwnedTensor& out) {
  auto roi_t = OwnedTensor::of<float>({static_cast<int64_t>(roi.size())}, roi);
  auto scales_t = OwnedTensor::of<float>({static_cast<int64_t>(scales.size())}, scales);
  auto sizes_t = OwnedTensor::of<int64_t>({static_cast<int64_t>(sizes.size())}, sizes);
  EValue in(const_cast<OwnedTensor&>(x).tensor()), none;
  EValue in_roi(roi_t.tensor()), in_scales(scales_t.tensor()), in_sizes(sizes_t.tensor());
  EValue result(out.tensor());
  Status status = run_kernel("Resize",
                             {&in, roi.empty() ? &none : &in_roi,
                              scales.empty() ? &none : &in_scales, sizes.empty() ? &none : &in_sizes},
                             {&result}, attributes);
  out.tensor() = result.to_tensor();
  return status;
}

TEST(Resize, UpsampleNearestScalesRepeats) {
  auto x = OwnedTensor::of<float>({1, 1, 2, 2}, {1, 2, 3, 4});
  auto out = OwnedTensor::resizable(ScalarType::Float32, 4);
  ASSERT_TRUE(run_resize(x, {}, {1, 1, 2, 3}, {}, attrs({}), out).ok());
  EXPECT_EQ(sizes_of(EValue(out.tensor())), (Shape{1, 1, 4, 6}));
  EXPECT_THAT(out.values<float>(), ElementsAre(1, 1, 1, 2, 2, 2, 1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4,
                                               4, 3, 3, 3, 4, 4, 4));
}

TEST(Resize, LinearHalfPixelMatchesTheOnnxExample) {
  auto x = OwnedTensor::of<float>({1, 1, 2, 2}, {1, 2, 3, 4});
  auto out = OwnedTensor::resizable(ScalarType::Float32, 4);
  ASSERT_TRUE(run_resize(x, {}, {1, 1, 2, 2}, {}, attrs({{"mode", "linear"}}), out).ok());
  expect_near_all(out.values<float>(), {1, 1.25, 1.75, 2, 1.5, 1.75, 2.25, 2.5, 2.5, 2.75, 3.25,
                                        3.5, 3, 3.25, 3.75, 4});
}

TEST(Resize, AlignCornersUsesTheUnroundedOutputWidth) {
  auto x = OwnedTensor::of<float>({1, 1, 2, 4}, iota(8, 1));
  auto out = OwnedTensor::resizable(ScalarType::Float32, 4);
  ASSERT_TRUE(run_resize(x, {}, {1, 1, 0.6f, 0.6f}, {},
                         attrs({{"mode", "linear"}, {"coordinate_transformation_mode",
                                                     "align_corners"}}),
                         out)
                  .ok());
  EXPECT_EQ(sizes_of(EValue(out.tensor())), (Shape{1, 1, 1, 2}));
  expect_near_all(out.values<float>(), {1, 3.142857142857143});
}

TEST(Resize, TfCropAndResizeMatchesTheOnnxExample) {
  auto x = OwnedTensor::of<float>({1, 1, 4, 4}, iota(16, 1));
  auto out = OwnedTensor::resizable(ScalarType::Float32, 4);
  ASSERT_TRUE(run_resize(x, {0, 0, 0.4f, 0.6f, 1, 1, 0.6f, 0.8f}, {}, {1, 1, 3, 3},
                         attrs({{"mode", "linear"},
                                {"coordinate_transformation_mode", "tf_crop_and_resize"}}),
                         out)
                  .ok());
  expect_near_all(out.values<float>(), {7.6, 7.9, 8.2, 8.8, 9.1, 9.4, 10, 10.3, 10.6});
}

TEST(Resize, TfCropAndResizeExtrapolates) {
  auto x = OwnedTensor::of<float>({1, 1, 4, 4}, iota(16, 1));
  auto out = OwnedTensor::resizable(ScalarType::Float32, 4);
  ASSERT_TRUE(run_resize(x, {0, 0, 0.4f, 0.6f, 1, 1, 1.2f, 1.7f}, {}, {1, 1, 3, 3},
                         attrs({{"mode", "linear"},
                                {"coordinate_transformation_mode", "tf_crop_and_resize"},
                                {"extrapolation_value", 10.0}}),
                         out)
                  .ok());
  // From the ONNX operator documentation.
  expect_near_all(out.values<float>(), {7.6, 10, 10, 12.400001, 10, 10, 10, 10, 10});
}

struct RandomCase {
  RefResize options;
  Shape shape;
  std::vector<float> scales;  // or sizes, when empty
  Shape sizes;
};

TEST(Resize, MatchesTheOnnxReferenceOnRandomData) {
  std::vector<RandomCase> cases;
  const char* coordinates[] = {"half_pixel", "half_pixel_symmetric", "pytorch_half_pixel",
                               "align_corners", "asymmetric"};
  const char* nearest[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};
  uint32_t seed = 1;
  for (const char* mode : {"nearest", "linear", "cubic"}) {
    for (const char* coordinate : coordinates) {
      for (int variant = 0; variant < 4; ++variant) {
        RandomCase c;
        c.options.mode = mode;
        c.options.coordinates = coordinate;
        c.options.nearest = nearest[variant];
        // The reference divides by zero when nearest excludes its only tap.
        c.options.exclude_outside = variant % 2 == 1 && std::string(mode) != "nearest";
        c.options.antialias = variant >= 2 && std::string(mode) != "nearest";
        c.options.a = variant == 3 ? -0.5 : -0.75;
        c.shape = variant % 2 == 0 ? Shape{1, 2, 5, 7} : Shape{2, 3, 4, 5};
        if (variant < 2) {
          c.scales = variant == 0 ? std::vector<float>{1, 1, 2.3f, 0.6f}
                                  : std::vector<float>{1, 1.5f, 0.5f, 1.7f};
        } else {
          c.sizes = variant == 2 ? Shape{1, 2, 2, 9} : Shape{3, 3, 7, 2};
        }
        cases.push_back(c);
      }
    }
  }
  for (const RandomCase& c : cases) {
    SCOPED_TRACE(c.options.mode + " " + c.options.coordinates + " " + c.options.nearest +
                 (c.options.exclude_outside ? " exclude_outside" : "") +
                 (c.options.antialias ? " antialias" : ""));
    auto values = random_values(static_cast<size_t>(numel_of(c.shape)), seed++, -2, 2);
    auto x = OwnedTensor::of<float>(c.shape, values);
    auto out = OwnedTensor::resizable(ScalarType::Float32, 4, 2048);
    ASSERT_TRUE(run_resize(x, {}, c.scales, c.sizes, resize_attributes(c.options), out).ok());
    Shape out_shape = c.sizes;
    std::vector<double> scales;
    for (size_t d = 0; d < c.shape.size(); ++d) {
      const auto in = static_cast<double>(c.shape[d]);
      if (!c.scales.empty()) {
        scales.push_back(c.scales[d]);
        out_shape.push_back(static_cast<int64_t>(std::floor(static_cast<double>(c.scales[d]) * in)));
      } else {
        scales.push_back(static_cast<double>(c.sizes[d]) / in);
      }
    }
    ASSERT_EQ(sizes_of(EValue(out.tensor())), out_shape);
    expect_near_all(out.values<float>(), ref_resize(c.options, values, c.shape, scales, out_shape));
  }
}

TEST(Resize, ThreeSpatialAxesAndAxesAttribute) {
  RefResize o;
  o.mode = "linear";
  auto values = random_values(2 * 3 * 4 * 5, 7);
  auto x = OwnedTensor::of<float>({2, 3, 4, 5}, values);
  auto out = OwnedTensor::resizable(ScalarType::Float32, 4, 2048);
  // axes [-3, 3]: scales for axes 1 and 3 only.
  ASSERT_TRUE(run_resize(x, {}, {2.0f, 0.8f}, {}, resize_attributes(o, {-3, 3}), out).ok());
  ASSERT_EQ(sizes_of(EValue(out.tensor())), (Shape{2, 6, 4, 4}));
  expect_near_all(out.values<float>(),
                  ref_resize(o, values, {2, 3, 4, 5}, {1, 2.0f, 1, 0.8f}, {2, 6, 4, 4}));
  o.mode = "cubic";
  auto cube = random_values(3 * 4 * 5, 8);
  auto x3 = OwnedTensor::of<float>({3, 4, 5}, cube);
  auto out3 = OwnedTensor::resizable(ScalarType::Float32, 3, 2048);
  ASSERT_TRUE(run_resize(x3, {}, {}, {5, 3, 8}, resize_attributes(o), out3).ok());
  expect_near_all(out3.values<float>(),
                  ref_resize(o, cube, {3, 4, 5}, {5.0 / 3, 3.0 / 4, 8.0 / 5}, {5, 3, 8}));
}

TEST(Resize, KeepAspectRatioPolicy) {
  auto x = OwnedTensor::of<float>({1, 1, 2, 4}, iota(8, 1));
  auto out = OwnedTensor::resizable(ScalarType::Float32, 4);
  ASSERT_TRUE(run_resize(x, {}, {}, {1, 3},
                         attrs({{"axes", std::vector<int64_t>{2, 3}},
                                {"keep_aspect_ratio_policy", "not_larger"}}),
                         out)
                  .ok());
  EXPECT_EQ(sizes_of(EValue(out.tensor())), (Shape{1, 1, 1, 2}));
  EXPECT_THAT(out.values<float>(), ElementsAre(1, 3));
  ASSERT_TRUE(run_resize(x, {}, {}, {1, 3},
                         attrs({{"axes", std::vector<int64_t>{2, 3}},
                                {"keep_aspect_ratio_policy", "not_smaller"}}),
                         out)
                  .ok());
  EXPECT_EQ(sizes_of(EValue(out.tensor())), (Shape{1, 1, 2, 3}));
}

TEST(Resize, TfCropAndResizeOnRandomData) {
  RefResize o;
  o.coordinates = "tf_crop_and_resize";
  o.extrapolation = -3;
  auto values = random_values(2 * 5 * 6, 11);
  std::vector<float> roi = {0, -0.2f, 0.1f, 1, 0.9f, 1.3f};
  for (const char* mode : {"nearest", "linear", "cubic"}) {
    o.mode = mode;
    auto x = OwnedTensor::of<float>({2, 5, 6}, values);
    auto out = OwnedTensor::resizable(ScalarType::Float32, 3, 2048);
    ASSERT_TRUE(run_resize(x, roi, {}, {2, 7, 4}, resize_attributes(o), out).ok());
    expect_near_all(out.values<float>(),
                    ref_resize(o, values, {2, 5, 6}, {1, 7.0 / 5, 4.0 / 6}, {2, 7, 4},
                               std::vector<double>(roi.begin(), roi.end())));
  }
}

TEST(Resize, IntegerAndHalfDtypes) {
  auto x = OwnedTensor::of<uint8_t>({1, 3}, {0, 255, 10});
  auto out = OwnedTensor::resizable(ScalarType::UInt8, 2);
  ASSERT_TRUE(run_resize(x, {}, {1, 2}, {}, attrs({{"mode", "linear"}}), out).ok());
  // Linear on [0, 255, 10] at half-pixel x = -0.25, 0.25, 0.75, ...: rounded to nearest.
  EXPECT_THAT(out.values<uint8_t>(), ElementsAre(0, 64, 191, 194, 71, 10));
  auto cubic = OwnedTensor::of<uint8_t>({1, 3}, {0, 255, 0});
  ASSERT_TRUE(run_resize(cubic, {}, {1, 2}, {}, attrs({{"mode", "cubic"}}), out).ok());
  for (uint8_t v : out.values<uint8_t>()) EXPECT_LE(v, 255);  // saturated, not wrapped
  EXPECT_EQ(out.values<uint8_t>()[0], 0);  // the overshoot below 0 saturates
  auto half = OwnedTensor::half_of(ScalarType::Float16, {1, 2}, {1, 3});
  auto half_out = OwnedTensor::resizable(ScalarType::Float16, 2);
  ASSERT_TRUE(run_resize(half, {}, {1, 2}, {}, attrs({{"mode", "linear"}}), half_out).ok());
  EXPECT_THAT(half_out.half_values(), ElementsAre(1, 1.5, 2.5, 3));
}

TEST(Resize, OpsetTenFormAndUpsample) {
  // Resize-10 (X, scales) and Upsample are asymmetric; nearest floors when upsampling and
  // rounds up when downsampling.
  auto x = OwnedTensor::of<float>({1, 1, 2, 4}, iota(8, 1));
  auto scales = OwnedTensor::of<float>({4}, {1, 1, 0.6f, 0.6f});
  auto out = OwnedTensor::resizable(ScalarType::Float32, 4);
  EValue in(x.tensor()), in_scales(scales.tensor()), result(out.tensor());
  ASSERT_TRUE(run_kernel("Resize", {&in, &in_scales}, {&result}).ok());
  EXPECT_EQ(sizes_of(result), (Shape{1, 1, 1, 2}));
  EXPECT_THAT(out.values<float>(2), ElementsAre(1, 3));
  auto small = OwnedTensor::of<float>({1, 2}, {1, 2});
  out = OwnedTensor::resizable(ScalarType::Float32, 2);
  result = EValue(out.tensor());
  EValue in_small(small.tensor());
  ASSERT_TRUE(run_kernel("Upsample", {&in_small}, {&result},
                         attrs({{"scales", std::vector<double>{1, 3}}}))
                  .ok());
  EXPECT_EQ(sizes_of(result), (Shape{1, 6}));
  EXPECT_THAT(out.values<float>(6), ElementsAre(1, 1, 1, 2, 2, 2));
  auto up = OwnedTensor::of<float>({2}, {1, 2});
  EValue in_up(up.tensor());
  ASSERT_TRUE(run_kernel("Upsample", {&in_small, &in_up}, {&result}, attrs({{"mode", "linear"}}))
                  .ok());
  EXPECT_THAT(out.values<float>(4), ElementsAre(1, 1.5, 2, 2));
  Status status = run_kernel("Upsample", {&in_small}, {&result});
  EXPECT_EQ(status.code(), Error::InvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("run kernel 'Upsample': scales are missing"));
}

TEST(Resize, RejectsBadArguments) {
  auto x = OwnedTensor::of<float>({1, 1, 2, 2}, {1, 2, 3, 4});
  auto out = OwnedTensor::resizable(ScalarType::Float32, 4);
  Status status = run_resize(x, {}, {1, 1, 2, 2}, {1, 1, 4, 4}, attrs({}), out);
  EXPECT_EQ(status.code(), Error::InvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("run kernel 'Resize': both of input 2 (scales) and "
                                          "input 3 (sizes) are given (expected exactly one)"));
  status = run_resize(x, {}, {}, {}, attrs({}), out);
  EXPECT_THAT(status.message(), HasSubstr("neither of input 2 (scales) and input 3 (sizes)"));
  status = run_resize(x, {}, {1, 2}, {}, attrs({}), out);
  EXPECT_EQ(status.code(), Error::InvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("scales have 2 values (expected 4"));
  status = run_resize(x, {}, {1, 1, 0, 2}, {}, attrs({}), out);
  EXPECT_THAT(status.message(), HasSubstr("scales have 0.000000 at position 2"));
  status = run_resize(x, {}, {}, {1, 1, -1, 2}, attrs({}), out);
  EXPECT_THAT(status.message(), HasSubstr("sizes have -1 at position 2"));
  status = run_resize(x, {}, {1, 1, 2, 2}, {}, attrs({{"mode", "bilinear"}}), out);
  EXPECT_THAT(status.message(),
              HasSubstr("attribute 'mode' is 'bilinear' (expected 'nearest', 'linear' or 'cubic')"));
  status = run_resize(x, {}, {1, 1, 2, 2}, {},
                      attrs({{"coordinate_transformation_mode", "tf_crop_and_resize"}}), out);
  EXPECT_THAT(status.message(), HasSubstr("roi has 0 values (expected 8"));
  status = run_resize(x, {}, {2, 2}, {}, attrs({{"axes", std::vector<int64_t>{3, -1}}}), out);
  EXPECT_THAT(status.message(), HasSubstr("attribute 'axes' [3, -1] has -1 (expected distinct"));
  auto tight = OwnedTensor::resizable(ScalarType::Float32, 4, 8);
  status = run_resize(x, {}, {1, 1, 2, 3}, {}, attrs({}), tight);
  EXPECT_THAT(status.message(), HasSubstr("resize output 0 to [1, 1, 4, 6]"));
}

// ---- GridSample ----------------------------------------------------------------------------

// A naive GridSample transcribed from the ONNX reference (op_grid_sample.py).
struct RefGrid {
  std::string mode, padding;
  bool align = false;
};

double ref_reflect(double x, double lo, double hi) {
  const double range = hi - lo;
  if (x < lo) {
    const double dx = lo - x;
    const int n = static_cast<int>(dx / range);
    const double r = dx - n * range;
    return n % 2 == 0 ? lo + r : hi - r;
  }
  if (x > hi) {
    const double dx = x - hi;
    const int n = static_cast<int>(dx / range);
    const double r = dx - n * range;
    return n % 2 == 0 ? hi - r : lo + r;
  }
  return x;
}

double ref_pixel(const RefGrid& o, const std::vector<double>& data, const Shape& dims,
                 const std::vector<int64_t>& index, const std::vector<double>& lo,
                 const std::vector<double>& hi) {
  int64_t offset = 0;
  for (size_t d = 0; d < dims.size(); ++d) {
    int64_t i = index[d];
    if (o.padding == "zeros") {
      if (i < 0 || i >= dims[d]) return 0;
    } else if (o.padding == "border") {
      i = std::clamp<int64_t>(i, 0, dims[d] - 1);
    } else {
      i = static_cast<int64_t>(ref_reflect(static_cast<double>(i), lo[d], hi[d]));
    }
    offset = offset * dims[d] + i;
  }
  return data[static_cast<size_t>(offset)];
}

double ref_cubic(double x) {
  const double a = -0.75;
  x = std::abs(x);
  return x <= 1 ? ((a + 2) * x - (a + 3)) * x * x + 1 : ((a * x - 5 * a) * x + 8 * a) * x - 4 * a;
}

double ref_grid_point(const RefGrid& o, const std::vector<double>& data, const Shape& dims,
                      std::vector<double> x) {
  const size_t k = dims.size();
  std::vector<double> lo(k), hi(k);
  for (size_t d = 0; d < k; ++d) {
    lo[d] = o.align ? 0 : -0.5;
    hi[d] = o.align ? dims[d] - 1.0 : dims[d] - 0.5;
    if (o.mode == "nearest") x[d] = k == 3 ? std::round(x[d]) : std::nearbyint(x[d]);
    if (x[d] < lo[d] || x[d] > hi[d]) {
      if (o.padding == "border") x[d] = std::clamp(x[d], 0.0, dims[d] - 1.0);
      if (o.padding == "reflection") x[d] = ref_reflect(x[d], lo[d], hi[d]);
    }
  }
  if (o.mode == "nearest") {
    std::vector<int64_t> index;
    for (double v : x) index.push_back(static_cast<int64_t>(v));
    return ref_pixel(o, data, dims, index, lo, hi);
  }
  // Tensor product of per-axis 1-D taps (the reference's recursion, unrolled).
  const int taps = o.mode == "bilinear" ? 2 : 4;
  std::vector<int64_t> index(k);
  double sum = 0;
  int64_t combos = 1;
  for (size_t d = 0; d < k; ++d) combos *= taps;
  for (int64_t c = 0; c < combos; ++c) {
    double w = 1;
    int64_t rest = c;
    for (size_t d = k; d-- > 0;) {
      const int t = static_cast<int>(rest % taps);
      rest /= taps;
      const double base = std::floor(x[d]);
      const double f = x[d] - base;
      if (taps == 2) {
        index[d] = static_cast<int64_t>(base) + t;
        w *= t == 0 ? 1 - f : f;
      } else {
        index[d] = static_cast<int64_t>(base) + t - 1;
        w *= ref_cubic(f + 1 - t);
      }
    }
    sum += w * ref_pixel(o, data, dims, index, lo, hi);
  }
  return sum;
}

TEST(GridSample, HandValues) {
  auto x = OwnedTensor::of<float>({1, 1, 2, 2}, {1, 2, 3, 4});
  auto grid = OwnedTensor::of<float>({1, 1, 3, 2}, {0, 0, -1, -1, 1, -1});
  auto out = OwnedTensor::resizable(ScalarType::Float32, 4);
  EValue in(x.tensor()), in_grid(grid.tensor()), result(out.tensor());
  ASSERT_TRUE(run_kernel("GridSample", {&in, &in_grid}, {&result}).ok());
  EXPECT_EQ(sizes_of(result), (Shape{1, 1, 1, 3}));
  // Centre: the mean; corner (-1, -1) is the outer edge: a quarter of pixel (0, 0); (1, -1)
  // is the top-right edge: a quarter of pixel (0, 1).
  EXPECT_THAT(out.values<float>(3), ElementsAre(2.5, 0.25, 0.5));
  ASSERT_TRUE(run_kernel("GridSample", {&in, &in_grid}, {&result},
                         attrs({{"padding_mode", "border"}}))
                  .ok());
  EXPECT_THAT(out.values<float>(3), ElementsAre(2.5, 1, 2));
  ASSERT_TRUE(run_kernel("GridSample", {&in, &in_grid}, {&result},
                         attrs({{"align_corners", int64_t{1}}, {"mode", "nearest"}}))
                  .ok());
  // (0, 0) maps to (0.5, 0.5), which rounds to even: pixel (0, 0).
  EXPECT_THAT(out.values<float>(3), ElementsAre(1, 1, 2));
}

TEST(GridSample, MatchesTheOnnxReferenceOnRandomData) {
  uint32_t seed = 100;
  for (const Shape& xs : {Shape{2, 2, 3, 4}, Shape{1, 2, 3, 2, 4}}) {
    const size_t k = xs.size() - 2;
    Shape gs = {xs[0]};
    for (size_t d = 0; d < k; ++d) gs.push_back(static_cast<int64_t>(2 + d));
    gs.push_back(static_cast<int64_t>(k));
    for (const char* mode : {"bilinear", "nearest", "bicubic"}) {
      for (const char* padding : {"zeros", "border", "reflection"}) {
        for (bool align : {false, true}) {
          RefGrid o{mode, padding, align};
          SCOPED_TRACE(std::string(mode) + " " + padding + (align ? " align" : "") + " rank " +
                       std::to_string(xs.size()));
          auto values = random_values(static_cast<size_t>(numel_of(xs)), seed++);
          auto coords = random_values(static_cast<size_t>(numel_of(gs)), seed++, -1.6, 1.6);
          auto x = OwnedTensor::of<float>(xs, values);
          auto grid = OwnedTensor::of<float>(gs, coords);
          auto out = OwnedTensor::resizable(ScalarType::Float32, xs.size());
          EValue in(x.tensor()), in_grid(grid.tensor()), result(out.tensor());
          ASSERT_TRUE(run_kernel("GridSample", {&in, &in_grid}, {&result},
                                 attrs({{"mode", mode},
                                        {"padding_mode", padding},
                                        {"align_corners", int64_t{align}}}))
                          .ok());
          const Shape dims(xs.begin() + 2, xs.end());
          const int64_t plane = numel_of(dims);
          const int64_t positions = numel_of(Shape(gs.begin() + 1, gs.end() - 1));
          std::vector<double> expected;
          for (int64_t n = 0; n < xs[0]; ++n) {
            for (int64_t c = 0; c < xs[1]; ++c) {
              std::vector<double> data(values.begin() + (n * xs[1] + c) * plane,
                                       values.begin() + (n * xs[1] + c + 1) * plane);
              for (int64_t p = 0; p < positions; ++p) {
                std::vector<double> xv(k);
                for (size_t d = 0; d < k; ++d) {
                  const double g = coords[static_cast<size_t>((n * positions + p) * k + k - 1 - d)];
                  const auto size = static_cast<double>(dims[d]);
                  // denormalized in float32, as the reference
                  xv[d] = static_cast<float>(align ? (g + 1) / 2 * (size - 1)
                                                   : ((g + 1) * size - 1) / 2);
                }
                expected.push_back(ref_grid_point(o, data, dims, xv));
              }
            }
          }
          expect_near_all(out.values<float>(result.to_tensor().numel()), expected, 1e-4);
        }
      }
    }
  }
}

TEST(GridSample, RejectsBadShapes) {
  auto x = OwnedTensor::of<float>({1, 1, 2, 2}, {1, 2, 3, 4});
  auto grid = OwnedTensor::of<float>({1, 1, 2, 3}, {0, 0, 0, 0, 0, 0});
  auto out = OwnedTensor::resizable(ScalarType::Float32, 4);
  EValue in(x.tensor()), in_grid(grid.tensor()), result(out.tensor());
  Status status = run_kernel("GridSample", {&in, &in_grid}, {&result});
  EXPECT_EQ(status.code(), Error::InvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("run kernel 'GridSample': input 0 has shape [1, 1, 2, "
                                          "2] and input 1 (grid) [1, 1, 2, 3]"));
  status = run_kernel("GridSample", {&in, &in}, {&result}, attrs({{"mode", "area"}}));
  EXPECT_THAT(status.message(), HasSubstr("attribute 'mode' is 'area'"));
}

// ---- RoiAlign ------------------------------------------------------------------------------

TEST(RoiAlign, HandValues) {
  auto x = OwnedTensor::of<float>({1, 1, 2, 2}, {1, 2, 3, 4});
  auto rois = OwnedTensor::of<float>({1, 4}, {0, 0, 2, 2});
  auto batch = OwnedTensor::of<int64_t>({1}, {0});
  auto out = OwnedTensor::resizable(ScalarType::Float32, 4);
  EValue in(x.tensor()), in_rois(rois.tensor()), in_batch(batch.tensor()), result(out.tensor());
  ASSERT_TRUE(run_kernel("RoiAlign", {&in, &in_rois, &in_batch}, {&result},
                         attrs({{"sampling_ratio", int64_t{2}}}))
                  .ok());
  EXPECT_EQ(sizes_of(result), (Shape{1, 1, 1, 1}));
  EXPECT_THAT(out.values<float>(1), ElementsAre(2.5));  // samples at the four pixel centres
  ASSERT_TRUE(run_kernel("RoiAlign", {&in, &in_rois, &in_batch}, {&result},
                         attrs({{"sampling_ratio", int64_t{2}},
                                {"coordinate_transformation_mode", "output_half_pixel"}}))
                  .ok());
  // Samples at 0.5 and 1.5, the latter clamped to the last pixel: 2.5, 3, 3.5, 4.
  EXPECT_THAT(out.values<float>(1), ElementsAre(3.25));
}

// A naive RoiAlign, one bilinear sample at a time (the ONNX reference's formulas).
double ref_bilinear(const std::vector<float>& plane, int64_t h, int64_t w, double y, double x,
                    bool max_mode) {
  if (y < -1.0 || y > h || x < -1.0 || x > w) return 0;
  y = std::max(y, 0.0);
  x = std::max(x, 0.0);
  int64_t y0 = static_cast<int64_t>(y), x0 = static_cast<int64_t>(x), y1 = y0 + 1, x1 = x0 + 1;
  if (y0 >= h - 1) y = static_cast<double>(y0 = y1 = h - 1);
  if (x0 >= w - 1) x = static_cast<double>(x0 = x1 = w - 1);
  const double ly = y - y0, lx = x - x0;
  const double v[4] = {(1 - ly) * (1 - lx) * plane[y0 * w + x0], (1 - ly) * lx * plane[y0 * w + x1],
                       ly * (1 - lx) * plane[y1 * w + x0], ly * lx * plane[y1 * w + x1]};
  return max_mode ? std::max({v[0], v[1], v[2], v[3]}) : v[0] + v[1] + v[2] + v[3];
}

TEST(RoiAlign, MatchesANaiveLoopOnRandomData) {
  const Shape xs = {2, 3, 6, 7};
  auto values = random_values(static_cast<size_t>(numel_of(xs)), 21, 0, 5);
  std::vector<float> boxes = {0.5f, 1, 5, 4.5f, 2, 0, 6.5f, 5, 1, 1, 1.5f, 1.2f};
  std::vector<int64_t> indices = {1, 0, 1};
  for (bool half_pixel : {true, false}) {
    for (bool max_mode : {false, true}) {
      for (int64_t ratio : {0, 2}) {
        SCOPED_TRACE(std::to_string(half_pixel) + std::to_string(max_mode) + std::to_string(ratio));
        const int64_t oh = 3, ow = 2;
        const double scale = 0.9;
        auto x = OwnedTensor::of<float>(xs, values);
        auto rois = OwnedTensor::of<float>({3, 4}, boxes);
        auto batch = OwnedTensor::of<int64_t>({3}, indices);
        auto out = OwnedTensor::resizable(ScalarType::Float32, 4);
        EValue in(x.tensor()), in_rois(rois.tensor()), in_batch(batch.tensor());
        EValue result(out.tensor());
        ASSERT_TRUE(run_kernel("RoiAlign", {&in, &in_rois, &in_batch}, {&result},
                               attrs({{"coordinate_transformation_mode",
                                       half_pixel ? "half_pixel" : "output_half_pixel"},
                                      {"mode", max_mode ? "max" : "avg"},
                                      {"output_height", oh},
                                      {"output_width", ow},
                                      {"sampling_ratio", ratio},
                                      {"spatial_scale", scale}}))
                        .ok());
        ASSERT_EQ(sizes_of(result), (Shape{3, 3, oh, ow}));
        std::vector<double> expected;
        for (size_t r = 0; r < 3; ++r) {
          const double off = half_pixel ? 0.5 : 0.0;
          const double x0 = boxes[r * 4] * scale - off, y0 = boxes[r * 4 + 1] * scale - off;
          double rw = boxes[r * 4 + 2] * scale - off - x0, rh = boxes[r * 4 + 3] * scale - off - y0;
          if (!half_pixel) rw = std::max(rw, 1.0), rh = std::max(rh, 1.0);
          const int64_t gh = ratio > 0 ? ratio : static_cast<int64_t>(std::ceil(rh / oh));
          const int64_t gw = ratio > 0 ? ratio : static_cast<int64_t>(std::ceil(rw / ow));
          for (int64_t c = 0; c < 3; ++c) {
            std::vector<float> plane(values.begin() + (indices[r] * 3 + c) * 42,
                                     values.begin() + (indices[r] * 3 + c + 1) * 42);
            for (int64_t ph = 0; ph < oh; ++ph) {
              for (int64_t pw = 0; pw < ow; ++pw) {
                double acc = max_mode ? -1e300 : 0;
                for (int64_t iy = 0; iy < gh; ++iy) {
                  for (int64_t ix = 0; ix < gw; ++ix) {
                    const double y = y0 + ph * rh / oh + (iy + 0.5) * rh / oh / gh;
                    const double xx = x0 + pw * rw / ow + (ix + 0.5) * rw / ow / gw;
                    const double v = ref_bilinear(plane, 6, 7, y, xx, max_mode);
                    acc = max_mode ? std::max(acc, v) : acc + v;
                  }
                }
                expected.push_back(max_mode ? acc : acc / std::max<int64_t>(gh * gw, 1));
              }
            }
          }
        }
        expect_near_all(out.values<float>(result.to_tensor().numel()), expected);
      }
    }
  }
}

TEST(RoiAlign, RejectsABatchIndexOutOfRange) {
  auto x = OwnedTensor::of<float>({1, 1, 2, 2}, {1, 2, 3, 4});
  auto rois = OwnedTensor::of<float>({1, 4}, {0, 0, 2, 2});
  auto batch = OwnedTensor::of<int64_t>({1}, {1});
  auto out = OwnedTensor::resizable(ScalarType::Float32, 4);
  EValue in(x.tensor()), in_rois(rois.tensor()), in_batch(batch.tensor()), result(out.tensor());
  Status status = run_kernel("RoiAlign", {&in, &in_rois, &in_batch}, {&result});
  EXPECT_EQ(status.code(), Error::InvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("run kernel 'RoiAlign': input 2 (batch_indices) has 1 "
                                          "at element 0 (expected 0..0"));
  status = run_kernel("RoiAlign", {&in, &in_rois, &in_batch}, {&result},
                      attrs({{"output_height", int64_t{0}}}));
  EXPECT_THAT(status.message(), HasSubstr("'output_height', 'output_width' and 'sampling_ratio' "
                                          "are 0, 1 and 0"));
}

// ---- NonMaxSuppression ---------------------------------------------------------------------

struct NmsRun {
  Status status;
  Shape shape;
  std::vector<int64_t> values;
};

NmsRun run_nms(const std::vector<float>& boxes, const std::vector<float>& scores, int64_t classes,
               int64_t max_boxes, float iou, const std::vector<float>& score_threshold,
               int64_t center_point_box = 0) {
  const auto spatial = static_cast<int64_t>(boxes.size() / 4);
  auto b = OwnedTensor::of<float>({1, spatial, 4}, boxes);
  auto s = OwnedTensor::of<float>({1, classes, spatial}, scores);
  auto m = OwnedTensor::of<int64_t>({1}, {max_boxes});
  auto i = OwnedTensor::of<float>({1}, {iou});
  auto t = OwnedTensor::of<float>({static_cast<int64_t>(score_threshold.size())}, score_threshold);
  auto out = OwnedTensor::resizable(ScalarType::Int64, 2, 64);
  EValue in_b(b.tensor()), in_s(s.tensor()), in_m(m.tensor()), in_i(i.tensor()), in_t(t.tensor());
  EValue none, result(out.tensor());
  NmsRun run;
  run.status = run_kernel("NonMaxSuppression",
                          {&in_b, &in_s, &in_m, &in_i, score_threshold.empty() ? &none : &in_t},
                          {&result}, attrs({{"center_point_box", center_point_box}}));
  if (run.status.ok()) {
    run.shape = sizes_of(result);
    run.values = out.values<int64_t>(result.to_tensor().numel());
  }
  return run;
}

const std::vector<float> kBoxes = {0, 0, 1, 1, 0, 0.1f, 1, 1.1f, 0, -0.1f, 1, 0.9f,
                                   0, 10, 1, 11, 0, 10.1f, 1, 11.1f, 0, 100, 1, 101};
const std::vector<float> kScores = {0.9f, 0.75f, 0.6f, 0.95f, 0.5f, 0.3f};

TEST(NonMaxSuppression, SuppressesByIouAsTheOnnxExamples) {
  NmsRun run = run_nms(kBoxes, kScores, 1, 3, 0.5f, {0.0f});
  ASSERT_TRUE(run.status.ok()) << run.status.message();
  EXPECT_EQ(run.shape, (Shape{3, 3}));
  EXPECT_THAT(run.values, ElementsAre(0, 0, 3, 0, 0, 0, 0, 0, 5));
  run = run_nms(kBoxes, kScores, 1, 2, 0.5f, {0.0f});  // limit_output_size
  EXPECT_THAT(run.values, ElementsAre(0, 0, 3, 0, 0, 0));
  run = run_nms(kBoxes, kScores, 1, 3, 0.5f, {0.4f});  // suppress_by_IOU_and_scores
  EXPECT_THAT(run.values, ElementsAre(0, 0, 3, 0, 0, 0));
  const std::vector<float> centers = {0.5f, 0.5f, 1, 1, 0.5f, 0.6f, 1, 1, 0.5f, 0.4f, 1, 1,
                                      0.5f, 10.5f, 1, 1, 0.5f, 10.6f, 1, 1, 0.5f, 100.5f, 1, 1};
  run = run_nms(centers, kScores, 1, 3, 0.5f, {0.0f}, 1);
  EXPECT_THAT(run.values, ElementsAre(0, 0, 3, 0, 0, 0, 0, 0, 5));
  std::vector<float> two_classes = kScores;
  two_classes.insert(two_classes.end(), kScores.begin(), kScores.end());
  run = run_nms(kBoxes, two_classes, 2, 2, 0.5f, {});  // no score threshold
  EXPECT_THAT(run.values, ElementsAre(0, 0, 3, 0, 0, 0, 0, 1, 3, 0, 1, 0));
}

TEST(NonMaxSuppression, SelectsNothingWithZeroBoxesPerClass) {
  NmsRun run = run_nms(kBoxes, kScores, 1, 0, 0.5f, {});
  ASSERT_TRUE(run.status.ok());
  EXPECT_EQ(run.shape, (Shape{0, 3}));
}

TEST(NonMaxSuppression, IdenticalBoxesKeepTheFirst) {
  std::vector<float> boxes, scores;
  for (int i = 0; i < 5; ++i) {
    boxes.insert(boxes.end(), {0, 0, 1, 1});
    scores.push_back(0.9f);
  }
  NmsRun run = run_nms(boxes, scores, 1, 3, 0.5f, {});
  EXPECT_THAT(run.values, ElementsAre(0, 0, 0));
}

TEST(NonMaxSuppression, RejectsBadArguments) {
  NmsRun run = run_nms(kBoxes, kScores, 1, 3, 1.5f, {});
  EXPECT_EQ(run.status.code(), Error::InvalidArgument);
  EXPECT_THAT(run.status.message(),
              HasSubstr("run kernel 'NonMaxSuppression': input 3 (iou_threshold) is 1.5"));
  auto b = OwnedTensor::of<float>({1, 2, 4}, std::vector<float>(8, 0));
  auto s = OwnedTensor::of<float>({1, 1, 3}, {1, 2, 3});
  auto out = OwnedTensor::resizable(ScalarType::Int64, 2, 64);
  EValue in_b(b.tensor()), in_s(s.tensor()), result(out.tensor());
  Status status = run_kernel("NonMaxSuppression", {&in_b, &in_s}, {&result});
  EXPECT_THAT(status.message(), HasSubstr("input 0 (boxes) has shape [1, 2, 4] and input 1 "
                                          "(scores) [1, 1, 3] (expected [B, S, 4] and [B, K, S])"));
}

}  // namespace
}  // namespace kiln::kernels
