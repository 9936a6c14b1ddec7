#include <kiln/exporter/conformance/conformance.h>

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

namespace kiln::exporter {
namespace {

using runtime::ScalarType;

template <typename T>
TensorData make(ScalarType dtype, std::vector<int64_t> sizes, const std::vector<T>& values) {
  TensorData t;
  t.name = "y";
  t.dtype = dtype;
  t.sizes = std::move(sizes);
  t.data.resize(values.size() * sizeof(T));
  if (!values.empty()) std::memcpy(t.data.data(), values.data(), t.data.size());
  return t;
}

std::string compare(TensorData actual, const TensorData& expected, double rtol = 1e-3,
                    double atol = 1e-7) {
  return compare_tensors(actual.view(), expected, rtol, atol);
}

constexpr float kNan = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

TEST(CompareTest, EqualTensorsMatch) {
  auto t = make<float>(ScalarType::Float32, {2}, {1.f, 2.f});
  EXPECT_EQ(compare(t, t), "");
}

TEST(CompareTest, FloatsWithinRelativeToleranceMatch) {
  auto expected = make<float>(ScalarType::Float32, {2}, {1000.f, -1.f});
  EXPECT_EQ(compare(make<float>(ScalarType::Float32, {2}, {1000.9f, -1.0009f}), expected), "");
  EXPECT_NE(compare(make<float>(ScalarType::Float32, {2}, {1001.5f, -1.f}), expected), "");
}

TEST(CompareTest, AbsoluteToleranceCoversValuesNearZero) {
  auto expected = make<float>(ScalarType::Float32, {1}, {0.f});
  EXPECT_EQ(compare(make<float>(ScalarType::Float32, {1}, {5e-8f}), expected), "");
  EXPECT_NE(compare(make<float>(ScalarType::Float32, {1}, {5e-7f}), expected), "");
  EXPECT_EQ(compare(make<float>(ScalarType::Float32, {1}, {5e-7f}), expected, 1e-3, 1e-6), "");
}

TEST(CompareTest, NanMatchesNanOnly) {
  auto expected = make<float>(ScalarType::Float32, {2}, {kNan, 1.f});
  EXPECT_EQ(compare(make<float>(ScalarType::Float32, {2}, {kNan, 1.f}), expected), "");
  EXPECT_EQ(compare(make<float>(ScalarType::Float32, {2}, {0.f, 1.f}), expected),
            "element [0] (flat 0) is 0 (expected nan)");
  EXPECT_NE(compare(make<float>(ScalarType::Float32, {2}, {kNan, kNan}),
                    make<float>(ScalarType::Float32, {2}, {kNan, 1.f})),
            "");
}

TEST(CompareTest, InfinitiesMatchTheSameInfinity) {
  auto expected = make<float>(ScalarType::Float32, {2}, {kInf, -kInf});
  EXPECT_EQ(compare(make<float>(ScalarType::Float32, {2}, {kInf, -kInf}), expected), "");
  EXPECT_NE(compare(make<float>(ScalarType::Float32, {2}, {-kInf, -kInf}), expected), "");
  EXPECT_NE(compare(make<float>(ScalarType::Float32, {2}, {3e38f, -kInf}), expected), "");
  EXPECT_NE(compare(make<float>(ScalarType::Float32, {1}, {kInf}),
                    make<float>(ScalarType::Float32, {1}, {1.f})),
            "");
}

TEST(CompareTest, MismatchNamesTheIndexActualAndExpected) {
  auto expected = make<float>(ScalarType::Float32, {2, 3}, {0, 1, 2, 3, 4, 5});
  auto actual = make<float>(ScalarType::Float32, {2, 3}, {0, 1, 2, 3, 4.5f, 5});
  EXPECT_EQ(compare(actual, expected), "element [1, 1] (flat 4) is 4.5 (expected 4)");
}

TEST(CompareTest, IntegersCompareExactly) {
  auto expected = make<int64_t>(ScalarType::Int64, {3}, {1, 2, 1LL << 40});
  EXPECT_EQ(compare(expected, expected), "");
  EXPECT_EQ(compare(make<int64_t>(ScalarType::Int64, {3}, {1, 2, (1LL << 40) + 1}), expected),
            "element [2] (flat 2) is 1099511627777 (expected 1099511627776)");
  EXPECT_EQ(
      compare(make<int8_t>(ScalarType::Int8, {1}, {-1}), make<int8_t>(ScalarType::Int8, {1}, {1})),
      "element [0] (flat 0) is -1 (expected 1)");
}

TEST(CompareTest, BoolsCompareExactly) {
  auto expected = make<uint8_t>(ScalarType::Bool, {2}, {1, 0});
  EXPECT_EQ(compare(expected, expected), "");
  EXPECT_EQ(compare(make<uint8_t>(ScalarType::Bool, {2}, {1, 1}), expected),
            "element [1] (flat 1) is true (expected false)");
}

TEST(CompareTest, HalvesCompareAsFloats) {
  auto expected = make<uint16_t>(ScalarType::Float16, {1}, {runtime::float_to_half(1.5f)});
  EXPECT_EQ(compare(expected, expected), "");
  EXPECT_EQ(
      compare(make<uint16_t>(ScalarType::Float16, {1}, {runtime::float_to_half(2.f)}), expected),
      "element [0] (flat 0) is 2 (expected 1.5)");
}

TEST(CompareTest, DtypeMismatchIsReported) {
  EXPECT_EQ(compare(make<double>(ScalarType::Float64, {1}, {1.0}),
                    make<float>(ScalarType::Float32, {1}, {1.f})),
            "dtype f64 (expected f32)");
}

TEST(CompareTest, ShapeMismatchIsReported) {
  EXPECT_EQ(compare(make<float>(ScalarType::Float32, {2, 3}, std::vector<float>(6)),
                    make<float>(ScalarType::Float32, {3, 2}, std::vector<float>(6))),
            "shape [2, 3] (expected [3, 2])");
  EXPECT_EQ(compare(make<float>(ScalarType::Float32, {1}, {1.f}),
                    make<float>(ScalarType::Float32, {}, {1.f})),
            "shape [1] (expected [])");
}

TEST(CompareTest, EmptyTensorsOfEqualShapeMatch) {
  EXPECT_EQ(compare(make<float>(ScalarType::Float32, {0, 4}, {}),
                    make<float>(ScalarType::Float32, {0, 4}, {})),
            "");
}

}  // namespace
}  // namespace kiln::exporter
