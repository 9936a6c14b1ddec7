// MaxPool, AveragePool, LpPool, the global pools and MaxUnpool: hand-computed cases, seeded
// random data against naive double-precision loops written here, and error cases.

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
        values.push_back(x[nc * numel_of(in) + flat_index(in, i)]);
        positions.push_back(nc * numel_of(in) + flat_index(in, i));
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
    const auto xv = to_double(random_values<float>(numel_of(xs), seed++));
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
