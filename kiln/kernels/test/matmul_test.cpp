// MatMul (numpy matmul) and Gemm, compared with a naive triple loop in double precision.

#include <kiln/kernels/kernels.h>
#include <kiln/kernels/test/tensor_helpers.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

namespace kiln::kernels {
namespace {

using runtime::Error;
using runtime::ScalarType;
using runtime::Tensor;
using test_helpers::OwnedTensor;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

using Shape = std::vector<int64_t>;

std::string shape_name(const Shape& shape) {
  std::string name;
  for (int64_t size : shape) name += (name.empty() ? "" : "x") + std::to_string(size);
  return name.empty() ? "scalar" : name;
}

// The reference: numpy matmul by definition, one output element at a time, in double.
std::vector<double> naive_matmul(const Shape& shape_a, const std::vector<double>& a,
                                 const Shape& shape_b, const std::vector<double>& b,
                                 const Shape& shape_out) {
  // Promote 1-D operands, then index every operand through broadcast batch dims.
  Shape pa = shape_a.size() == 1 ? Shape{1, shape_a[0]} : shape_a;
  Shape pb = shape_b.size() == 1 ? Shape{shape_b[0], 1} : shape_b;
  const int64_t m = pa[pa.size() - 2], k = pa.back(), n = pb.back();
  Shape batch(shape_out.begin(), shape_out.end() - (shape_a.size() > 1) - (shape_b.size() > 1));
  const int64_t batches = test_helpers::numel_of(batch);
  std::vector<double> out(static_cast<size_t>(batches * m * n));
  auto batch_offset = [&](const Shape& operand, int64_t index) {
    // Row-major index of the operand's batch element matching output batch `index`.
    const size_t rank = operand.size() - 2;
    int64_t offset = 0, stride = 1;
    for (size_t d = batch.size(); d-- > 0;) {
      const int64_t coordinate = index % batch[d];
      index /= batch[d];
      const size_t from_end = batch.size() - 1 - d;
      if (from_end < rank) {
        const int64_t size = operand[rank - 1 - from_end];
        offset += (size == 1 ? 0 : coordinate) * stride;
        stride *= size;
      }
    }
    return offset;
  };
  for (int64_t t = 0; t < batches; ++t) {
    const double* ma = a.data() + batch_offset(pa, t) * m * k;
    const double* mb = b.data() + batch_offset(pb, t) * k * n;
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double sum = 0;
        for (int64_t kk = 0; kk < k; ++kk) sum += ma[i * k + kk] * mb[kk * n + j];
        out[static_cast<size_t>((t * m + i) * n + j)] = sum;
      }
    }
  }
  return out;
}

// ---- matmul_shape -----------------------------------------------------------------------------

TEST(MatMulShape, PromotesOneDimensionalOperands) {
  EXPECT_EQ(*matmul_shape(Shape{3}, Shape{3}), Shape{});      // dot product
  EXPECT_EQ(*matmul_shape(Shape{3}, Shape{3, 4}), Shape{4});  // row times matrix
  EXPECT_EQ(*matmul_shape(Shape{2, 3}, Shape{3}), Shape{2});  // matrix times column
  EXPECT_EQ(*matmul_shape(Shape{5, 2, 3}, Shape{3}), (Shape{5, 2}));
  EXPECT_EQ(*matmul_shape(Shape{3}, Shape{5, 3, 4}), (Shape{5, 4}));
}

TEST(MatMulShape, BroadcastsBatchDimensions) {
  EXPECT_EQ(*matmul_shape(Shape{2, 1, 3, 4}, Shape{5, 4, 2}), (Shape{2, 5, 3, 2}));
  EXPECT_EQ(*matmul_shape(Shape{3, 4}, Shape{7, 4, 2}), (Shape{7, 3, 2}));
}

TEST(MatMulShape, InnerSizeMismatchNamesBothInputs) {
  auto shape = matmul_shape(Shape{2, 4}, Shape{5, 3});
  ASSERT_FALSE(shape.ok());
  EXPECT_EQ(shape.error(), Error::InvalidArgument);
  EXPECT_THAT(shape.status().message(),
              HasSubstr("input 0 of shape [2, 4] has K = 4, input 1 of shape [5, 3] has K = 5"));
}

TEST(MatMulShape, RejectsScalarsAndUnbroadcastableBatches) {
  auto scalar = matmul_shape(Shape{}, Shape{3});
  EXPECT_EQ(scalar.error(), Error::InvalidArgument);
  EXPECT_THAT(scalar.status().message(), HasSubstr("input 0 has rank 0 (expected rank >= 1)"));
  auto batch = matmul_shape(Shape{2, 3, 4}, Shape{3, 4, 5});
  EXPECT_EQ(batch.error(), Error::InvalidArgument);
  EXPECT_THAT(batch.status().message(), HasSubstr("batch dimensions of input 0"));
}

// ---- MatMul against the naive loop ------------------------------------------------------------

struct MatMulCase {
  Shape a;
  Shape b;
};

class MatMulTest : public ::testing::TestWithParam<MatMulCase> {};

TEST_P(MatMulTest, MatchesNaiveTripleLoop) {
  const auto& [shape_a, shape_b] = GetParam();
  const Shape shape_out = *matmul_shape(shape_a, shape_b);
  const auto values_a = test_helpers::random_values<double>(test_helpers::numel_of(shape_a), 7);
  const auto values_b = test_helpers::random_values<double>(test_helpers::numel_of(shape_b), 8);
  const auto expected = naive_matmul(shape_a, values_a, shape_b, values_b, shape_out);

  // f64 agrees to rounding; f32 within single-precision accumulation error.
  auto a64 = OwnedTensor::of<double>(shape_a, values_a);
  auto b64 = OwnedTensor::of<double>(shape_b, values_b);
  auto out64 = OwnedTensor::zeros(ScalarType::Float64, shape_out);
  ASSERT_TRUE(matmul(a64.tensor(), b64.tensor(), out64.tensor()).ok());
  auto result64 = out64.values<double>();
  ASSERT_EQ(result64.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) EXPECT_NEAR(result64[i], expected[i], 1e-12);

  auto a32 = OwnedTensor::of<float>(shape_a, std::vector<float>(values_a.begin(), values_a.end()));
  auto b32 = OwnedTensor::of<float>(shape_b, std::vector<float>(values_b.begin(), values_b.end()));
  auto out32 = OwnedTensor::zeros(ScalarType::Float32, shape_out);
  ASSERT_TRUE(matmul(a32.tensor(), b32.tensor(), out32.tensor()).ok());
  auto result32 = out32.values<float>();
  for (size_t i = 0; i < expected.size(); ++i) EXPECT_NEAR(result32[i], expected[i], 1e-4);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, MatMulTest,
    ::testing::Values(MatMulCase{{3, 4}, {4, 5}}, MatMulCase{{1, 1}, {1, 1}},
                      MatMulCase{{17, 33}, {33, 9}}, MatMulCase{{4}, {4}}, MatMulCase{{4}, {4, 6}},
                      MatMulCase{{6, 4}, {4}}, MatMulCase{{3, 5, 4}, {3, 4, 2}},
                      MatMulCase{{3, 5, 4}, {4, 2}}, MatMulCase{{5, 4}, {3, 4, 2}},
                      MatMulCase{{2, 1, 5, 4}, {3, 4, 2}}, MatMulCase{{2, 3, 5, 4}, {1, 3, 4, 2}},
                      MatMulCase{{4}, {2, 3, 4, 5}}, MatMulCase{{2, 3, 6, 4}, {4}},
                      MatMulCase{{3, 0}, {0, 2}}),
    [](const ::testing::TestParamInfo<MatMulCase>& info) {
      return shape_name(info.param.a) + "_times_" + shape_name(info.param.b);
    });

TEST(MatMul, ExactSmallProduct) {
  auto a = OwnedTensor::of<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  auto b = OwnedTensor::of<float>({3, 2}, {7, 8, 9, 10, 11, 12});
  auto out = OwnedTensor::zeros(ScalarType::Float32, {2, 2});
  ASSERT_TRUE(matmul(a.tensor(), b.tensor(), out.tensor()).ok());
  EXPECT_THAT(out.values<float>(), ElementsAre(58, 64, 139, 154));
}

TEST(MatMul, BFloat16AccumulatesInFloat) {
  auto a = OwnedTensor::half_of(ScalarType::BFloat16, {1, 3}, {1, 2, 3});
  auto b = OwnedTensor::half_of(ScalarType::BFloat16, {3, 1}, {4, 5, 6});
  auto out = OwnedTensor::zeros(ScalarType::BFloat16, {1, 1});
  ASSERT_TRUE(matmul(a.tensor(), b.tensor(), out.tensor()).ok());
  EXPECT_THAT(out.half_values(), ElementsAre(32));
}

TEST(MatMul, RejectsIntegers) {
  auto a = OwnedTensor::of<int32_t>({1, 1}, {1});
  auto out = OwnedTensor::zeros(ScalarType::Int32, {1, 1});
  auto status = matmul(a.tensor(), a.tensor(), out.tensor());
  EXPECT_EQ(status.code(), Error::InvalidType);
  EXPECT_THAT(status.message(), HasSubstr("run kernel 'MatMul': input 0 has dtype i32"));
}

// ---- Gemm -------------------------------------------------------------------------------------

// (transA, transB, shape of C); C = {-1} means no C.
class GemmTest : public ::testing::TestWithParam<std::tuple<bool, bool, Shape>> {};

TEST_P(GemmTest, MatchesNaiveLoop) {
  const auto& [trans_a, trans_b, shape_c] = GetParam();
  const int64_t m = 3, k = 5, n = 4;
  const GemmOptions options{0.5, 2.0, trans_a, trans_b};
  const Shape shape_a = trans_a ? Shape{k, m} : Shape{m, k};
  const Shape shape_b = trans_b ? Shape{n, k} : Shape{k, n};
  const bool has_c = shape_c != Shape{-1};
  const auto values_a = test_helpers::random_values<float>(m * k, 11);
  const auto values_b = test_helpers::random_values<float>(k * n, 12);
  const auto values_c =
      test_helpers::random_values<float>(has_c ? test_helpers::numel_of(shape_c) : 0, 13);
  auto a = OwnedTensor::of<float>(shape_a, values_a);
  auto b = OwnedTensor::of<float>(shape_b, values_b);
  auto c = OwnedTensor::of<float>(has_c ? shape_c : Shape{}, values_c);
  const Tensor* c_tensor = has_c ? &c.tensor() : nullptr;
  ASSERT_EQ(*gemm_shape(shape_a, shape_b, has_c ? &shape_c : nullptr, options), (Shape{m, n}));
  auto out = OwnedTensor::zeros(ScalarType::Float32, {m, n});
  ASSERT_TRUE(gemm(a.tensor(), b.tensor(), c_tensor, out.tensor(), options).ok());

  auto result = out.values<float>();
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double sum = 0;
      for (int64_t kk = 0; kk < k; ++kk) {
        const double a_ik = trans_a ? values_a[kk * m + i] : values_a[i * k + kk];
        const double b_kj = trans_b ? values_b[j * k + kk] : values_b[kk * n + j];
        sum += a_ik * b_kj;
      }
      double bias = 0;
      if (has_c) {
        // C is [], [N], [1, N], [M, 1] or [M, N]: index it by broadcasting.
        const Shape full = Shape(2 - shape_c.size(), 1);
        Shape c2 = full;
        c2.insert(c2.end(), shape_c.begin(), shape_c.end());
        bias = values_c[(c2[0] == 1 ? 0 : i) * c2[1] + (c2[1] == 1 ? 0 : j)];
      }
      EXPECT_NEAR(result[i * n + j], 0.5 * sum + 2.0 * bias, 1e-5) << i << "," << j;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(TransposesAndBias, GemmTest,
                         ::testing::Combine(::testing::Bool(), ::testing::Bool(),
                                            ::testing::Values(Shape{-1}, Shape{}, Shape{4},
                                                              Shape{1, 4}, Shape{3, 1},
                                                              Shape{3, 4})),
                         [](const ::testing::TestParamInfo<std::tuple<bool, bool, Shape>>& info) {
                           const Shape& c = std::get<2>(info.param);
                           return std::string(std::get<0>(info.param) ? "At" : "A") +
                                  (std::get<1>(info.param) ? "Bt" : "B") + "_C" +
                                  (c == Shape{-1} ? std::string("none") : shape_name(c));
                         });

TEST(Gemm, BetaZeroDoesNotReadC) {
  auto a = OwnedTensor::of<float>({1, 1}, {2});
  auto b = OwnedTensor::of<float>({1, 1}, {3});
  auto c = OwnedTensor::of<float>({1, 1}, {std::numeric_limits<float>::quiet_NaN()});
  auto out = OwnedTensor::zeros(ScalarType::Float32, {1, 1});
  ASSERT_TRUE(gemm(a.tensor(), b.tensor(), &c.tensor(), out.tensor(), {1.0, 0.0}).ok());
  EXPECT_THAT(out.values<float>(), ElementsAre(6));
}

TEST(Gemm, RejectsNonMatrixOperands) {
  auto shape = gemm_shape(Shape{2, 3, 4}, Shape{4, 2}, nullptr, {});
  EXPECT_EQ(shape.error(), Error::InvalidArgument);
  EXPECT_THAT(shape.status().message(), HasSubstr("input 0 of shape [2, 3, 4] has rank 3"));
}

TEST(Gemm, InnerSizeMismatchNamesTransposeFlags) {
  auto shape = gemm_shape(Shape{2, 4}, Shape{5, 3}, nullptr, {1.0, 1.0, false, true});
  EXPECT_EQ(shape.error(), Error::InvalidArgument);
  EXPECT_THAT(shape.status().message(), HasSubstr("with transB = 1 has K = 3"));
}

TEST(Gemm, CThatDoesNotBroadcastIsAnError) {
  const Shape c = {3, 2};
  auto shape = gemm_shape(Shape{2, 4}, Shape{4, 3}, &c, {});
  EXPECT_EQ(shape.error(), Error::InvalidArgument);
  EXPECT_THAT(shape.status().message(),
              HasSubstr("input 2 has shape [3, 2] (expected a shape that broadcasts to [2, 3])"));
}

}  // namespace
}  // namespace kiln::kernels
