// QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear, MatMulInteger and QLinearMatMul:
// hand-computed values (some from the ONNX operator examples), seeded random data against
// naive loops, the adapters, and errors.

#include <kiln/kernels/kernels.h>
#include <kiln/kernels/test/tensor_helpers.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace kiln::kernels {
namespace {

using runtime::Error;
using runtime::EValue;
using runtime::ScalarType;
using test_helpers::OwnedTensor;
using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

using Shape = std::vector<int64_t>;

template <typename T>
std::vector<T> random_ints(size_t count, uint32_t seed) {
  std::mt19937 generator(seed);
  std::uniform_int_distribution<int> distribution(std::numeric_limits<T>::lowest(),
                                                  std::numeric_limits<T>::max());
  std::vector<T> out(count);
  for (T& value : out) value = static_cast<T>(distribution(generator));
  return out;
}

// ---- QuantizeLinear / DequantizeLinear -----------------------------------------------------

TEST(QuantizeLinear, RoundsHalfToEvenAndSaturatesPerTensor) {
  auto x = OwnedTensor::of<float>({7}, {0, 1, 3, 5, -4, 1000, -1000});
  auto scale = OwnedTensor::of<float>({}, {2});
  auto zp = OwnedTensor::of<uint8_t>({}, {128});
  auto out = OwnedTensor::zeros(ScalarType::UInt8, {7});
  ASSERT_TRUE(quantize_linear(x.tensor(), scale.tensor(), &zp.tensor(), 1, out.tensor()).ok());
  // 0.5 -> 0, 1.5 -> 2, 2.5 -> 2 (half to even).
  EXPECT_THAT(out.values<uint8_t>(), ElementsAre(128, 128, 130, 130, 126, 255, 0));
}

TEST(QuantizeLinear, PerAxisInt8AndNoZeroPointGivesU8) {
  auto x = OwnedTensor::of<float>({1, 2, 2}, {1, -2, 1, -2});
  auto scale = OwnedTensor::of<float>({2}, {1, 0.5f});
  auto zp = OwnedTensor::of<int8_t>({2}, {0, -10});
  auto out = OwnedTensor::zeros(ScalarType::Int8, {1, 2, 2});
  ASSERT_TRUE(quantize_linear(x.tensor(), scale.tensor(), &zp.tensor(), -2, out.tensor()).ok());
  EXPECT_THAT(out.values<int8_t>(), ElementsAre(1, -2, -8, -14));

  auto u8 = OwnedTensor::zeros(ScalarType::UInt8, {1, 2, 2});
  ASSERT_TRUE(quantize_linear(x.tensor(), scale.tensor(), nullptr, 1, u8.tensor()).ok());
  EXPECT_THAT(u8.values<uint8_t>(), ElementsAre(1, 0, 2, 0));
}

TEST(DequantizeLinear, PerTensorPerAxisAndInt32) {
  auto x = OwnedTensor::of<uint8_t>({4}, {0, 3, 128, 255});
  auto scale = OwnedTensor::of<float>({}, {2});
  auto zp = OwnedTensor::of<uint8_t>({}, {128});
  auto out = OwnedTensor::zeros(ScalarType::Float32, {4});
  ASSERT_TRUE(dequantize_linear(x.tensor(), scale.tensor(), &zp.tensor(), 1, out.tensor()).ok());
  EXPECT_THAT(out.values<float>(), ElementsAre(-256, -250, 0, 254));

  auto xi = OwnedTensor::of<int8_t>({2, 2}, {-128, 127, 10, -10});
  auto scales = OwnedTensor::of<float>({2}, {1, 0.5f});
  auto zps = OwnedTensor::of<int8_t>({2}, {0, 10});
  auto outi = OwnedTensor::zeros(ScalarType::Float32, {2, 2});
  ASSERT_TRUE(
      dequantize_linear(xi.tensor(), scales.tensor(), &zps.tensor(), 0, outi.tensor()).ok());
  EXPECT_THAT(outi.values<float>(), ElementsAre(-128, 127, 0, -10));

  auto x32 = OwnedTensor::of<int32_t>({2}, {-7, 100000});
  auto out32 = OwnedTensor::zeros(ScalarType::Float32, {2});
  ASSERT_TRUE(dequantize_linear(x32.tensor(), scale.tensor(), nullptr, 1, out32.tensor()).ok());
  EXPECT_THAT(out32.values<float>(), ElementsAre(-14, 200000));
}

TEST(QuantizeLinear, RandomRoundTripStaysWithinHalfAStep) {
  const auto values = test_helpers::random_values<float>(60, 5, -3, 3);
  auto x = OwnedTensor::of<float>({3, 4, 5}, values);
  auto scale = OwnedTensor::of<float>({4}, {0.01f, 0.02f, 0.05f, 0.1f});
  auto zp = OwnedTensor::of<int8_t>({4}, {0, 5, -5, 20});
  auto q = OwnedTensor::zeros(ScalarType::Int8, {3, 4, 5});
  auto back = OwnedTensor::zeros(ScalarType::Float32, {3, 4, 5});
  ASSERT_TRUE(quantize_linear(x.tensor(), scale.tensor(), &zp.tensor(), 1, q.tensor()).ok());
  ASSERT_TRUE(dequantize_linear(q.tensor(), scale.tensor(), &zp.tensor(), 1, back.tensor()).ok());
  const auto qs = q.values<int8_t>();
  const auto restored = back.values<float>();
  const float scales[] = {0.01f, 0.02f, 0.05f, 0.1f};
  const int zps[] = {0, 5, -5, 20};
  for (size_t i = 0; i < values.size(); ++i) {
    const size_t c = (i / 5) % 4;
    const double expected =
        std::clamp(std::nearbyint(double(values[i] / scales[c])) + zps[c], -128.0, 127.0);
    EXPECT_EQ(qs[i], expected) << i;
    if (expected > -128 && expected < 127) {
      EXPECT_NEAR(restored[i], values[i], scales[c] / 2 + 1e-6) << i;
    }
  }
}

// ---- DynamicQuantizeLinear -----------------------------------------------------------------

TEST(DynamicQuantizeLinear, RangeIncludesZero) {
  auto x = OwnedTensor::of<float>({6}, {0, 2, -3, -2.5f, 1.34f, 0.5f});
  auto y = OwnedTensor::zeros(ScalarType::UInt8, {6});
  auto scale = OwnedTensor::zeros(ScalarType::Float32, {});
  auto zp = OwnedTensor::zeros(ScalarType::UInt8, {});
  ASSERT_TRUE(dynamic_quantize_linear(x.tensor(), y.tensor(), scale.tensor(), zp.tensor()).ok());
  EXPECT_FLOAT_EQ(scale.values<float>()[0], 5.0f / 255.0f);
  EXPECT_EQ(zp.values<uint8_t>()[0], 153);  // round(3 / (5 / 255)) = 153
  EXPECT_THAT(y.values<uint8_t>(), ElementsAre(153, 255, 0, 26, 221, 179));

  auto zeros = OwnedTensor::of<float>({2}, {0, 0});
  auto yz = OwnedTensor::zeros(ScalarType::UInt8, {2});
  ASSERT_TRUE(
      dynamic_quantize_linear(zeros.tensor(), yz.tensor(), scale.tensor(), zp.tensor()).ok());
  EXPECT_EQ(scale.values<float>()[0], 1.0f);
  EXPECT_EQ(zp.values<uint8_t>()[0], 0);
  EXPECT_THAT(yz.values<uint8_t>(), ElementsAre(0, 0));
}

// ---- MatMulInteger -------------------------------------------------------------------------

TEST(MatMulInteger, OnnxExample) {
  auto a = OwnedTensor::of<uint8_t>({4, 3}, {11, 7, 3, 10, 6, 2, 9, 5, 1, 8, 4, 0});
  auto b = OwnedTensor::of<uint8_t>({3, 2}, {1, 4, 2, 5, 3, 6});
  auto a_zp = OwnedTensor::of<uint8_t>({}, {12});
  auto b_zp = OwnedTensor::of<uint8_t>({}, {0});
  auto out = OwnedTensor::zeros(ScalarType::Int32, {4, 2});
  ASSERT_TRUE(
      matmul_integer(a.tensor(), b.tensor(), &a_zp.tensor(), &b_zp.tensor(), out.tensor()).ok());
  EXPECT_THAT(out.values<int32_t>(), ElementsAre(-38, -83, -44, -98, -50, -113, -56, -128));
}

TEST(MatMulInteger, BroadcastBatchesAndPerRowColumnZeroPointsMatchNaiveLoop) {
  // a: [2, 1, 3, 4] i8 broadcast against b: [2, 4, 5] u8.
  const auto av = random_ints<int8_t>(24, 1);
  const auto bv = random_ints<uint8_t>(40, 2);
  auto a = OwnedTensor::of<int8_t>({2, 1, 3, 4}, av);
  auto b = OwnedTensor::of<uint8_t>({2, 4, 5}, bv);
  auto out = OwnedTensor::zeros(ScalarType::Int32, {2, 2, 3, 5});
  auto a_zp = OwnedTensor::of<int8_t>({}, {-3});
  auto b_zp = OwnedTensor::of<uint8_t>({1}, {7});
  ASSERT_TRUE(
      matmul_integer(a.tensor(), b.tensor(), &a_zp.tensor(), &b_zp.tensor(), out.tensor()).ok());
  const auto got = out.values<int32_t>();
  for (int i0 = 0; i0 < 2; ++i0) {
    for (int i1 = 0; i1 < 2; ++i1) {
      for (int m = 0; m < 3; ++m) {
        for (int n = 0; n < 5; ++n) {
          int64_t sum = 0;
          for (int k = 0; k < 4; ++k) {
            sum += (av[(i0 * 3 + m) * 4 + k] + 3) * (bv[(i1 * 4 + k) * 5 + n] - 7);
          }
          EXPECT_EQ(got[((i0 * 2 + i1) * 3 + m) * 5 + n], sum);
        }
      }
    }
  }

  // 2-D, per-row a and per-column b zero points.
  auto a2 = OwnedTensor::of<uint8_t>({2, 2}, {1, 2, 3, 4});
  auto b2 = OwnedTensor::of<uint8_t>({2, 2}, {5, 6, 7, 8});
  auto row_zp = OwnedTensor::of<uint8_t>({2}, {1, 2});
  auto col_zp = OwnedTensor::of<uint8_t>({2}, {5, 0});
  auto out2 = OwnedTensor::zeros(ScalarType::Int32, {2, 2});
  ASSERT_TRUE(
      matmul_integer(a2.tensor(), b2.tensor(), &row_zp.tensor(), &col_zp.tensor(), out2.tensor())
          .ok());
  // [[0, 1], [1, 2]] x [[0, 6], [2, 8]]
  EXPECT_THAT(out2.values<int32_t>(), ElementsAre(2, 8, 4, 22));
}

// ---- QLinearMatMul -------------------------------------------------------------------------

struct QOperands {
  OwnedTensor a, a_scale, a_zp, b, b_scale, b_zp, y_scale, y_zp;
  QLinearMatMulInputs inputs() const {
    return {&a.tensor(),       &a_scale.tensor(), &a_zp.tensor(),    &b.tensor(),
            &b_scale.tensor(), &b_zp.tensor(),    &y_scale.tensor(), &y_zp.tensor()};
  }
};

QOperands onnx_example() {
  return {OwnedTensor::of<uint8_t>({2, 4}, {208, 236, 0, 238, 3, 214, 255, 29}),
          OwnedTensor::of<float>({}, {0.0066f}),
          OwnedTensor::of<uint8_t>({}, {113}),
          OwnedTensor::of<uint8_t>({4, 3}, {152, 51, 244, 60, 26, 255, 0, 127, 246, 127, 254, 247}),
          OwnedTensor::of<float>({}, {0.00705f}),
          OwnedTensor::of<uint8_t>({}, {114}),
          OwnedTensor::of<float>({}, {0.0107f}),
          OwnedTensor::of<uint8_t>({}, {118})};
}

TEST(QLinearMatMul, OnnxExample) {
  const QOperands q = onnx_example();
  auto out = OwnedTensor::zeros(ScalarType::UInt8, {2, 3});
  ASSERT_TRUE(qlinear_matmul(q.inputs(), out.tensor()).ok());
  EXPECT_THAT(out.values<uint8_t>(), ElementsAre(168, 115, 255, 1, 66, 151));
}

TEST(QLinearMatMul, Int8OutputMatchesNaiveLoop) {
  const auto av = random_ints<int8_t>(15, 3);
  const auto bv = random_ints<int8_t>(20, 4);
  QOperands q{OwnedTensor::of<int8_t>({3, 5}, av),
              OwnedTensor::of<float>({}, {0.02f}),
              OwnedTensor::of<int8_t>({}, {4}),
              OwnedTensor::of<int8_t>({5, 4}, bv),
              OwnedTensor::of<float>({4}, {0.01f, 0.02f, 0.03f, 0.04f}),
              OwnedTensor::of<int8_t>({4}, {0, -1, 2, 3}),
              OwnedTensor::of<float>({}, {0.5f}),
              OwnedTensor::of<int8_t>({}, {-5})};
  auto out = OwnedTensor::zeros(ScalarType::Int8, {3, 4});
  ASSERT_TRUE(qlinear_matmul(q.inputs(), out.tensor()).ok());
  const auto got = out.values<int8_t>();
  const double b_scale[] = {0.01f, 0.02f, 0.03f, 0.04f};
  const int b_zp[] = {0, -1, 2, 3};
  for (int m = 0; m < 3; ++m) {
    for (int n = 0; n < 4; ++n) {
      int64_t sum = 0;
      for (int k = 0; k < 5; ++k) sum += (av[m * 5 + k] - 4) * (bv[k * 4 + n] - b_zp[n]);
      const double real = sum * double(0.02f) * b_scale[n] / double(0.5f);
      const double expected = std::clamp(std::nearbyint(real) - 5, -128.0, 127.0);
      EXPECT_EQ(got[m * 4 + n], expected) << m << "," << n;
    }
  }
}

// ---- Adapters ------------------------------------------------------------------------------

TEST(QuantKernels, AdaptersRunAndPickOutputDtypes) {
  auto x = OwnedTensor::of<float>({2}, {1, -1});
  auto scale = OwnedTensor::of<float>({}, {0.5f});
  EValue xv(x.tensor()), sv(scale.tensor()), none;
  auto q = OwnedTensor::resizable(ScalarType::Int8, 1);
  EValue qv(q.tensor());
  auto status = test_helpers::run_kernel("QuantizeLinear", {&xv, &sv, &none}, {&qv},
                                         test_helpers::attrs({{"output_dtype", int64_t{3}}}));
  ASSERT_TRUE(status.ok()) << status.message();
  EXPECT_THAT(
      std::vector<int8_t>(qv.to_tensor().data_ptr<int8_t>(), qv.to_tensor().data_ptr<int8_t>() + 2),
      ElementsAre(2, -2));

  auto d = OwnedTensor::resizable(ScalarType::Float32, 1);
  EValue dv(d.tensor());
  status = test_helpers::run_kernel("DequantizeLinear", {&qv, &sv}, {&dv});
  ASSERT_TRUE(status.ok()) << status.message();
  EXPECT_EQ(dv.to_tensor().data_ptr<float>()[1], -1.0f);

  auto y = OwnedTensor::resizable(ScalarType::UInt8, 1);
  auto ys = OwnedTensor::resizable(ScalarType::Float32, 0);
  auto yz = OwnedTensor::resizable(ScalarType::UInt8, 0);
  EValue yv(y.tensor()), ysv(ys.tensor()), yzv(yz.tensor());
  status = test_helpers::run_kernel("DynamicQuantizeLinear", {&xv}, {&yv, &ysv, &yzv});
  ASSERT_TRUE(status.ok()) << status.message();
  EXPECT_FLOAT_EQ(ysv.to_tensor().data_ptr<float>()[0], 2.0f / 255.0f);

  const QOperands ex = onnx_example();
  EValue in[8] = {ex.a.tensor(),       ex.a_scale.tensor(), ex.a_zp.tensor(),    ex.b.tensor(),
                  ex.b_scale.tensor(), ex.b_zp.tensor(),    ex.y_scale.tensor(), ex.y_zp.tensor()};
  auto out = OwnedTensor::resizable(ScalarType::UInt8, 2);
  EValue ov(out.tensor());
  status = test_helpers::run_kernel(
      "QLinearMatMul", {&in[0], &in[1], &in[2], &in[3], &in[4], &in[5], &in[6], &in[7]}, {&ov});
  ASSERT_TRUE(status.ok()) << status.message();
  EXPECT_EQ(test_helpers::sizes_of(ov), (Shape{2, 3}));

  auto mi = OwnedTensor::resizable(ScalarType::Int32, 2);
  EValue miv(mi.tensor());
  status = test_helpers::run_kernel("MatMulInteger", {&in[0], &in[3], &in[2]}, {&miv});
  ASSERT_TRUE(status.ok()) << status.message();
  EXPECT_EQ(test_helpers::sizes_of(miv), (Shape{2, 3}));
}

// ---- Errors --------------------------------------------------------------------------------

TEST(QuantErrors, AxisScaleShapeZeroPointDtypeAndBlockSize) {
  auto x = OwnedTensor::of<float>({2, 3}, {0, 0, 0, 0, 0, 0});
  auto scale3 = OwnedTensor::of<float>({3}, {1, 1, 1});
  auto out = OwnedTensor::zeros(ScalarType::UInt8, {2, 3});
  auto status = quantize_linear(x.tensor(), scale3.tensor(), nullptr, 2, out.tensor());
  EXPECT_EQ(status.code(), Error::InvalidArgument);
  EXPECT_THAT(status.message(),
              HasSubstr("run kernel 'QuantizeLinear': attribute 'axis' is 2 (expected -2..1"));

  status = quantize_linear(x.tensor(), scale3.tensor(), nullptr, 0, out.tensor());
  EXPECT_EQ(status.code(), Error::InvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("input 1 (y_scale) has shape [3] (expected [] or [1] "
                                          "per tensor, or [2] along axis 0)"));

  auto zp = OwnedTensor::of<int8_t>({3}, {0, 0, 0});
  status = quantize_linear(x.tensor(), scale3.tensor(), &zp.tensor(), 1, out.tensor());
  EXPECT_EQ(status.code(), Error::InvalidType);
  EXPECT_THAT(status.message(), HasSubstr("output 0 has dtype u8 (expected i8"));

  auto q = OwnedTensor::of<uint8_t>({2}, {1, 2});
  auto scale = OwnedTensor::of<float>({}, {1});
  auto wrong_zp = OwnedTensor::of<int8_t>({}, {0});
  auto deq = OwnedTensor::zeros(ScalarType::Float32, {2});
  status = dequantize_linear(q.tensor(), scale.tensor(), &wrong_zp.tensor(), 1, deq.tensor());
  EXPECT_EQ(status.code(), Error::InvalidType);
  EXPECT_THAT(status.message(), HasSubstr("input 2 (x_zero_point) has dtype i8"));

  EValue qv(q.tensor()), sv(scale.tensor());
  auto resizable = OwnedTensor::resizable(ScalarType::Float32, 1);
  EValue rv(resizable.tensor());
  status = test_helpers::run_kernel("DequantizeLinear", {&qv, &sv}, {&rv},
                                    test_helpers::attrs({{"block_size", int64_t{32}}}));
  EXPECT_EQ(status.code(), Error::NotSupported);
  EXPECT_THAT(status.message(), HasSubstr("attribute 'block_size' is 32"));
}

TEST(QuantErrors, MatMulIntegerShapesAndZeroPoints) {
  auto a = OwnedTensor::of<uint8_t>({2, 3}, {1, 2, 3, 4, 5, 6});
  auto b = OwnedTensor::of<uint8_t>({2, 2}, {1, 2, 3, 4});
  auto out = OwnedTensor::zeros(ScalarType::Int32, {2, 2});
  auto status = matmul_integer(a.tensor(), b.tensor(), nullptr, nullptr, out.tensor());
  EXPECT_EQ(status.code(), Error::InvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("run kernel 'MatMulInteger': inner dimensions differ"));

  auto b3 = OwnedTensor::of<uint8_t>({3, 2}, {1, 2, 3, 4, 5, 6});
  auto zp = OwnedTensor::of<uint8_t>({3}, {0, 0, 0});
  status = matmul_integer(a.tensor(), b3.tensor(), &zp.tensor(), nullptr, out.tensor());
  EXPECT_EQ(status.code(), Error::NotSupported);
  EXPECT_THAT(status.message(), HasSubstr("input 2 (a_zero_point) has shape [3] (expected [] or "
                                          "[1], or [2] for a 2-D operand)"));

  QOperands q = onnx_example();
  auto wrong = OwnedTensor::zeros(ScalarType::Int8, {2, 3});
  status = qlinear_matmul(q.inputs(), wrong.tensor());
  EXPECT_EQ(status.code(), Error::InvalidType);
  EXPECT_THAT(status.message(), HasSubstr("run kernel 'QLinearMatMul': output 0 has dtype i8"));
}

}  // namespace
}  // namespace kiln::kernels
