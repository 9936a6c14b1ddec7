// Pad (every mode, input and attribute forms) and Einsum.

#include <kiln/kernels/kernels.h>
#include <kiln/kernels/test/tensor_helpers.h>

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
using runtime::Tensor;
using test_helpers::attrs;
using test_helpers::expect_error;
using test_helpers::OwnedTensor;
using test_helpers::random_values;
using test_helpers::run_kernel;
using test_helpers::sizes_of;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

using Shape = std::vector<int64_t>;

// ---- Pad
// -------------------------------------------------------------------------------------------

// Pads [1, 2, 3] by 2 before and 3 after in `mode` through the opset-11 adapter form.
std::vector<float> pad_123(const char* mode) {
  auto x = OwnedTensor::of<float>({3}, {1, 2, 3});
  auto pads = OwnedTensor::of<int64_t>({2}, {2, 3});
  auto out = OwnedTensor::resizable(ScalarType::Float32, 1);
  EValue in(x.tensor()), in_pads(pads.tensor()), result(out.tensor());
  Status status =
      run_kernel("Pad", {&in, &in_pads}, {&result}, attrs({{"mode", EValue(std::string(mode))}}));
  EXPECT_TRUE(status.ok()) << status.message();
  EXPECT_EQ(sizes_of(result), (Shape{8}));
  return out.values<float>(8);
}

TEST(Pad, EachModeMatchesNumpy) {
  EXPECT_THAT(pad_123("constant"), ElementsAre(0, 0, 1, 2, 3, 0, 0, 0));
  EXPECT_THAT(pad_123("reflect"), ElementsAre(3, 2, 1, 2, 3, 2, 1, 2));
  EXPECT_THAT(pad_123("edge"), ElementsAre(1, 1, 1, 2, 3, 3, 3, 3));
  EXPECT_THAT(pad_123("wrap"), ElementsAre(2, 3, 1, 2, 3, 1, 2, 3));
}

TEST(Pad, ConstantValueInputAxesInputAndNegativePads) {
  auto x = OwnedTensor::of<int32_t>({2, 3}, {1, 2, 3, 4, 5, 6});
  auto pads = OwnedTensor::of<int64_t>({2}, {1, -1});
  auto value = OwnedTensor::of<int32_t>({}, {9});
  auto axes = OwnedTensor::of<int64_t>({1}, {-1});
  auto out = OwnedTensor::resizable(ScalarType::Int32, 2);
  EValue in(x.tensor()), in_pads(pads.tensor()), in_value(value.tensor()), in_axes(axes.tensor()),
      none, result(out.tensor());
  // Axis 1: one 9 before, the last column cropped.
  ASSERT_TRUE(run_kernel("Pad", {&in, &in_pads, &in_value, &in_axes}, {&result}).ok());
  EXPECT_EQ(sizes_of(result), (Shape{2, 3}));
  EXPECT_THAT(out.values<int32_t>(6), ElementsAre(9, 1, 2, 9, 4, 5));
  // Cropping comes first, then edge padding repeats the new edge.
  auto edge_pads = OwnedTensor::of<int64_t>({4}, {0, -1, 0, 2});
  EValue in_edge_pads(edge_pads.tensor());
  ASSERT_TRUE(run_kernel("Pad", {&in, &in_edge_pads, &none}, {&result},
                         attrs({{"mode", EValue(std::string("edge"))}}))
                  .ok());
  EXPECT_THAT(out.values<int32_t>(8), ElementsAre(2, 3, 3, 3, 5, 6, 6, 6));
}

TEST(Pad, Opset2AttributesGivePadsAndValue) {
  auto x = OwnedTensor::half_of(ScalarType::Float16, {1, 2}, {1, 2});
  auto out = OwnedTensor::zeros(ScalarType::Float16, {2, 3});
  EValue in(x.tensor()), result(out.tensor());
  ASSERT_TRUE(run_kernel("Pad", {&in}, {&result},
                         attrs({{"pads", EValue(std::vector<int64_t>{1, 0, 0, 1})},
                                {"value", EValue(1.5)}}))
                  .ok());
  EXPECT_EQ(sizes_of(result), (Shape{2, 3}));
  EXPECT_THAT(out.half_values(), ElementsAre(1.5f, 1.5f, 1.5f, 1, 2, 1.5f));
}

// numpy's reflect, edge and wrap, one step at a time.
int64_t naive_source(int64_t j, int64_t n, PadMode mode) {
  if (mode == PadMode::Edge) return j < 0 ? 0 : (j >= n ? n - 1 : j);
  if (mode == PadMode::Wrap) {
    while (j < 0) j += n;
    while (j >= n) j -= n;
    return j;
  }
  while (j < 0 || j >= n) {
    if (j < 0) j = -j;
    if (j >= n) j = 2 * (n - 1) - j;
  }
  return j;
}

TEST(Pad, RandomData3DMatchesANaiveLoopInEveryMode) {
  const Shape shape = {3, 4, 5};
  const std::vector<int64_t> pads = {1, 5, 2, 2, 0, 7};
  auto x = OwnedTensor::of<float>(shape, random_values(60, 17));
  const auto values = x.values<float>();
  const Shape out_shape = {6, 9, 14};
  for (PadMode mode : {PadMode::Reflect, PadMode::Edge, PadMode::Wrap}) {
    auto out = OwnedTensor::zeros(ScalarType::Float32, out_shape);
    ASSERT_TRUE(pad(x.tensor(), pads, mode, nullptr, out.tensor()).ok());
    const auto y = out.values<float>();
    for (int64_t a = 0; a < 6; ++a) {
      for (int64_t b = 0; b < 9; ++b) {
        for (int64_t c = 0; c < 14; ++c) {
          const int64_t i = naive_source(a - 1, 3, mode), j = naive_source(b - 5, 4, mode),
                        k = naive_source(c - 2, 5, mode);
          ASSERT_EQ(y[(a * 9 + b) * 14 + c], values[(i * 4 + j) * 5 + k]) << a << b << c;
        }
      }
    }
  }
}

TEST(Pad, RejectsBadPadsModesAndEmptyEdges) {
  auto x = OwnedTensor::of<float>({2, 0}, {});
  auto pads = OwnedTensor::of<int64_t>({4}, {0, 1, 0, 1});
  auto short_pads = OwnedTensor::of<int64_t>({3}, {0, 1, 0});
  auto crop = OwnedTensor::of<int64_t>({4}, {-3, 0, 0, 0});
  auto out = OwnedTensor::resizable(ScalarType::Float32, 2);
  EValue in(x.tensor()), in_pads(pads.tensor()), in_short(short_pads.tensor()),
      in_crop(crop.tensor()), result(out.tensor());
  ASSERT_TRUE(run_kernel("Pad", {&in, &in_pads}, {&result}).ok());
  EXPECT_EQ(sizes_of(result), (Shape{2, 2}));
  expect_error(
      run_kernel("Pad", {&in, &in_pads}, {&result}, attrs({{"mode", EValue(std::string("edge"))}})),
      Error::InvalidArgument,
      "run kernel 'Pad': edge mode pads dimension 1 of input 0 of shape [2, 0]");
  expect_error(run_kernel("Pad", {&in, &in_short}, {&result}), Error::InvalidArgument,
               "pads [0, 1, 0] has 3 entries (expected 4");
  expect_error(run_kernel("Pad", {&in, &in_crop}, {&result}), Error::InvalidArgument,
               "crop 3 elements from dimension 0 of size 2");
  expect_error(run_kernel("Pad", {&in, &in_pads}, {&result},
                          attrs({{"mode", EValue(std::string("mirror"))}})),
               Error::InvalidArgument, "attribute 'mode' is 'mirror' (expected constant, reflect");
}

// ---- Einsum
// ----------------------------------------------------------------------------------------

// Runs Einsum through its adapter on f32 inputs; returns the output shape and values.
std::pair<Shape, std::vector<float>> run_einsum(const std::string& equation,
                                                std::vector<const OwnedTensor*> operands) {
  std::vector<EValue> values;
  values.reserve(operands.size());
  for (const auto* operand : operands) values.emplace_back(operand->tensor());
  std::vector<EValue*> inputs;
  for (auto& value : values) inputs.push_back(&value);
  std::vector<const Tensor*> tensors;
  for (const auto* operand : operands) tensors.push_back(&operand->tensor());
  auto rank = einsum_shape(equation, tensors);
  EXPECT_TRUE(rank.ok()) << equation << ": " << rank.status().message();
  auto out = OwnedTensor::resizable(ScalarType::Float32, rank.ok() ? rank->size() : 0);
  EValue result(out.tensor());
  Status status = run_kernel("Einsum", inputs, {&result}, attrs({{"equation", EValue(equation)}}));
  EXPECT_TRUE(status.ok()) << equation << ": " << status.message();
  const Shape shape = sizes_of(result);
  return {shape, out.values<float>(test_helpers::numel_of(shape))};
}

TEST(Einsum, ExplicitAndImplicitFormsOfSmallProducts) {
  auto a = OwnedTensor::of<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  auto b = OwnedTensor::of<float>({3, 2}, {1, 0, 0, 1, 1, 1});
  auto v = OwnedTensor::of<float>({3}, {1, 2, 3});
  auto square = OwnedTensor::of<float>({3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  EXPECT_EQ(run_einsum("ij,jk->ik", {&a, &b}),
            (std::pair<Shape, std::vector<float>>{{2, 2}, {4, 5, 10, 11}}));
  EXPECT_EQ(run_einsum("ij,jk", {&a, &b}).second, (std::vector<float>{4, 5, 10, 11}));
  EXPECT_EQ(run_einsum("ij->ji", {&a}),
            (std::pair<Shape, std::vector<float>>{{3, 2}, {1, 4, 2, 5, 3, 6}}));
  EXPECT_EQ(run_einsum("ji", {&a}).first, (Shape{3, 2}));  // implicit: alphabetical, so "ij"
  EXPECT_EQ(run_einsum("ij->i", {&a}).second, (std::vector<float>{6, 15}));
  EXPECT_EQ(run_einsum("i,i", {&v, &v}), (std::pair<Shape, std::vector<float>>{{}, {14}}));
  EXPECT_EQ(run_einsum("i,j->ij", {&v, &v}).second,
            (std::vector<float>{1, 2, 3, 2, 4, 6, 3, 6, 9}));
  EXPECT_EQ(run_einsum("ii", {&square}).second, (std::vector<float>{15}));  // trace
  EXPECT_EQ(run_einsum("ii->i", {&square}).second, (std::vector<float>{1, 5, 9}));
  EXPECT_EQ(run_einsum(" i j -> ", {&a}).second, (std::vector<float>{21}));
}

// A naive double-precision batched matmul over broadcast batch indices.
std::vector<double> naive_matmul(const std::vector<float>& a, const std::vector<float>& b,
                                 int64_t batches, bool broadcast_a, int64_t m, int64_t k,
                                 int64_t n) {
  std::vector<double> out(static_cast<size_t>(batches * m * n), 0.0);
  for (int64_t t = 0; t < batches; ++t) {
    const int64_t ta = broadcast_a ? 0 : t;
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double sum = 0;
        for (int64_t p = 0; p < k; ++p) {
          sum += static_cast<double>(a[(ta * m + i) * k + p]) * b[(t * k + p) * n + j];
        }
        out[(t * m + i) * n + j] = sum;
      }
    }
  }
  return out;
}

TEST(Einsum, BatchMatmulFormsMatchANaiveLoop) {
  auto a = OwnedTensor::of<float>({4, 3, 5}, random_values(60, 1));
  auto b = OwnedTensor::of<float>({4, 5, 2}, random_values(40, 2));
  auto shared = OwnedTensor::of<float>({1, 3, 5}, random_values(15, 3));
  const auto expected = naive_matmul(a.values<float>(), b.values<float>(), 4, false, 3, 5, 2);
  const auto broadcast = naive_matmul(shared.values<float>(), b.values<float>(), 4, true, 3, 5, 2);
  // The matmul fast path, and forms that take the generic loop (permuted and repeated labels).
  for (const char* equation : {"bij,bjk->bik", "...ij,...jk->...ik", "...ij,...jk"}) {
    auto [shape, got] = run_einsum(equation, {&a, &b});
    ASSERT_EQ(shape, (Shape{4, 3, 2})) << equation;
    for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], expected[i], 1e-5) << equation;
  }
  auto [shape_t, got_t] = run_einsum("bij,bjk->bki", {&a, &b});
  ASSERT_EQ(shape_t, (Shape{4, 2, 3}));
  for (int64_t t = 0; t < 4; ++t) {
    for (int64_t i = 0; i < 3; ++i) {
      for (int64_t k = 0; k < 2; ++k) {
        EXPECT_NEAR(got_t[(t * 2 + k) * 3 + i], expected[(t * 3 + i) * 2 + k], 1e-5);
      }
    }
  }
  auto [shape_b, got_b] = run_einsum("...ij,...jk->...ik", {&shared, &b});
  ASSERT_EQ(shape_b, (Shape{4, 3, 2}));
  for (size_t i = 0; i < got_b.size(); ++i) EXPECT_NEAR(got_b[i], broadcast[i], 1e-5);
}

TEST(Einsum, BatchDiagonalThreeOperandsAndIntegers) {
  auto x = OwnedTensor::of<float>({2, 3, 3}, random_values(18, 4));
  const auto values = x.values<float>();
  auto [shape, got] = run_einsum("...ii->...i", {&x});
  ASSERT_EQ(shape, (Shape{2, 3}));
  for (int b = 0; b < 2; ++b) {
    for (int i = 0; i < 3; ++i) EXPECT_EQ(got[b * 3 + i], values[(b * 3 + i) * 3 + i]);
  }
  auto p = OwnedTensor::of<float>({2, 3}, random_values(6, 5));
  auto q = OwnedTensor::of<float>({3, 4}, random_values(12, 6));
  auto r = OwnedTensor::of<float>({4, 2}, random_values(8, 7));
  const auto pv = p.values<float>(), qv = q.values<float>(), rv = r.values<float>();
  auto [shape3, got3] = run_einsum("ij,jk,kl->il", {&p, &q, &r});
  ASSERT_EQ(shape3, (Shape{2, 2}));
  for (int i = 0; i < 2; ++i) {
    for (int l = 0; l < 2; ++l) {
      double sum = 0;
      for (int j = 0; j < 3; ++j) {
        for (int k = 0; k < 4; ++k) {
          sum += static_cast<double>(pv[i * 3 + j]) * qv[j * 4 + k] * rv[k * 2 + l];
        }
      }
      EXPECT_NEAR(got3[i * 2 + l], sum, 1e-5);
    }
  }
  auto ints = OwnedTensor::of<int64_t>({2, 2}, {1, 2, 3, 4});
  auto out = OwnedTensor::zeros(ScalarType::Int64, {2, 2});
  const Tensor* operands[] = {&ints.tensor(), &ints.tensor()};
  ASSERT_TRUE(einsum("ij,jk->ik", operands, out.tensor()).ok());
  EXPECT_THAT(out.values<int64_t>(), ElementsAre(7, 10, 15, 22));
}

TEST(Einsum, RejectsEquationsThatDoNotFitTheInputs) {
  auto a = OwnedTensor::of<float>({2, 3}, random_values(6, 1));
  auto b = OwnedTensor::of<float>({2, 2}, random_values(4, 1));
  auto out = OwnedTensor::resizable(ScalarType::Float32, 2);
  EValue in_a(a.tensor()), in_b(b.tensor()), result(out.tensor());
  auto run = [&](const char* equation, std::vector<EValue*> inputs) {
    return run_kernel("Einsum", inputs, {&result},
                      attrs({{"equation", EValue(std::string(equation))}}));
  };
  expect_error(run("ij,jk->ik", {&in_a}), Error::InvalidArgument,
               "run kernel 'Einsum': equation 'ij,jk->ik' has 2 input terms (expected 1");
  expect_error(run("ijk->i", {&in_a}), Error::InvalidArgument,
               "term 'ijk' has 3 labels for input 0 of rank 2");
  expect_error(run("ij,jk->ik", {&in_a, &in_b}), Error::InvalidArgument,
               "gives label j size 3 and size 2 in input 1 (expected equal sizes or 1)");
  expect_error(run("ij->k", {&in_a}), Error::InvalidArgument,
               "has output label k that no input term has");
  expect_error(run("i1->i", {&in_a}), Error::InvalidArgument, "has '1' in term 'i1'");
}

}  // namespace
}  // namespace kiln::kernels
