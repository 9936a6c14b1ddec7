// NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss against a naive loss written from the
// ONNX definition, on seeded random data over shapes, weights, ignore_index and reductions.
#include <kiln/kernels/test/tensor_helpers.h>

#include <cmath>
#include <optional>

namespace kiln::kernels {
namespace {

using namespace test_helpers;  // NOLINT(google-build-using-namespace): test helpers
using runtime::Error;
using runtime::EValue;
using runtime::Status;
using ::testing::ElementsAre;

struct LossCase {
  std::vector<int64_t> shape;  // [N, C, d1, ...]
  bool weighted;
  std::optional<int64_t> ignore_index;
  std::string reduction;
};

// The loss written out: per target -w[t] * logp[n, t, d] (0 and weight 0 when ignored), then
// the reduction; `log_softmax` first for SoftmaxCrossEntropyLoss.
std::vector<double> naive_loss(const LossCase& s, std::vector<double> x,
                               const std::vector<int64_t>& target, const std::vector<double>& w,
                               bool log_softmax) {
  const int64_t n = s.shape[0], c = s.shape[1];
  const int64_t inner = static_cast<int64_t>(x.size()) / (n * c);
  if (log_softmax) {
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t d = 0; d < inner; ++d) {
        double top = -INFINITY, sum = 0;
        for (int64_t k = 0; k < c; ++k) top = std::max(top, x[(i * c + k) * inner + d]);
        for (int64_t k = 0; k < c; ++k) sum += std::exp(x[(i * c + k) * inner + d] - top);
        for (int64_t k = 0; k < c; ++k) x[(i * c + k) * inner + d] -= top + std::log(sum);
      }
    }
  }
  std::vector<double> per;
  double total = 0, weights = 0;
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t d = 0; d < inner; ++d) {
      const int64_t t = target[static_cast<size_t>(i * inner + d)];
      const bool ignored = s.ignore_index && t == *s.ignore_index;
      const double weight = ignored ? 0 : s.weighted ? w[static_cast<size_t>(t)] : 1;
      const double loss = ignored ? 0 : -x[static_cast<size_t>((i * c + t) * inner + d)] * weight;
      per.push_back(loss);
      total += loss;
      weights += weight;
    }
  }
  if (s.reduction == "none") return per;
  return {s.reduction == "sum" ? total : total / weights};
}

template <typename T, typename Index>
void check(const std::string& op, const LossCase& s, uint32_t seed) {
  SCOPED_TRACE(op + " " + runtime::shape_to_string(s.shape) + " weighted " +
               std::to_string(s.weighted) + " ignore " +
               (s.ignore_index ? std::to_string(*s.ignore_index) : "none") + " " + s.reduction);
  const int64_t n = s.shape[0], c = s.shape[1];
  const int64_t numel = numel_of(s.shape);
  std::vector<int64_t> target_shape = {n};
  for (size_t d = 2; d < s.shape.size(); ++d) target_shape.push_back(s.shape[d]);
  const int64_t targets = numel_of(target_shape);

  std::vector<double> x = random_values<double>(static_cast<size_t>(numel), seed, -3, 1);
  std::vector<double> w = random_values<double>(static_cast<size_t>(c), seed + 1, 0.1, 2);
  std::mt19937 generator(seed + 2);
  std::vector<int64_t> target(static_cast<size_t>(targets));
  for (int64_t& t : target) {
    t = std::uniform_int_distribution<int64_t>(0, c - 1)(generator);
    // About one target in four is the ignored class (when it is one, or out of range).
    if (s.ignore_index && std::uniform_int_distribution<int>(0, 3)(generator) == 0) {
      t = *s.ignore_index;
    }
  }
  auto input = OwnedTensor::of<T>(s.shape, std::vector<T>(x.begin(), x.end()));
  auto tgt = OwnedTensor::of<Index>(target_shape, std::vector<Index>(target.begin(), target.end()));
  auto weight = OwnedTensor::of<T>({c}, std::vector<T>(w.begin(), w.end()));
  auto out = OwnedTensor::resizable(runtime::scalar_type_of<T>,
                                    s.reduction == "none" ? target_shape.size() : 0);
  auto log_prob = OwnedTensor::resizable(runtime::scalar_type_of<T>, s.shape.size());
  EValue in_x(input.tensor()), in_t(tgt.tensor()), in_w(weight.tensor()), none;
  EValue result(out.tensor()), second(log_prob.tensor());
  std::vector<std::pair<std::string, EValue>> a = {{"reduction", EValue(s.reduction)}};
  if (s.ignore_index) a.emplace_back("ignore_index", EValue(*s.ignore_index));
  std::vector<EValue*> inputs = {&in_x, &in_t};
  if (s.weighted) inputs.push_back(&in_w);
  const bool sce = op == "SoftmaxCrossEntropyLoss";
  std::vector<EValue*> outputs = {&result};
  if (sce && seed % 2 == 0) outputs.push_back(&second);
  Status status = run_kernel(op, inputs, outputs, attrs(std::move(a)));
  ASSERT_TRUE(status.ok()) << status.to_string();

  const std::vector<T> stored = input.template values<T>();  // x as the kernel reads it
  const std::vector<double> expected =
      naive_loss(s, std::vector<double>(stored.begin(), stored.end()), target, w, sce);
  EXPECT_EQ(sizes_of(result), s.reduction == "none" ? target_shape : std::vector<int64_t>{});
  const std::vector<T> actual = out.template values<T>(static_cast<int64_t>(expected.size()));
  const double tolerance = std::is_same_v<T, float> ? 1e-5 : 1e-12;
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_NEAR(actual[i], expected[i], tolerance * (1 + std::abs(expected[i]))) << "at " << i;
  }
  if (outputs.size() == 2) {
    EXPECT_EQ(sizes_of(second), s.shape);
    const std::vector<T> lp = log_prob.template values<T>(numel);
    const int64_t inner = numel / (n * c);
    for (int64_t i = 0; i < n; ++i) {  // each column of probabilities sums to 1
      for (int64_t d = 0; d < inner; ++d) {
        double sum = 0;
        for (int64_t k = 0; k < c; ++k) sum += std::exp(double{lp[(i * c + k) * inner + d]});
        EXPECT_NEAR(sum, 1.0, 1e-5);
      }
    }
  }
}

TEST(LossKernels, MatchTheNaiveLossOverShapesWeightsIgnoredClassesAndReductions) {
  const std::vector<std::vector<int64_t>> shapes = {
      {3, 5}, {2, 4, 3}, {2, 3, 2, 4}, {1, 6, 1, 2, 3}};
  uint32_t seed = 1;
  for (const char* op : {"NegativeLogLikelihoodLoss", "SoftmaxCrossEntropyLoss"}) {
    for (const auto& shape : shapes) {
      for (bool weighted : {false, true}) {
        for (std::optional<int64_t> ignore :
             {std::optional<int64_t>(), std::optional<int64_t>(1), std::optional<int64_t>(-1)}) {
          for (const char* reduction : {"none", "sum", "mean"}) {
            LossCase s{shape, weighted, ignore, reduction};
            check<float, int64_t>(op, s, seed++);
          }
        }
      }
    }
  }
  // f64 scores, i32 targets.
  check<double, int32_t>("NegativeLogLikelihoodLoss", LossCase{{4, 3, 2}, true, 2, "mean"}, 100);
  check<double, int32_t>("SoftmaxCrossEntropyLoss", LossCase{{4, 3, 2}, false, -5, "none"}, 102);
}

TEST(LossKernels, MeanIsOverTheWeightsOfTheTargetsCounted) {
  // log-probabilities [2, 3]; targets 2 and 0; weights 1, 2, 3: (0.3 * 3 + 0.1 * 1) / (3 + 1).
  auto logp = OwnedTensor::of<float>({2, 3}, {-0.1f, -0.2f, -0.3f, -0.4f, -0.5f, -0.6f});
  auto target = OwnedTensor::of<int64_t>({2}, {2, 0});
  auto weight = OwnedTensor::of<float>({3}, {1, 2, 3});
  auto out = OwnedTensor::resizable(ScalarType::Float32, 0);
  EValue x(logp.tensor()), t(target.tensor()), w(weight.tensor()), result(out.tensor());
  ASSERT_TRUE(run_kernel("NegativeLogLikelihoodLoss", {&x, &t, &w}, {&result}).ok());
  EXPECT_NEAR(out.values<float>(1)[0], (0.3 * 3 + 0.4 * 1) / 4, 1e-6);
  // Every target ignored: 0 / 0, as ONNX's reference.
  auto ignored = OwnedTensor::of<int64_t>({2}, {7, 7});
  EValue all_ignored(ignored.tensor());
  ASSERT_TRUE(run_kernel("NegativeLogLikelihoodLoss", {&x, &all_ignored}, {&result},
                         attrs({{"ignore_index", int64_t{7}}}))
                  .ok());
  EXPECT_TRUE(std::isnan(out.values<float>(1)[0]));
}

TEST(LossKernels, BadInputsAreNamed) {
  auto logp = OwnedTensor::of<float>({2, 3}, std::vector<float>(6, -1.0f));
  auto target = OwnedTensor::of<int64_t>({2}, {1, 3});
  auto out = OwnedTensor::resizable(ScalarType::Float32, 0);  // the mean
  EValue x(logp.tensor()), t(target.tensor()), result(out.tensor());
  for (const char* op : {"NegativeLogLikelihoodLoss", "SoftmaxCrossEntropyLoss"}) {
    expect_error(run_kernel(op, {&x, &t}, {&result}), Error::InvalidArgument,
                 "input 1 (target) holds 3 at flat index 1 (expected a class in [0, 3))");
    expect_error(run_kernel(op, {&x, &t}, {&result}, attrs({{"ignore_index", int64_t{-1}}})),
                 Error::InvalidArgument, "(expected a class in [0, 3) or ignore_index -1)");
    expect_error(run_kernel(op, {&x, &t}, {&result}, attrs({{"reduction", "average"}})),
                 Error::InvalidArgument,
                 "attribute 'reduction' is 'average' (expected none, sum or mean)");
  }
  auto wrong_target = OwnedTensor::of<int64_t>({3}, {0, 1, 2});
  EValue wt(wrong_target.tensor());
  expect_error(run_kernel("NegativeLogLikelihoodLoss", {&x, &wt}, {&result}),
               Error::InvalidArgument,
               "input 1 (target) has shape [3] (expected [2] for input 0 of shape [2, 3])");
  auto float_target = OwnedTensor::of<float>({2}, {0, 1});
  EValue ft(float_target.tensor());
  expect_error(run_kernel("NegativeLogLikelihoodLoss", {&x, &ft}, {&result}), Error::InvalidType,
               "input 1 (target)");
  auto good_target = OwnedTensor::of<int64_t>({2}, {0, 1});
  auto short_weight = OwnedTensor::of<float>({2}, {1, 1});
  EValue gt(good_target.tensor()), sw(short_weight.tensor());
  expect_error(run_kernel("NegativeLogLikelihoodLoss", {&x, &gt, &sw}, {&result}),
               Error::InvalidArgument,
               "input 2 (weight) has shape [2] (expected [3], one weight per class)");
  auto vector = OwnedTensor::of<float>({3}, {1, 2, 3});
  EValue v(vector.tensor());
  expect_error(run_kernel("SoftmaxCrossEntropyLoss", {&v, &gt}, {&result}), Error::InvalidArgument,
               "input 0 has shape [3] (expected [N, C] or [N, C, d1, ...])");
}

}  // namespace
}  // namespace kiln::kernels
