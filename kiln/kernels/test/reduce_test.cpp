// ReduceSum, ReduceMean, ReduceMax, ReduceMin, ReduceProd, ReduceL2, ArgMax and ArgMin.

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
using test_helpers::run_kernel;
using test_helpers::sizes_of;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

using Shape = std::vector<int64_t>;

struct ReduceRun {
  Status status;
  Shape shape;
  std::vector<float> values;
};

// Runs `op` on the f32 tensor [2, 3] = {1, 2, 3, 4, 5, 6}, with axes as input 1 when given.
ReduceRun reduce_2x3(std::string_view op, const runtime::Attributes& attributes,
                     const Shape* axes_input = nullptr) {
  auto x = OwnedTensor::of<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  auto axes = OwnedTensor::of<int64_t>({axes_input ? static_cast<int64_t>(axes_input->size()) : 0},
                                       axes_input ? *axes_input : Shape{});
  auto out = OwnedTensor::resizable(ScalarType::Float32, 2);
  auto flat = OwnedTensor::resizable(ScalarType::Float32, 1);
  auto scalar = OwnedTensor::resizable(ScalarType::Float32, 0);
  EValue in(x.tensor()), in_axes(axes.tensor());
  std::vector<EValue*> inputs = {&in};
  if (axes_input) inputs.push_back(&in_axes);
  // The output's rank follows keepdims and the axes; try the ranks in turn.
  for (OwnedTensor* candidate : {&out, &flat, &scalar}) {
    EValue result(candidate->tensor());
    Status status = run_kernel(op, inputs, {&result}, attributes);
    if (status.ok()) {
      const Shape shape = sizes_of(result);
      return {status, shape, candidate->values<float>(test_helpers::numel_of(shape))};
    }
    if (status.message().find("resize tensor") == std::string::npos) return {status, {}, {}};
  }
  return {Status(Error::Internal, "no rank fits"), {}, {}};
}

TEST(Reduce, EveryKindOverAxis1) {
  const std::pair<const char*, std::vector<float>> cases[] = {
      {"ReduceSum", {6, 15}},   {"ReduceMean", {2, 5}},
      {"ReduceMax", {3, 6}},    {"ReduceMin", {1, 4}},
      {"ReduceProd", {6, 120}}, {"ReduceL2", {std::sqrt(14.f), std::sqrt(77.f)}}};
  for (const auto& [op, expected] : cases) {
    auto run = reduce_2x3(op, attrs({{"axes", Shape{1}}}));
    ASSERT_TRUE(run.status.ok()) << op << ": " << run.status.message();
    EXPECT_EQ(run.shape, (Shape{2, 1})) << op;
    for (size_t i = 0; i < expected.size(); ++i) EXPECT_FLOAT_EQ(run.values[i], expected[i]) << op;
  }
}

TEST(Reduce, NormsAndLogs) {
  const std::pair<const char*, std::vector<double>> cases[] = {
      {"ReduceL1", {6, 15}},
      {"ReduceSumSquare", {14, 77}},
      {"ReduceLogSum", {std::log(6.0), std::log(15.0)}},
      {"ReduceLogSumExp",
       {std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0)),
        std::log(std::exp(4.0) + std::exp(5.0) + std::exp(6.0))}}};
  for (const auto& [op, expected] : cases) {
    auto run = reduce_2x3(op, attrs({{"axes", Shape{1}}, {"keepdims", 0}}));
    ASSERT_TRUE(run.status.ok()) << op << ": " << run.status.message();
    EXPECT_EQ(run.shape, (Shape{2})) << op;
    for (size_t i = 0; i < expected.size(); ++i) EXPECT_NEAR(run.values[i], expected[i], 1e-5);
  }
  auto x = OwnedTensor::of<int32_t>({3}, {-4, 2, -1});
  auto out = OwnedTensor::zeros(ScalarType::Int32, {});
  ASSERT_TRUE(reduce(x.tensor(), ReduceKind::L1, Shape{}, false, out.tensor()).ok());
  EXPECT_THAT(out.values<int32_t>(), ElementsAre(7));
  Status status = reduce(x.tensor(), ReduceKind::LogSumExp, Shape{}, false, out.tensor());
  EXPECT_EQ(status.code(), Error::InvalidType);
  EXPECT_THAT(status.message(), HasSubstr("run kernel 'ReduceLogSumExp': input 0 has dtype i32"));
}

TEST(Reduce, AxesInputKeepdimsAndNoop) {
  const Shape axes0 = {0};
  auto run = reduce_2x3("ReduceSum", attrs({{"keepdims", 0}}), &axes0);
  ASSERT_TRUE(run.status.ok()) << run.status.message();
  EXPECT_EQ(run.shape, (Shape{3}));
  EXPECT_THAT(run.values, ElementsAre(5, 7, 9));
  run = reduce_2x3("ReduceMax", attrs({{"keepdims", 0}}));  // no axes: everything
  EXPECT_EQ(run.shape, (Shape{}));
  EXPECT_THAT(run.values, ElementsAre(6));
  run = reduce_2x3("ReduceSum", attrs({}));
  EXPECT_EQ(run.shape, (Shape{1, 1}));
  EXPECT_THAT(run.values, ElementsAre(21));
  const Shape none = {};
  run = reduce_2x3("ReduceMean", attrs({{"noop_with_empty_axes", 1}}), &none);
  EXPECT_EQ(run.shape, (Shape{2, 3}));
  EXPECT_THAT(run.values, ElementsAre(1, 2, 3, 4, 5, 6));
  const Shape both = {-1, 0};
  run = reduce_2x3("ReduceProd", attrs({{"keepdims", 0}}), &both);
  EXPECT_EQ(run.shape, (Shape{}));
  EXPECT_THAT(run.values, ElementsAre(720));
}

TEST(Reduce, MatchesDoubleLoopOnRandomData) {
  const Shape shape = {3, 4, 5};
  auto values = test_helpers::random_values<double>(60, 11);
  auto x = OwnedTensor::of<double>(shape, values);
  auto out = OwnedTensor::zeros(ScalarType::Float64, {3, 5});
  ASSERT_TRUE(reduce(x.tensor(), ReduceKind::Mean, Shape{1}, false, out.tensor()).ok());
  auto result = out.values<double>();
  for (int i = 0; i < 3; ++i) {
    for (int k = 0; k < 5; ++k) {
      double sum = 0;
      for (int j = 0; j < 4; ++j) sum += values[(i * 4 + j) * 5 + k];
      EXPECT_NEAR(result[i * 5 + k], sum / 4, 1e-12);
    }
  }
}

TEST(Reduce, IntegersHalvesAndNan) {
  auto x = OwnedTensor::of<int32_t>({2, 2}, {7, -3, 4, 10});
  auto out = OwnedTensor::zeros(ScalarType::Int32, {2});
  ASSERT_TRUE(reduce(x.tensor(), ReduceKind::Max, Shape{0}, false, out.tensor()).ok());
  EXPECT_THAT(out.values<int32_t>(), ElementsAre(7, 10));
  ASSERT_TRUE(reduce(x.tensor(), ReduceKind::Mean, Shape{1}, false, out.tensor()).ok());
  EXPECT_THAT(out.values<int32_t>(), ElementsAre(2, 7));
  auto h = OwnedTensor::half_of(ScalarType::BFloat16, {4}, {0.5f, 0.25f, 1, 2});
  auto hout = OwnedTensor::zeros(ScalarType::BFloat16, {});
  ASSERT_TRUE(reduce(h.tensor(), ReduceKind::Sum, Shape{}, false, hout.tensor()).ok());
  EXPECT_THAT(hout.half_values(), ElementsAre(3.75f));
  const float nan = std::numeric_limits<float>::quiet_NaN();
  auto f = OwnedTensor::of<float>({3}, {1, nan, 3});
  auto fout = OwnedTensor::zeros(ScalarType::Float32, {});
  ASSERT_TRUE(reduce(f.tensor(), ReduceKind::Min, Shape{}, false, fout.tensor()).ok());
  EXPECT_TRUE(std::isnan(fout.values<float>()[0]));
}

TEST(Reduce, EmptyReductionGivesIdentity) {
  auto x = OwnedTensor::zeros(ScalarType::Float32, {2, 0});
  auto out = OwnedTensor::zeros(ScalarType::Float32, {2});
  ASSERT_TRUE(reduce(x.tensor(), ReduceKind::Prod, Shape{1}, false, out.tensor()).ok());
  EXPECT_THAT(out.values<float>(), ElementsAre(1, 1));
  ASSERT_TRUE(reduce(x.tensor(), ReduceKind::Max, Shape{1}, false, out.tensor()).ok());
  EXPECT_EQ(out.values<float>()[0], -std::numeric_limits<float>::infinity());
}

TEST(Reduce, BadAxesNameTheSource) {
  auto run = reduce_2x3("ReduceSum", attrs({{"axes", Shape{2}}}));
  EXPECT_EQ(run.status.code(), Error::InvalidArgument);
  EXPECT_THAT(run.status.message(),
              HasSubstr("run kernel 'ReduceSum': attribute 'axes' is 2 (expected -2..1"));
  const Shape twice = {1, -1};
  run = reduce_2x3("ReduceMin", attrs({}), &twice);
  EXPECT_EQ(run.status.code(), Error::InvalidArgument);
  EXPECT_THAT(run.status.message(), HasSubstr("input 1 (axes) [1, -1] repeats axis 1"));
}

// ---- ArgMax, ArgMin ---------------------------------------------------------------------------

TEST(ArgReduce, AxisKeepdimsAndTies) {
  auto x = OwnedTensor::of<float>({2, 3}, {1, 5, 5, 7, 0, 7});
  auto out = OwnedTensor::resizable(ScalarType::Int64, 2);
  EValue in(x.tensor()), result(out.tensor());
  ASSERT_TRUE(run_kernel("ArgMax", {&in}, {&result}, attrs({{"axis", 1}})).ok());
  EXPECT_EQ(sizes_of(result), (Shape{2, 1}));
  EXPECT_THAT(out.values<int64_t>(2), ElementsAre(1, 0));
  ASSERT_TRUE(
      run_kernel("ArgMax", {&in}, {&result}, attrs({{"axis", -1}, {"select_last_index", 1}})).ok());
  EXPECT_THAT(out.values<int64_t>(2), ElementsAre(2, 2));
  auto flat = OwnedTensor::resizable(ScalarType::Int64, 1);
  EValue flat_result(flat.tensor());
  ASSERT_TRUE(run_kernel("ArgMin", {&in}, {&flat_result}, attrs({{"keepdims", 0}})).ok());
  EXPECT_EQ(sizes_of(flat_result), (Shape{3}));
  EXPECT_THAT(flat.values<int64_t>(3), ElementsAre(0, 1, 0));
}

TEST(ArgReduce, IntegersAndErrors) {
  auto x = OwnedTensor::of<int64_t>({4}, {3, -9, 8, -9});
  auto out = OwnedTensor::zeros(ScalarType::Int64, {});
  ASSERT_TRUE(arg_min(x.tensor(), 0, false, true, out.tensor()).ok());
  EXPECT_THAT(out.values<int64_t>(), ElementsAre(3));
  auto result_tensor = OwnedTensor::resizable(ScalarType::Int32, 1);
  EValue in(x.tensor()), result(result_tensor.tensor());
  Status status = run_kernel("ArgMax", {&in}, {&result});
  EXPECT_EQ(status.code(), Error::InvalidType);
  EXPECT_THAT(status.message(), HasSubstr("output 0 has dtype i32 (expected i64)"));
  status = run_kernel("ArgMax", {&in}, {&result}, attrs({{"axis", 1}}));
  EXPECT_EQ(status.code(), Error::InvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("run kernel 'ArgMax': attribute 'axis' is 1 (expected "
                                          "-1..0 for rank 1)"));
}

}  // namespace
}  // namespace kiln::kernels
