// GatherND, ScatterElements, Scatter, ScatterND, OneHot, NonZero, Compress, Unique,
// ReverseSequence, DepthToSpace and SpaceToDepth.

#include <kiln/kernels/kernels.h>
#include <kiln/kernels/test/tensor_helpers.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

namespace kiln::kernels {
namespace {

using runtime::Error;
using runtime::EValue;
using runtime::ScalarType;
using runtime::Status;
using test_helpers::attrs;
using test_helpers::expect_error;
using test_helpers::iota;
using test_helpers::OwnedTensor;
using test_helpers::run_kernel;
using test_helpers::sizes_of;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

using Shape = std::vector<int64_t>;

// ---- GatherND
// ------------------------------------------------------------------------------------

TEST(GatherND, GathersElementsAndSlices) {
  auto data = OwnedTensor::of<int32_t>({2, 2}, {0, 1, 2, 3});
  auto elements = OwnedTensor::of<int64_t>({2, 2}, {0, 0, 1, 1});
  auto rows = OwnedTensor::of<int64_t>({2, 1}, {1, -2});
  auto out = OwnedTensor::resizable(ScalarType::Int32, 2);
  auto out_elements = OwnedTensor::resizable(ScalarType::Int32, 1);
  EValue in(data.tensor()), in_elements(elements.tensor()), in_rows(rows.tensor()),
      result(out.tensor()), result_elements(out_elements.tensor());
  ASSERT_TRUE(run_kernel("GatherND", {&in, &in_elements}, {&result_elements}).ok());
  EXPECT_EQ(sizes_of(result_elements), (Shape{2}));
  EXPECT_THAT(out_elements.values<int32_t>(2), ElementsAre(0, 3));
  ASSERT_TRUE(run_kernel("GatherND", {&in, &in_rows}, {&result}).ok());
  EXPECT_EQ(sizes_of(result), (Shape{2, 2}));
  EXPECT_THAT(out.values<int32_t>(4), ElementsAre(2, 3, 0, 1));
}

TEST(GatherND, BatchDimsIndexEachBatchSeparately) {
  // ONNX example 5: data [2, 2, 2], indices [[1], [0]], batch_dims 1 -> [[2, 3], [4, 5]].
  auto data = OwnedTensor::of<float>({2, 2, 2}, iota(8));
  auto indices = OwnedTensor::of<int64_t>({2, 1}, {1, 0});
  auto out = OwnedTensor::resizable(ScalarType::Float32, 2);
  EValue in(data.tensor()), in_indices(indices.tensor()), result(out.tensor());
  ASSERT_TRUE(
      run_kernel("GatherND", {&in, &in_indices}, {&result}, attrs({{"batch_dims", 1}})).ok());
  EXPECT_EQ(sizes_of(result), (Shape{2, 2}));
  EXPECT_THAT(out.values<float>(4), ElementsAre(2, 3, 4, 5));
}

TEST(GatherND, MatchesANaiveLoopOnRandomData) {
  std::mt19937 generator(7);
  const Shape data_shape = {3, 4, 5, 2};
  auto data = OwnedTensor::of<float>(data_shape, test_helpers::random_values(120, 3));
  // batch_dims 1, tuples of 2 coordinates: out [3, 6, 2].
  std::vector<int32_t> index_values;
  for (int i = 0; i < 3 * 6; ++i) {
    index_values.push_back(static_cast<int32_t>(generator() % 8) - 4);   // -4..3 over dim 4
    index_values.push_back(static_cast<int32_t>(generator() % 10) - 5);  // -5..4 over dim 5
  }
  auto indices = OwnedTensor::of<int32_t>({3, 6, 2}, index_values);
  auto out = OwnedTensor::zeros(ScalarType::Float32, {3, 6, 2});
  ASSERT_TRUE(gather_nd(data.tensor(), indices.tensor(), 1, out.tensor()).ok());
  const auto x = data.values<float>();
  const auto y = out.values<float>();
  for (int b = 0; b < 3; ++b) {
    for (int t = 0; t < 6; ++t) {
      int i = index_values[(b * 6 + t) * 2], j = index_values[(b * 6 + t) * 2 + 1];
      i = i < 0 ? i + 4 : i;
      j = j < 0 ? j + 5 : j;
      for (int e = 0; e < 2; ++e) {
        EXPECT_EQ(y[(b * 6 + t) * 2 + e], x[((b * 4 + i) * 5 + j) * 2 + e]);
      }
    }
  }
}

TEST(GatherND, RejectsOutOfRangeIndicesAndBadShapes) {
  auto data = OwnedTensor::of<float>({2, 3}, iota(6));
  auto bad = OwnedTensor::of<int64_t>({2, 2}, {0, 1, 1, 3});
  auto deep = OwnedTensor::of<int64_t>({1, 3}, {0, 0, 0});
  auto out = OwnedTensor::resizable(ScalarType::Float32, 1);
  EValue in(data.tensor()), in_bad(bad.tensor()), in_deep(deep.tensor()), result(out.tensor());
  expect_error(run_kernel("GatherND", {&in, &in_bad}, {&result}), Error::InvalidArgument,
               "run kernel 'GatherND': input 1 (indices) has 3 at element 3 (expected -3..2 for "
               "dimension 1 of input 0 (data) of size 3)");
  expect_error(run_kernel("GatherND", {&in, &in_deep}, {&result}), Error::InvalidArgument,
               "input 1 (indices) has last dimension 3 (expected 1..2");
  expect_error(run_kernel("GatherND", {&in, &in_bad}, {&result}, attrs({{"batch_dims", 2}})),
               Error::InvalidArgument, "attribute 'batch_dims' is 2 (expected 0..1");
}

// ---- ScatterElements, Scatter, ScatterND
// -----------------------------------------------------------

TEST(ScatterElements, WritesAlongTheAxisWithEachReduction) {
  auto data = OwnedTensor::of<float>({1, 5}, {1, 2, 3, 4, 5});
  auto indices = OwnedTensor::of<int64_t>({1, 3}, {1, -2, 1});
  auto updates = OwnedTensor::of<float>({1, 3}, {10, 20, 30});
  auto out = OwnedTensor::resizable(ScalarType::Float32, 2);
  EValue in(data.tensor()), in_indices(indices.tensor()), in_updates(updates.tensor()),
      result(out.tensor());
  auto run = [&](const char* reduction) {
    return run_kernel("ScatterElements", {&in, &in_indices, &in_updates}, {&result},
                      attrs({{"axis", 1}, {"reduction", EValue(std::string(reduction))}}));
  };
  ASSERT_TRUE(run("none").ok());
  EXPECT_THAT(out.values<float>(5), ElementsAre(1, 30, 3, 20, 5));  // the last update wins
  ASSERT_TRUE(run("add").ok());
  EXPECT_THAT(out.values<float>(5), ElementsAre(1, 42, 3, 24, 5));
  ASSERT_TRUE(run("mul").ok());
  EXPECT_THAT(out.values<float>(5), ElementsAre(1, 600, 3, 80, 5));
  ASSERT_TRUE(run("max").ok());
  EXPECT_THAT(out.values<float>(5), ElementsAre(1, 30, 3, 20, 5));
  ASSERT_TRUE(run("min").ok());
  EXPECT_THAT(out.values<float>(5), ElementsAre(1, 2, 3, 4, 5));
  expect_error(run("sum"), Error::InvalidArgument,
               "run kernel 'ScatterElements': attribute 'reduction' is 'sum' (expected none, add, "
               "mul, max or min)");
}

TEST(ScatterElements, ScatterIsTheOpset9NameAndAxisZeroIsTheDefault) {
  // The ONNX Scatter example: data 3x3 zeros, indices [[1, 0, 2], [0, 2, 1]].
  auto data = OwnedTensor::of<float>({3, 3}, std::vector<float>(9, 0));
  auto indices = OwnedTensor::of<int32_t>({2, 3}, {1, 0, 2, 0, 2, 1});
  auto updates = OwnedTensor::of<float>({2, 3}, {1, 1.1f, 1.2f, 2, 2.1f, 2.2f});
  auto out = OwnedTensor::resizable(ScalarType::Float32, 2);
  EValue in(data.tensor()), in_indices(indices.tensor()), in_updates(updates.tensor()),
      result(out.tensor());
  ASSERT_TRUE(run_kernel("Scatter", {&in, &in_indices, &in_updates}, {&result}).ok());
  EXPECT_THAT(out.values<float>(9), ElementsAre(2, 1.1f, 0, 1, 0, 2.2f, 0, 2.1f, 1.2f));
}

TEST(ScatterElements, IntegerAddMatchesANaiveLoopOnRandomData) {
  std::mt19937 generator(11);
  const Shape shape = {4, 6, 3};
  std::vector<int64_t> data_values(72), index_values(4 * 5 * 3), update_values(60);
  for (auto& v : data_values) v = static_cast<int64_t>(generator() % 100);
  for (auto& v : index_values) v = static_cast<int64_t>(generator() % 12) - 6;
  for (auto& v : update_values) v = static_cast<int64_t>(generator() % 100);
  auto data = OwnedTensor::of<int64_t>(shape, data_values);
  auto indices = OwnedTensor::of<int64_t>({4, 5, 3}, index_values);
  auto updates = OwnedTensor::of<int64_t>({4, 5, 3}, update_values);
  auto out = OwnedTensor::zeros(ScalarType::Int64, shape);
  ASSERT_TRUE(scatter_elements(data.tensor(), indices.tensor(), updates.tensor(), 1,
                               ScatterReduction::Add, out.tensor())
                  .ok());
  auto expected = data_values;
  for (int i = 0; i < 4; ++i) {
    for (int j = 0; j < 5; ++j) {
      for (int k = 0; k < 3; ++k) {
        int64_t index = index_values[(i * 5 + j) * 3 + k];
        if (index < 0) index += 6;
        expected[(i * 6 + index) * 3 + k] += update_values[(i * 5 + j) * 3 + k];
      }
    }
  }
  EXPECT_EQ(out.values<int64_t>(), expected);
}

TEST(ScatterElements, RejectsOutOfRangeIndicesBeforeWriting) {
  auto data = OwnedTensor::of<float>({2, 2}, {1, 2, 3, 4});
  auto indices = OwnedTensor::of<int64_t>({1, 2}, {0, -3});
  auto updates = OwnedTensor::of<float>({1, 2}, {9, 9});
  auto short_updates = OwnedTensor::of<float>({1, 1}, {9});
  auto out = OwnedTensor::of<float>({2, 2}, {7, 7, 7, 7});
  Status status = scatter_elements(data.tensor(), indices.tensor(), updates.tensor(), 1,
                                   ScatterReduction::None, out.tensor());
  expect_error(status, Error::InvalidArgument,
               "run kernel 'ScatterElements': input 1 (indices) has -3 at element 1 (expected "
               "-2..1 for axis 1 of size 2)");
  EXPECT_THAT(out.values<float>(), ElementsAre(7, 7, 7, 7));
  indices = OwnedTensor::of<int64_t>({1, 2}, {0, 1});
  expect_error(scatter_elements(data.tensor(), indices.tensor(), short_updates.tensor(), 1,
                                ScatterReduction::None, out.tensor()),
               Error::InvalidArgument, "input 2 (updates) has shape [1, 1] (expected [1, 2]");
}

TEST(ScatterND, UpdatesSlicesWithReductions) {
  // data [4, 2]; indices [[1], [3], [1]] update whole rows.
  auto data = OwnedTensor::of<int32_t>({4, 2}, {1, 2, 3, 4, 5, 6, 7, 8});
  auto indices = OwnedTensor::of<int64_t>({3, 1}, {1, -1, 1});
  auto updates = OwnedTensor::of<int32_t>({3, 2}, {10, 20, 30, 40, 50, 60});
  auto out = OwnedTensor::resizable(ScalarType::Int32, 2);
  EValue in(data.tensor()), in_indices(indices.tensor()), in_updates(updates.tensor()),
      result(out.tensor());
  auto run = [&](const char* reduction) {
    return run_kernel("ScatterND", {&in, &in_indices, &in_updates}, {&result},
                      attrs({{"reduction", EValue(std::string(reduction))}}));
  };
  ASSERT_TRUE(run("none").ok());
  EXPECT_THAT(out.values<int32_t>(8), ElementsAre(1, 2, 50, 60, 5, 6, 30, 40));
  ASSERT_TRUE(run("add").ok());
  EXPECT_THAT(out.values<int32_t>(8), ElementsAre(1, 2, 63, 84, 5, 6, 37, 48));
  ASSERT_TRUE(run("mul").ok());
  EXPECT_THAT(out.values<int32_t>(8), ElementsAre(1, 2, 1500, 4800, 5, 6, 210, 320));
  ASSERT_TRUE(run("max").ok());
  EXPECT_THAT(out.values<int32_t>(8), ElementsAre(1, 2, 50, 60, 5, 6, 30, 40));
  ASSERT_TRUE(run("min").ok());
  EXPECT_THAT(out.values<int32_t>(8), ElementsAre(1, 2, 3, 4, 5, 6, 7, 8));
}

TEST(ScatterND, ElementUpdatesOnF16AndErrors) {
  auto data = OwnedTensor::half_of(ScalarType::Float16, {2, 2}, {1, 2, 3, 4});
  auto indices = OwnedTensor::of<int64_t>({2, 2}, {0, 1, 1, 0});
  auto updates = OwnedTensor::half_of(ScalarType::Float16, {2}, {0.5f, 0.25f});
  auto out = OwnedTensor::zeros(ScalarType::Float16, {2, 2});
  ASSERT_TRUE(scatter_nd(data.tensor(), indices.tensor(), updates.tensor(), ScatterReduction::Add,
                         out.tensor())
                  .ok());
  EXPECT_THAT(out.half_values(), ElementsAre(1, 2.5f, 3.25f, 4));
  auto bad = OwnedTensor::of<int64_t>({2, 2}, {0, 1, 2, 0});
  expect_error(scatter_nd(data.tensor(), bad.tensor(), updates.tensor(), ScatterReduction::None,
                          out.tensor()),
               Error::InvalidArgument,
               "run kernel 'ScatterND': input 1 (indices) has 2 at element 2 (expected -2..1 for "
               "dimension 0 of input 0 (data) of size 2)");
  auto wrong = OwnedTensor::half_of(ScalarType::Float16, {3}, {0, 0, 0});
  expect_error(scatter_nd(data.tensor(), indices.tensor(), wrong.tensor(), ScatterReduction::None,
                          out.tensor()),
               Error::InvalidArgument, "input 2 (updates) has shape [3] (expected [2]");
}

// ---- OneHot
// ----------------------------------------------------------------------------------------

TEST(OneHot, InsertsTheDepthAxisAndCountsNegativeIndicesFromTheEnd) {
  auto indices = OwnedTensor::of<int64_t>({3}, {0, -1, 7});
  auto depth = OwnedTensor::of<float>({}, {3.7f});  // truncated to 3
  auto values = OwnedTensor::of<int32_t>({2}, {5, 9});
  auto out = OwnedTensor::resizable(ScalarType::Int32, 2);
  EValue in(indices.tensor()), in_depth(depth.tensor()), in_values(values.tensor()),
      result(out.tensor());
  ASSERT_TRUE(run_kernel("OneHot", {&in, &in_depth, &in_values}, {&result}).ok());
  EXPECT_EQ(sizes_of(result), (Shape{3, 3}));
  // 7 is outside [-3, 3): a row of off values, as ONNX specifies.
  EXPECT_THAT(out.values<int32_t>(9), ElementsAre(9, 5, 5, 5, 5, 9, 5, 5, 5));
  ASSERT_TRUE(
      run_kernel("OneHot", {&in, &in_depth, &in_values}, {&result}, attrs({{"axis", 0}})).ok());
  EXPECT_THAT(out.values<int32_t>(9), ElementsAre(9, 5, 5, 5, 5, 5, 5, 9, 5));
}

TEST(OneHot, FloatIndicesWithAxisMatchANaiveLoop) {
  auto indices = OwnedTensor::of<float>({2, 3}, {0, 1.9f, -2, 4, -5, 3});
  auto out = OwnedTensor::zeros(ScalarType::Float32, {2, 5, 3});
  auto values = OwnedTensor::of<float>({2}, {-1, 1});
  ASSERT_TRUE(one_hot(indices.tensor(), 5, values.tensor(), 1, out.tensor()).ok());
  const std::vector<int> truncated = {0, 1, 3, 4, 0, 3};
  const auto y = out.values<float>();
  for (int i = 0; i < 2; ++i) {
    for (int d = 0; d < 5; ++d) {
      for (int j = 0; j < 3; ++j) {
        EXPECT_EQ(y[(i * 5 + d) * 3 + j], truncated[i * 3 + j] == d ? 1 : -1) << i << d << j;
      }
    }
  }
}

TEST(OneHot, RejectsBadDepthValuesAndAxis) {
  auto indices = OwnedTensor::of<int64_t>({2}, {0, 1});
  auto zero = OwnedTensor::of<int64_t>({1}, {0});
  auto depth = OwnedTensor::of<int64_t>({1}, {2});
  auto values = OwnedTensor::of<float>({3}, {0, 1, 2});
  auto out = OwnedTensor::resizable(ScalarType::Float32, 2);
  EValue in(indices.tensor()), in_zero(zero.tensor()), in_depth(depth.tensor()),
      in_values(values.tensor()), result(out.tensor());
  expect_error(run_kernel("OneHot", {&in, &in_zero, &in_values}, {&result}), Error::InvalidArgument,
               "run kernel 'OneHot': input 1 (depth) is 0 (expected at "
               "least 1)");
  expect_error(run_kernel("OneHot", {&in, &in_depth, &in_values}, {&result}),
               Error::InvalidArgument, "input 2 (values) has shape [3] (expected two elements");
  expect_error(run_kernel("OneHot", {&in, &in_depth, &in_values}, {&result}, attrs({{"axis", 2}})),
               Error::InvalidArgument, "attribute 'axis' is 2 (expected -2..1");
}

// ---- NonZero, Compress
// -----------------------------------------------------------------------------

TEST(NonZero, ListsCoordinatesInRowMajorOrder) {
  auto x = OwnedTensor::of<float>({2, 3}, {1, 0, 0, 0, -2, std::nanf("")});
  auto out = OwnedTensor::resizable(ScalarType::Int64, 2);
  EValue in(x.tensor()), result(out.tensor());
  ASSERT_TRUE(run_kernel("NonZero", {&in}, {&result}).ok());
  EXPECT_EQ(sizes_of(result), (Shape{2, 3}));
  EXPECT_THAT(out.values<int64_t>(6), ElementsAre(0, 1, 1, 0, 1, 2));
  auto flags = OwnedTensor::of<bool>({4}, {false, false, false, false});
  EValue in_flags(flags.tensor());
  ASSERT_TRUE(run_kernel("NonZero", {&in_flags}, {&result}).ok());
  EXPECT_EQ(sizes_of(result), (Shape{1, 0}));
}

TEST(NonZero, GrowsAnUnboundedOutputAndReportsABoundedOneTooSmall) {
  std::vector<int32_t> values(64);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<int32_t>(i % 3);
  auto x = OwnedTensor::of<int32_t>({4, 16}, values);
  auto small = OwnedTensor::resizable(ScalarType::Int64, 2, 8);
  EValue in(x.tensor()), result(small.tensor());
  Status status = run_kernel("NonZero", {&in}, {&result});
  EXPECT_EQ(status.code(), Error::InvalidArgument);
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("run kernel 'NonZero': resize output 0 to [2, 42]"));
  auto big = OwnedTensor::resizable(ScalarType::Int64, 2, 84);
  EValue fits(big.tensor());
  ASSERT_TRUE(run_kernel("NonZero", {&in}, {&fits}).ok());
  const auto got = big.values<int64_t>(84);
  int column = 0;
  for (int i = 0; i < 64; ++i) {
    if (values[static_cast<size_t>(i)] == 0) continue;
    EXPECT_EQ(got[column], i / 16);
    EXPECT_EQ(got[42 + column], i % 16);
    ++column;
  }
  EXPECT_EQ(column, 42);
}

TEST(Compress, SelectsAlongAnAxisOrTheFlattenedInput) {
  auto x = OwnedTensor::of<float>({3, 2}, iota(6));
  auto condition = OwnedTensor::of<bool>({2}, {false, true});
  auto out = OwnedTensor::resizable(ScalarType::Float32, 2);
  auto flat = OwnedTensor::resizable(ScalarType::Float32, 1);
  EValue in(x.tensor()), in_condition(condition.tensor()), result(out.tensor()),
      flat_result(flat.tensor());
  ASSERT_TRUE(run_kernel("Compress", {&in, &in_condition}, {&result}, attrs({{"axis", 0}})).ok());
  EXPECT_EQ(sizes_of(result), (Shape{1, 2}));
  EXPECT_THAT(out.values<float>(2), ElementsAre(2, 3));
  ASSERT_TRUE(run_kernel("Compress", {&in, &in_condition}, {&result}, attrs({{"axis", -1}})).ok());
  EXPECT_EQ(sizes_of(result), (Shape{3, 1}));
  EXPECT_THAT(out.values<float>(3), ElementsAre(1, 3, 5));
  ASSERT_TRUE(run_kernel("Compress", {&in, &in_condition}, {&flat_result}).ok());
  EXPECT_EQ(sizes_of(flat_result), (Shape{1}));
  EXPECT_THAT(flat.values<float>(1), ElementsAre(1));
  auto long_condition = OwnedTensor::of<bool>({4}, {true, true, true, true});
  EValue in_long(long_condition.tensor());
  expect_error(run_kernel("Compress", {&in, &in_long}, {&result}, attrs({{"axis", 1}})),
               Error::InvalidArgument,
               "run kernel 'Compress': input 1 (condition) has 4 elements (expected at most 2");
}

// ---- Unique
// ----------------------------------------------------------------------------------------

TEST(Unique, SortedAndUnsortedWithAllFourOutputs) {
  auto x = OwnedTensor::of<float>({6}, {2, 1, 1, 3, 4, 3});
  auto y = OwnedTensor::resizable(ScalarType::Float32, 1);
  auto indices = OwnedTensor::resizable(ScalarType::Int64, 1);
  auto inverse = OwnedTensor::resizable(ScalarType::Int64, 1);
  auto counts = OwnedTensor::resizable(ScalarType::Int64, 1);
  EValue in(x.tensor()), out_y(y.tensor()), out_indices(indices.tensor()),
      out_inverse(inverse.tensor()), out_counts(counts.tensor());
  ASSERT_TRUE(run_kernel("Unique", {&in}, {&out_y, &out_indices, &out_inverse, &out_counts},
                         attrs({{"sorted", 0}}))
                  .ok());
  EXPECT_THAT(y.values<float>(4), ElementsAre(2, 1, 3, 4));
  EXPECT_THAT(indices.values<int64_t>(4), ElementsAre(0, 1, 3, 4));
  EXPECT_THAT(inverse.values<int64_t>(6), ElementsAre(0, 1, 1, 2, 3, 2));
  EXPECT_THAT(counts.values<int64_t>(4), ElementsAre(1, 2, 2, 1));
  ASSERT_TRUE(run_kernel("Unique", {&in}, {&out_y, &out_indices, &out_inverse, &out_counts}).ok());
  EXPECT_THAT(y.values<float>(4), ElementsAre(1, 2, 3, 4));
  EXPECT_THAT(indices.values<int64_t>(4), ElementsAre(1, 0, 3, 4));
  EXPECT_THAT(inverse.values<int64_t>(6), ElementsAre(1, 0, 0, 2, 3, 2));
  EXPECT_THAT(counts.values<int64_t>(4), ElementsAre(2, 1, 2, 1));
  ASSERT_TRUE(run_kernel("Unique", {&in}, {&out_y}).ok());
  EXPECT_EQ(sizes_of(out_y), (Shape{4}));
}

TEST(Unique, SlicesAlongAnAxisSortLexicographically) {
  // ONNX example 3 transposed: columns [1, 1, 2], [0, 0, 3], [0, 0, 4] ... along axis 1.
  auto x = OwnedTensor::of<int32_t>({2, 4}, {2, 1, 2, 1, 0, 5, 0, 5});
  auto plan = unique_plan(x.tensor(), true, -1);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->y_shape, (Shape{2, 2}));
  EXPECT_EQ(plan->indices, (Shape{1, 0}));
  EXPECT_EQ(plan->inverse, (Shape{1, 0, 1, 0}));
  EXPECT_EQ(plan->counts, (Shape{2, 2}));
  auto y = OwnedTensor::zeros(ScalarType::Int32, {2, 2});
  ASSERT_TRUE(unique(x.tensor(), *plan, y.tensor()).ok());
  EXPECT_THAT(y.values<int32_t>(), ElementsAre(1, 2, 5, 0));
  expect_error(unique_plan(x.tensor(), true, 2).status(), Error::InvalidArgument,
               "run kernel 'Unique': attribute 'axis' is 2 (expected -2..1");
}

TEST(Unique, RandomDataMatchesANaiveSearch) {
  std::mt19937 generator(5);
  std::vector<int64_t> values(200);
  for (auto& v : values) v = static_cast<int64_t>(generator() % 17);
  auto x = OwnedTensor::of<int64_t>({10, 20}, values);
  auto plan = unique_plan(x.tensor(), false, std::nullopt);
  ASSERT_TRUE(plan.ok());
  std::vector<int64_t> seen, firsts, counts;
  for (size_t i = 0; i < values.size(); ++i) {
    auto it = std::find(seen.begin(), seen.end(), values[i]);
    if (it == seen.end()) {
      seen.push_back(values[i]);
      firsts.push_back(static_cast<int64_t>(i));
      counts.push_back(1);
    } else {
      ++counts[static_cast<size_t>(it - seen.begin())];
    }
    EXPECT_EQ(seen[static_cast<size_t>(plan->inverse[i])], values[i]);
  }
  EXPECT_EQ(plan->indices, firsts);
  EXPECT_EQ(plan->counts, counts);
}

// ---- ReverseSequence, DepthToSpace, SpaceToDepth
// ---------------------------------------------------

TEST(ReverseSequence, ReversesEachBatchPrefix) {
  // ONNX example: time_axis 0, batch_axis 1, x[t][b] = 4t + b, lens [4, 3, 2, 1].
  auto x = OwnedTensor::of<float>({4, 4}, iota(16));
  auto lens = OwnedTensor::of<int64_t>({4}, {4, 3, 2, 1});
  auto out = OwnedTensor::resizable(ScalarType::Float32, 2);
  EValue in(x.tensor()), in_lens(lens.tensor()), result(out.tensor());
  ASSERT_TRUE(run_kernel("ReverseSequence", {&in, &in_lens}, {&result}).ok());
  EXPECT_THAT(out.values<float>(16),
              ElementsAre(12, 9, 6, 3, 8, 5, 2, 7, 4, 1, 10, 11, 0, 13, 14, 15));
  ASSERT_TRUE(run_kernel("ReverseSequence", {&in, &in_lens}, {&result},
                         attrs({{"batch_axis", 0}, {"time_axis", 1}}))
                  .ok());
  EXPECT_THAT(out.values<float>(16),
              ElementsAre(3, 2, 1, 0, 6, 5, 4, 7, 9, 8, 10, 11, 12, 13, 14, 15));
  auto bad = OwnedTensor::of<int64_t>({4}, {1, 5, 1, 1});
  EValue in_bad(bad.tensor());
  expect_error(run_kernel("ReverseSequence", {&in, &in_bad}, {&result}), Error::InvalidArgument,
               "run kernel 'ReverseSequence': input 1 (sequence_lens) has 5 at element 1 "
               "(expected 0..4 for time axis 0 of size 4)");
  expect_error(run_kernel("ReverseSequence", {&in, &in_lens}, {&result},
                          attrs({{"batch_axis", 1}, {"time_axis", 1}})),
               Error::InvalidArgument, "(expected 0 and 1 in either order)");
}

TEST(DepthToSpace, DcrAndCrdMatchTheReshapeTransposeDefinition) {
  const int64_t n = 2, c = 8, h = 2, w = 3, b = 2, co = c / (b * b);
  auto x = OwnedTensor::of<float>({n, c, h, w}, iota(static_cast<int>(n * c * h * w)));
  auto dcr = OwnedTensor::zeros(ScalarType::Float32, {n, co, h * b, w * b});
  auto crd = OwnedTensor::zeros(ScalarType::Float32, {n, co, h * b, w * b});
  ASSERT_TRUE(depth_to_space(x.tensor(), b, DepthToSpaceMode::DCR, dcr.tensor()).ok());
  ASSERT_TRUE(depth_to_space(x.tensor(), b, DepthToSpaceMode::CRD, crd.tensor()).ok());
  const auto y_dcr = dcr.values<float>(), y_crd = crd.values<float>();
  auto input = [&](int64_t i, int64_t ch, int64_t y, int64_t z) {
    return static_cast<float>(((i * c + ch) * h + y) * w + z);
  };
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t ch = 0; ch < co; ++ch) {
      for (int64_t y = 0; y < h * b; ++y) {
        for (int64_t z = 0; z < w * b; ++z) {
          const int64_t o = ((i * co + ch) * h * b + y) * w * b + z;
          const int64_t by = y % b, bz = z % b;
          EXPECT_EQ(y_dcr[o], input(i, (by * b + bz) * co + ch, y / b, z / b));
          EXPECT_EQ(y_crd[o], input(i, ch * b * b + by * b + bz, y / b, z / b));
        }
      }
    }
  }
  // SpaceToDepth inverts DCR DepthToSpace.
  auto back = OwnedTensor::zeros(ScalarType::Float32, {n, c, h, w});
  ASSERT_TRUE(space_to_depth(dcr.tensor(), b, back.tensor()).ok());
  EXPECT_EQ(back.values<float>(), x.values<float>());
}

TEST(DepthToSpace, AdaptersReadAttributesAndRejectBadShapes) {
  auto x = OwnedTensor::of<float>({1, 4, 1, 1}, {1, 2, 3, 4});
  auto out = OwnedTensor::resizable(ScalarType::Float32, 4);
  EValue in(x.tensor()), result(out.tensor());
  ASSERT_TRUE(run_kernel("DepthToSpace", {&in}, {&result},
                         attrs({{"blocksize", 2}, {"mode", EValue(std::string("CRD"))}}))
                  .ok());
  EXPECT_EQ(sizes_of(result), (Shape{1, 1, 2, 2}));
  EXPECT_THAT(out.values<float>(4), ElementsAre(1, 2, 3, 4));
  expect_error(run_kernel("DepthToSpace", {&in}, {&result}, attrs({{"blocksize", 3}})),
               Error::InvalidArgument,
               "run kernel 'DepthToSpace': input 0 has 4 channels (expected a multiple of 9");
  expect_error(run_kernel("SpaceToDepth", {&in}, {&result}, attrs({{"blocksize", 2}})),
               Error::InvalidArgument,
               "run kernel 'SpaceToDepth': input 0 has shape [1, 4, 1, 1] (expected height and "
               "width multiples of blocksize 2)");
  expect_error(run_kernel("SpaceToDepth", {&in}, {&result}, attrs({{"blocksize", 0}})),
               Error::InvalidArgument, "attribute 'blocksize' is 0 (expected 1..1048576");
  expect_error(run_kernel("DepthToSpace", {&in}, {&result}), Error::InvalidArgument,
               "attribute 'blocksize' is missing");
  expect_error(run_kernel("DepthToSpace", {&in}, {&result},
                          attrs({{"blocksize", 2}, {"mode", EValue(std::string("RCD"))}})),
               Error::InvalidArgument, "attribute 'mode' is 'RCD' (expected DCR or CRD)");
}

}  // namespace
}  // namespace kiln::kernels
