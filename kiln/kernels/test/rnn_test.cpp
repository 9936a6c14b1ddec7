// RNN, GRU and LSTM (ONNX semantics): hand-computed steps, a double-precision reference over
// every direction, layout and option, sequence lengths, the adapter, and errors.

#include <kiln/kernels/kernels.h>
#include <kiln/kernels/test/tensor_helpers.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

namespace kiln::kernels {
namespace {

using runtime::Error;
using runtime::EValue;
using runtime::ScalarType;
using test_helpers::OwnedTensor;
using ::testing::HasSubstr;
using Kind = RnnActivation::Kind;

using Shape = std::vector<int64_t>;

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

// The activation functions as the ONNX operator documentation lists them.
double reference_activation(const RnnActivation& a, double x, std::optional<double> clip) {
  if (clip) x = std::clamp(x, -*clip, *clip);
  switch (a.kind) {
    case Kind::Relu:
      return std::max(x, 0.0);
    case Kind::Tanh:
      return std::tanh(x);
    case Kind::Sigmoid:
      return sigmoid(x);
    case Kind::Affine:
      return a.alpha * x + a.beta;
    case Kind::LeakyRelu:
      return x >= 0 ? x : a.alpha * x;
    case Kind::ThresholdedRelu:
      return x > a.alpha ? x : 0.0;
    case Kind::ScaledTanh:
      return a.alpha * std::tanh(a.beta * x);
    case Kind::HardSigmoid:
      return std::clamp(a.alpha * x + a.beta, 0.0, 1.0);
    case Kind::Elu:
      return x >= 0 ? x : a.alpha * (std::exp(x) - 1.0);
    case Kind::Softsign:
      return x / (1.0 + std::abs(x));
    case Kind::Softplus:
      return std::log(1.0 + std::exp(x));
  }
  return x;
}

struct Case {
  RnnCell cell = RnnCell::Rnn;
  RnnDirection direction = RnnDirection::Forward;
  int64_t layout = 0;
  int64_t seq = 4, batch = 3, input = 5, hidden = 3;
  bool bias = true, lens = false, initial = true, peepholes = false;
  bool linear_before_reset = false, input_forget = false;
  std::optional<double> clip;
  std::vector<RnnActivation> activations;  // empty: defaults
};

int64_t gates_of(RnnCell cell) { return cell == RnnCell::Rnn ? 1 : cell == RnnCell::Gru ? 3 : 4; }

struct Data {
  std::vector<float> x, w, r, b, h0, c0, p;
  std::vector<int32_t> lens;
};

Data make_data(const Case& c, uint32_t seed) {
  const int64_t dirs = c.direction == RnnDirection::Bidirectional ? 2 : 1;
  const int64_t gh = gates_of(c.cell) * c.hidden;
  Data d;
  d.x = test_helpers::random_values<float>(c.seq * c.batch * c.input, seed);
  d.w = test_helpers::random_values<float>(dirs * gh * c.input, seed + 1, -0.6, 0.6);
  d.r = test_helpers::random_values<float>(dirs * gh * c.hidden, seed + 2, -0.6, 0.6);
  d.b = test_helpers::random_values<float>(dirs * 2 * gh, seed + 3, -0.5, 0.5);
  d.h0 = test_helpers::random_values<float>(dirs * c.batch * c.hidden, seed + 4);
  d.c0 = test_helpers::random_values<float>(dirs * c.batch * c.hidden, seed + 5);
  d.p = test_helpers::random_values<float>(dirs * 3 * c.hidden, seed + 6);
  for (int64_t b = 0; b < c.batch; ++b) {
    // Full length, shorter ones, and an empty sequence.
    d.lens.push_back(static_cast<int32_t>(c.lens ? std::max<int64_t>(c.seq - 2 * b, 0) : c.seq));
  }
  return d;
}

struct Expected {
  std::vector<double> y, y_h, y_c;
};

// The ONNX equations, one batch entry and one step at a time, in double.
Expected reference(const Case& c, const Data& d) {
  const int64_t dirs = c.direction == RnnDirection::Bidirectional ? 2 : 1;
  const int64_t H = c.hidden, I = c.input, G = gates_of(c.cell), S = c.seq, N = c.batch;
  std::vector<RnnActivation> acts = c.activations;
  if (acts.empty()) {
    if (c.cell == RnnCell::Rnn) acts = {{Kind::Tanh}};
    if (c.cell == RnnCell::Gru) acts = {{Kind::Sigmoid}, {Kind::Tanh}};
    if (c.cell == RnnCell::Lstm) acts = {{Kind::Sigmoid}, {Kind::Tanh}, {Kind::Tanh}};
  }
  const size_t per_dir = c.cell == RnnCell::Rnn ? 1 : c.cell == RnnCell::Gru ? 2 : 3;
  if (acts.size() == per_dir && dirs == 2) {
    auto copy = acts;
    acts.insert(acts.end(), copy.begin(), copy.end());
  }
  auto x_at = [&](int64_t t, int64_t b, int64_t k) {
    return double(d.x[(c.layout == 0 ? t * N + b : b * S + t) * I + k]);
  };
  auto state_at = [&](int64_t dir, int64_t b) {
    return (c.layout == 0 ? dir * N + b : b * dirs + dir) * H;
  };
  auto y_at = [&](int64_t t, int64_t dir, int64_t b) {
    return (c.layout == 0 ? (t * dirs + dir) * N + b : (b * S + t) * dirs + dir) * H;
  };
  Expected e;
  e.y.assign(S * dirs * N * H, 0.0);
  e.y_h.assign(dirs * N * H, 0.0);
  e.y_c.assign(dirs * N * H, 0.0);
  for (int64_t dir = 0; dir < dirs; ++dir) {
    const bool reverse = c.direction == RnnDirection::Reverse || dir == 1;
    auto f = [&](size_t i, double v) {
      return reference_activation(acts[dir * per_dir + i], v, c.clip);
    };
    // Row j of W x_t, R h, and the biases, for gate row j.
    auto wx = [&](int64_t t, int64_t b, int64_t j) {
      double s = 0;
      for (int64_t k = 0; k < I; ++k) s += d.w[(dir * G * H + j) * I + k] * x_at(t, b, k);
      return s + (c.bias ? d.b[dir * 2 * G * H + j] : 0.0);
    };
    auto rh = [&](const std::vector<double>& h, int64_t j) {
      double s = 0;
      for (int64_t k = 0; k < H; ++k) s += d.r[(dir * G * H + j) * H + k] * h[k];
      return s + (c.bias ? d.b[dir * 2 * G * H + G * H + j] : 0.0);
    };
    for (int64_t b = 0; b < N; ++b) {
      std::vector<double> h(H, 0.0), cell(H, 0.0);
      for (int64_t j = 0; j < H; ++j) {
        if (c.initial) h[j] = d.h0[state_at(dir, b) + j];
        if (c.initial) cell[j] = d.c0[state_at(dir, b) + j];
      }
      const int64_t len = d.lens[b];
      for (int64_t s = 0; s < len; ++s) {
        const int64_t t = reverse ? len - 1 - s : s;
        std::vector<double> next(H);
        if (c.cell == RnnCell::Rnn) {
          for (int64_t j = 0; j < H; ++j) next[j] = f(0, wx(t, b, j) + rh(h, j));
        } else if (c.cell == RnnCell::Gru) {
          std::vector<double> z(H), r(H), reset_h(H);
          for (int64_t j = 0; j < H; ++j) {
            z[j] = f(0, wx(t, b, j) + rh(h, j));
            r[j] = f(0, wx(t, b, H + j) + rh(h, H + j));
            reset_h[j] = r[j] * h[j];
          }
          for (int64_t j = 0; j < H; ++j) {
            const double hh = c.linear_before_reset
                                  ? f(1, wx(t, b, 2 * H + j) + r[j] * rh(h, 2 * H + j))
                                  : f(1, wx(t, b, 2 * H + j) + rh(reset_h, 2 * H + j));
            next[j] = (1 - z[j]) * hh + z[j] * h[j];
          }
        } else {
          for (int64_t j = 0; j < H; ++j) {
            const double pi = c.peepholes ? d.p[dir * 3 * H + j] : 0.0;
            const double po = c.peepholes ? d.p[dir * 3 * H + H + j] : 0.0;
            const double pf = c.peepholes ? d.p[dir * 3 * H + 2 * H + j] : 0.0;
            const double i = f(0, wx(t, b, j) + rh(h, j) + pi * cell[j]);
            const double fg = c.input_forget
                                  ? 1 - i
                                  : f(0, wx(t, b, 2 * H + j) + rh(h, 2 * H + j) + pf * cell[j]);
            const double ct = f(1, wx(t, b, 3 * H + j) + rh(h, 3 * H + j));
            cell[j] = fg * cell[j] + i * ct;
            const double o = f(0, wx(t, b, H + j) + rh(h, H + j) + po * cell[j]);
            next[j] = o * f(2, cell[j]);
          }
        }
        h = next;
        for (int64_t j = 0; j < H; ++j) e.y[y_at(t, dir, b) + j] = h[j];
      }
      for (int64_t j = 0; j < H; ++j) {
        e.y_h[state_at(dir, b) + j] = len > 0 ? h[j] : 0.0;
        e.y_c[state_at(dir, b) + j] = len > 0 ? cell[j] : 0.0;
      }
    }
  }
  return e;
}

// Tensors for a case, kept alive together.
struct Built {
  OwnedTensor x, w, r, b, lens, h0, c0, p;
  RnnInputs inputs;
  RnnOptions options;
};

Built build(const Case& c, const Data& d) {
  const int64_t dirs = c.direction == RnnDirection::Bidirectional ? 2 : 1;
  const int64_t gh = gates_of(c.cell) * c.hidden;
  const Shape x_shape =
      c.layout == 0 ? Shape{c.seq, c.batch, c.input} : Shape{c.batch, c.seq, c.input};
  const Shape state =
      c.layout == 0 ? Shape{dirs, c.batch, c.hidden} : Shape{c.batch, dirs, c.hidden};
  Built out{OwnedTensor::of<float>(x_shape, d.x),
            OwnedTensor::of<float>({dirs, gh, c.input}, d.w),
            OwnedTensor::of<float>({dirs, gh, c.hidden}, d.r),
            OwnedTensor::of<float>({dirs, 2 * gh}, d.b),
            OwnedTensor::of<int32_t>({c.batch}, d.lens),
            OwnedTensor::of<float>(state, d.h0),
            OwnedTensor::of<float>(state, d.c0),
            OwnedTensor::of<float>({dirs, 3 * c.hidden}, d.p),
            {},
            {}};
  out.inputs.x = &out.x.tensor();
  out.inputs.w = &out.w.tensor();
  out.inputs.r = &out.r.tensor();
  if (c.bias) out.inputs.b = &out.b.tensor();
  if (c.lens) out.inputs.sequence_lens = &out.lens.tensor();
  if (c.initial) out.inputs.initial_h = &out.h0.tensor();
  if (c.initial && c.cell == RnnCell::Lstm) out.inputs.initial_c = &out.c0.tensor();
  if (c.peepholes) out.inputs.p = &out.p.tensor();
  out.options.cell = c.cell;
  out.options.direction = c.direction;
  out.options.layout = c.layout;
  out.options.clip = c.clip;
  out.options.activations = c.activations;
  out.options.linear_before_reset = c.linear_before_reset;
  out.options.input_forget = c.input_forget;
  return out;
}

void expect_near(const std::vector<float>& actual, const std::vector<double>& expected,
                 double tolerance, const std::string& what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_NEAR(actual[i], expected[i], tolerance) << what << " element " << i;
  }
}

void run_and_compare(const Case& c, uint32_t seed) {
  const Data data = make_data(c, seed);
  Built built = build(c, data);
  auto shapes = rnn_shapes(built.inputs, built.options);
  ASSERT_TRUE(shapes.ok()) << shapes.status().message();
  auto y = OwnedTensor::zeros(ScalarType::Float32, shapes->y);
  auto y_h = OwnedTensor::zeros(ScalarType::Float32, shapes->y_h);
  auto y_c = OwnedTensor::zeros(ScalarType::Float32, shapes->y_h);
  RnnOutputs outputs{&y.tensor(), &y_h.tensor(), c.cell == RnnCell::Lstm ? &y_c.tensor() : nullptr};
  auto status = rnn(built.inputs, built.options, outputs);
  ASSERT_TRUE(status.ok()) << status.message();
  const Expected e = reference(c, data);
  expect_near(y.values<float>(), e.y, 1e-5, "Y");
  expect_near(y_h.values<float>(), e.y_h, 1e-5, "Y_h");
  if (c.cell == RnnCell::Lstm) expect_near(y_c.values<float>(), e.y_c, 1e-5, "Y_c");
}

// ---- Hand-computed -------------------------------------------------------------------------

TEST(Rnn, TwoStepsOfATanhCellByHand) {
  // H = I = 1: h1 = tanh(0.5 * 1 + 0.1 + 0.2), h2 = tanh(0.5 * 2 + 0.25 * h1 + 0.3).
  auto x = OwnedTensor::of<float>({2, 1, 1}, {1, 2});
  auto w = OwnedTensor::of<float>({1, 1, 1}, {0.5f});
  auto r = OwnedTensor::of<float>({1, 1, 1}, {0.25f});
  auto b = OwnedTensor::of<float>({1, 2}, {0.1f, 0.2f});
  auto y = OwnedTensor::zeros(ScalarType::Float32, {2, 1, 1, 1});
  auto y_h = OwnedTensor::zeros(ScalarType::Float32, {1, 1, 1});
  RnnInputs in{&x.tensor(), &w.tensor(), &r.tensor(), &b.tensor()};
  ASSERT_TRUE(rnn(in, RnnOptions{}, RnnOutputs{&y.tensor(), &y_h.tensor()}).ok());
  const double h1 = std::tanh(0.8);
  const double h2 = std::tanh(1.0 + 0.25 * h1 + 0.3);
  EXPECT_NEAR(y.values<float>()[0], h1, 1e-6);
  EXPECT_NEAR(y.values<float>()[1], h2, 1e-6);
  EXPECT_NEAR(y_h.values<float>()[0], h2, 1e-6);
}

TEST(Lstm, OneStepWithUnitWeightsByHand) {
  // All gates see x = 1 with weight 1 and no bias: i = o = f = sigmoid(1), c~ = tanh(1).
  auto x = OwnedTensor::of<float>({1, 1, 1}, {1});
  auto w = OwnedTensor::of<float>({1, 4, 1}, {1, 1, 1, 1});
  auto r = OwnedTensor::of<float>({1, 4, 1}, {0, 0, 0, 0});
  auto c0 = OwnedTensor::of<float>({1, 1, 1}, {2});
  auto y_h = OwnedTensor::zeros(ScalarType::Float32, {1, 1, 1});
  auto y_c = OwnedTensor::zeros(ScalarType::Float32, {1, 1, 1});
  RnnInputs in{&x.tensor(), &w.tensor(), &r.tensor()};
  in.initial_c = &c0.tensor();
  RnnOptions options;
  options.cell = RnnCell::Lstm;
  ASSERT_TRUE(rnn(in, options, RnnOutputs{nullptr, &y_h.tensor(), &y_c.tensor()}).ok());
  const double s = sigmoid(1.0);
  const double cell = s * 2 + s * std::tanh(1.0);
  EXPECT_NEAR(y_c.values<float>()[0], cell, 1e-6);
  EXPECT_NEAR(y_h.values<float>()[0], s * std::tanh(cell), 1e-6);
}

// ---- Against the double-precision reference ------------------------------------------------

using Param = std::tuple<RnnCell, RnnDirection, int64_t, bool>;  // cell, direction, layout, lens

class RnnReferenceTest : public ::testing::TestWithParam<Param> {};

TEST_P(RnnReferenceTest, MatchesTheOnnxEquations) {
  Case c;
  std::tie(c.cell, c.direction, c.layout, c.lens) = GetParam();
  c.peepholes = c.cell == RnnCell::Lstm;
  run_and_compare(c, 7);
}

TEST_P(RnnReferenceTest, MatchesWithoutBiasOrInitialState) {
  Case c;
  std::tie(c.cell, c.direction, c.layout, c.lens) = GetParam();
  c.bias = false;
  c.initial = false;
  run_and_compare(c, 11);
}

std::string param_name(const ::testing::TestParamInfo<Param>& info) {
  const auto [cell, direction, layout, lens] = info.param;
  const char* dirs[] = {"Forward", "Reverse", "Bidirectional"};
  return std::string(rnn_op_name(cell)) + dirs[static_cast<int>(direction)] + "Layout" +
         std::to_string(layout) + (lens ? "WithLens" : "");
}

INSTANTIATE_TEST_SUITE_P(
    AllForms, RnnReferenceTest,
    ::testing::Combine(::testing::Values(RnnCell::Rnn, RnnCell::Gru, RnnCell::Lstm),
                       ::testing::Values(RnnDirection::Forward, RnnDirection::Reverse,
                                         RnnDirection::Bidirectional),
                       ::testing::Values(int64_t{0}, int64_t{1}), ::testing::Bool()),
    param_name);

TEST(Gru, LinearBeforeResetMatchesReference) {
  Case c;
  c.cell = RnnCell::Gru;
  c.linear_before_reset = true;
  c.direction = RnnDirection::Bidirectional;
  c.lens = true;
  run_and_compare(c, 21);
}

TEST(Lstm, InputForgetAndClipMatchReference) {
  Case c;
  c.cell = RnnCell::Lstm;
  c.input_forget = true;
  c.peepholes = true;
  c.clip = 0.3;
  run_and_compare(c, 31);
}

TEST(Rnn, CustomActivationsPerDirectionMatchReference) {
  auto parsed = parse_rnn_activations("LeakyRelu,hardsigmoid", std::vector<double>{0.3, 0.4},
                                      std::vector<double>{0.6});
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  ASSERT_EQ(parsed->size(), 2u);
  EXPECT_EQ((*parsed)[0].kind, Kind::LeakyRelu);
  EXPECT_DOUBLE_EQ((*parsed)[0].alpha, 0.3);
  EXPECT_EQ((*parsed)[1].kind, Kind::HardSigmoid);
  EXPECT_DOUBLE_EQ((*parsed)[1].alpha, 0.4);
  EXPECT_DOUBLE_EQ((*parsed)[1].beta, 0.6);
  Case c;
  c.direction = RnnDirection::Bidirectional;
  c.activations = *parsed;
  run_and_compare(c, 41);
}

TEST(Gru, EveryActivationKindMatchesReference) {
  const std::vector<Kind> kinds = {Kind::Relu,       Kind::Tanh,        Kind::Sigmoid,
                                   Kind::Affine,     Kind::LeakyRelu,   Kind::ThresholdedRelu,
                                   Kind::ScaledTanh, Kind::HardSigmoid, Kind::Elu,
                                   Kind::Softsign,   Kind::Softplus};
  for (Kind kind : kinds) {
    Case c;
    c.cell = RnnCell::Gru;
    c.activations = {{Kind::Sigmoid}, {kind, 0.7, 0.2}};
    SCOPED_TRACE(static_cast<int>(kind));
    run_and_compare(c, 51);
  }
}

TEST(Rnn, HalfPrecisionStaysCloseToFloat) {
  Case c;
  c.cell = RnnCell::Gru;
  const Data data = make_data(c, 61);
  Built built = build(c, data);
  auto to_half = [](const OwnedTensor& t) {
    const auto values = t.values<float>();
    return OwnedTensor::half_of(
        ScalarType::Float16, Shape(t.tensor().sizes().begin(), t.tensor().sizes().end()), values);
  };
  auto x = to_half(built.x), w = to_half(built.w), r = to_half(built.r), b = to_half(built.b),
       h0 = to_half(built.h0);
  RnnInputs in{&x.tensor(), &w.tensor(), &r.tensor(), &b.tensor(), nullptr, &h0.tensor()};
  auto y_h = OwnedTensor::zeros(ScalarType::Float16, {1, c.batch, c.hidden});
  ASSERT_TRUE(rnn(in, built.options, RnnOutputs{nullptr, &y_h.tensor()}).ok());
  const Expected e = reference(c, data);
  expect_near(y_h.half_values(), e.y_h, 2e-2, "Y_h f16");
}

// ---- Adapter -------------------------------------------------------------------------------

TEST(RnnKernel, RunsLstmWithCommaJoinedActivationsAndOnlyYh) {
  Case c;
  c.cell = RnnCell::Lstm;
  c.activations = {{Kind::Sigmoid}, {Kind::Tanh}, {Kind::Relu}};
  c.initial = false;
  const Data data = make_data(c, 71);
  Built built = build(c, data);
  EValue x(built.x.tensor()), w(built.w.tensor()), r(built.r.tensor()), b(built.b.tensor());
  EValue none;
  auto y_h = OwnedTensor::resizable(ScalarType::Float32, 3);
  EValue y_h_value(y_h.tensor());
  auto status = test_helpers::run_kernel(
      "LSTM", {&x, &w, &r, &b}, {&none, &y_h_value},
      test_helpers::attrs({{"hidden_size", int64_t{3}}, {"activations", "Sigmoid,Tanh,Relu"}}));
  ASSERT_TRUE(status.ok()) << status.message();
  EXPECT_EQ(test_helpers::sizes_of(y_h_value), (Shape{1, 3, 3}));
  const Expected e = reference(c, data);
  std::vector<float> got(y_h_value.to_tensor().data_ptr<float>(),
                         y_h_value.to_tensor().data_ptr<float>() + 9);
  expect_near(got, e.y_h, 1e-5, "Y_h");
}

TEST(RnnKernel, RejectsAnUnknownDirectionBeforeResizing) {
  Case c;
  const Data data = make_data(c, 81);
  Built built = build(c, data);
  EValue x(built.x.tensor()), w(built.w.tensor()), r(built.r.tensor());
  auto y = OwnedTensor::resizable(ScalarType::Float32, 4);
  EValue y_value(y.tensor());
  auto status = test_helpers::run_kernel("RNN", {&x, &w, &r}, {&y_value},
                                         test_helpers::attrs({{"direction", "sideways"}}));
  EXPECT_EQ(status.code(), Error::InvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("run kernel 'RNN': attribute 'direction' is 'sideways'"));
  EXPECT_EQ(test_helpers::sizes_of(y_value), (Shape{0, 0, 0, 0}));
}

// ---- Errors --------------------------------------------------------------------------------

TEST(RnnErrors, WrongWeightShapeNamesTheInput) {
  Case c;
  const Data data = make_data(c, 91);
  Built built = build(c, data);
  built.options.cell = RnnCell::Gru;  // W holds 1 gate, GRU needs 3
  auto shapes = rnn_shapes(built.inputs, built.options);
  ASSERT_FALSE(shapes.ok());
  EXPECT_EQ(shapes.status().code(), Error::InvalidArgument);
  EXPECT_THAT(shapes.status().message(),
              HasSubstr("run kernel 'GRU': input 1 (W) has shape [1, 3, 5] (expected [1, 9, 5])"));
}

TEST(RnnErrors, WrongActivationCountUnknownNameBadLayoutAndBadLengths) {
  Case c;
  const Data data = make_data(c, 101);
  Built built = build(c, data);
  RnnOptions options = built.options;
  options.activations = {{Kind::Tanh}, {Kind::Tanh}, {Kind::Tanh}};
  auto status = rnn_shapes(built.inputs, options).status();
  EXPECT_EQ(status.code(), Error::InvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("attribute 'activations' lists 3 functions (expected 1"));

  auto parsed = parse_rnn_activations("Tanh,Swish", {}, {});
  EXPECT_EQ(parsed.status().code(), Error::InvalidArgument);
  EXPECT_THAT(parsed.status().message(), HasSubstr("names 'Swish'"));

  options = built.options;
  options.layout = 2;
  EXPECT_THAT(rnn_shapes(built.inputs, options).status().message(),
              HasSubstr("attribute 'layout' is 2 (expected 0 or 1)"));

  auto lens = OwnedTensor::of<int32_t>({3}, {4, 5, 0});
  RnnInputs in = built.inputs;
  in.sequence_lens = &lens.tensor();
  auto y_h = OwnedTensor::zeros(ScalarType::Float32, {1, 3, 3});
  status = rnn(in, built.options, RnnOutputs{nullptr, &y_h.tensor()});
  EXPECT_EQ(status.code(), Error::InvalidArgument);
  EXPECT_THAT(status.message(),
              HasSubstr("input 4 (sequence_lens) has 5 at index 1 (expected 0..4)"));
}

TEST(RnnErrors, WrongOutputShapeAndDtype) {
  Case c;
  const Data data = make_data(c, 111);
  Built built = build(c, data);
  auto y_h = OwnedTensor::zeros(ScalarType::Float32, {1, 3, 4});
  auto status = rnn(built.inputs, built.options, RnnOutputs{nullptr, &y_h.tensor()});
  EXPECT_EQ(status.code(), Error::InvalidArgument);
  EXPECT_THAT(status.message(),
              HasSubstr("output 1 (Y_h) has shape [1, 3, 4] (expected [1, 3, 3])"));
  auto y = OwnedTensor::zeros(ScalarType::Float64, {4, 1, 3, 3});
  status = rnn(built.inputs, built.options, RnnOutputs{&y.tensor()});
  EXPECT_EQ(status.code(), Error::InvalidType);
  EXPECT_THAT(status.message(), HasSubstr("output 0 (Y) has dtype f64"));
}

}  // namespace
}  // namespace kiln::kernels
