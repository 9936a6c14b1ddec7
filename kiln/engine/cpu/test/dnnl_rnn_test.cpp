// LSTM and GRU (on oneDNN; LSTM of small batches on kiln's own cell) against the reference
// kernel (kiln/kernels rnn) on seeded random data, over cells, directions, layouts, initial
// states, biases and sizes; and the requests the implementations decline.

#include <kiln/engine/cpu/cpu_op.h>
#include <kiln/kernels/kernels.h>
#include <kiln/kernels/test/tensor_helpers.h>

#include <gtest/gtest.h>

#include <cmath>
#include <optional>
#include <string>
#include <vector>

namespace kiln::engine::cpu {
namespace {

using kernels::RnnCell;
using kernels::RnnDirection;
using kernels::test_helpers::OwnedTensor;
using kernels::test_helpers::random_values;
using runtime::Error;
using runtime::ScalarType;
using runtime::Tensor;

OwnedTensor random_tensor(std::vector<int64_t> sizes, uint32_t seed) {
  int64_t numel = kernels::test_helpers::numel_of(sizes);
  return OwnedTensor::of(std::move(sizes),
                         random_values<float>(static_cast<size_t>(numel), seed, -1.0, 1.0));
}

void expect_near(const OwnedTensor& actual, const OwnedTensor& expected, const std::string& what) {
  std::vector<float> a = actual.values<float>(), e = expected.values<float>();
  ASSERT_EQ(a.size(), e.size()) << what;
  int failures = 0;
  for (size_t i = 0; i < a.size() && failures < 5; ++i) {
    double tolerance = 1e-5 + 1e-4 * std::fabs(e[i]);
    if (!(std::fabs(a[i] - e[i]) <= tolerance)) {
      ADD_FAILURE() << what << " element " << i << ": " << a[i] << " (expected " << e[i] << ")";
      ++failures;
    }
  }
}

/// How an optional input is given.
enum class Given { Absent, Constant, AtRunTime };

struct RnnParams {
  RnnCell cell = RnnCell::Lstm;
  bool linear_before_reset = false;
  RnnDirection direction = RnnDirection::Forward;
  int64_t layout = 0;
  int64_t seq = 1, batch = 1, input = 4, hidden = 3;
  Given bias = Given::Absent;
  Given initial = Given::Absent;  ///< initial_h, and initial_c for LSTM.
  int num_outputs = 1;
  int num_threads = 1;
  float x_scale = 1.0f;  ///< X's values are drawn from [-x_scale, x_scale].
};

std::string name_of(const RnnParams& p) {
  const char* dirs[] = {"forward", "reverse", "bidirectional"};
  const char* given[] = {"none", "const", "run"};
  std::string cell = p.cell == RnnCell::Lstm ? "LSTM" : p.linear_before_reset ? "GRUlbr" : "GRU";
  return cell + " " + dirs[static_cast<int>(p.direction)] + " layout" + std::to_string(p.layout) +
         " T" + std::to_string(p.seq) + " N" + std::to_string(p.batch) + " I" +
         std::to_string(p.input) + " H" + std::to_string(p.hidden) +
         " bias:" + given[static_cast<int>(p.bias)] +
         " init:" + given[static_cast<int>(p.initial)] +
         " outputs:" + std::to_string(p.num_outputs) + " threads:" + std::to_string(p.num_threads);
}

/// The operands of one layer, seeded from `seed`.
struct Layer {
  RnnParams p;
  int64_t dirs = 1, gates = 4;
  std::vector<OwnedTensor> inputs;  ///< X, W, R, B, sequence_lens (placeholder), h0, c0.
  std::vector<bool> present, constant;

  Layer(const RnnParams& params, uint32_t seed) : p(params) {
    dirs = p.direction == RnnDirection::Bidirectional ? 2 : 1;
    gates = p.cell == RnnCell::Lstm ? 4 : 3;
    std::vector<int64_t> x = p.layout == 0 ? std::vector<int64_t>{p.seq, p.batch, p.input}
                                           : std::vector<int64_t>{p.batch, p.seq, p.input};
    std::vector<int64_t> state = p.layout == 0 ? std::vector<int64_t>{dirs, p.batch, p.hidden}
                                               : std::vector<int64_t>{p.batch, dirs, p.hidden};
    add(random_tensor(x, seed), true, false);
    float* values = inputs.back().tensor().mutable_data_ptr<float>();
    for (int64_t i = 0; i < inputs.back().tensor().numel(); ++i) values[i] *= p.x_scale;
    add(random_tensor({dirs, gates * p.hidden, p.input}, seed + 1), true, true);
    add(random_tensor({dirs, gates * p.hidden, p.hidden}, seed + 2), true, true);
    add(random_tensor({dirs, 2 * gates * p.hidden}, seed + 3), p.bias != Given::Absent,
        p.bias == Given::Constant);
    add(OwnedTensor::zeros(ScalarType::Int64, {p.batch}), false, false);
    add(random_tensor(state, seed + 4), p.initial != Given::Absent, p.initial == Given::Constant);
    if (p.cell == RnnCell::Lstm) {
      add(random_tensor(state, seed + 5), p.initial != Given::Absent, p.initial == Given::Constant);
    }
  }
  void add(OwnedTensor t, bool is_present, bool is_constant) {
    inputs.push_back(std::move(t));
    present.push_back(is_present);
    constant.push_back(is_constant);
  }

  OpDesc desc() const {
    OpDesc d;
    d.op = p.cell == RnnCell::Lstm ? "LSTM" : "GRU";
    const char* dirs_names[] = {"forward", "reverse", "bidirectional"};
    d.attributes = {{"direction", std::string(dirs_names[static_cast<int>(p.direction)])},
                    {"hidden_size", p.hidden},
                    {"layout", p.layout}};
    if (p.cell == RnnCell::Gru) {
      d.attributes.push_back({"linear_before_reset", int64_t{p.linear_before_reset ? 1 : 0}});
    }
    for (size_t i = 0; i < inputs.size(); ++i) {
      const Tensor& t = inputs[i].tensor();
      d.inputs.push_back(
          TensorDesc{t.dtype(), std::vector<int64_t>(t.sizes().begin(), t.sizes().end())});
      d.inputs_present.push_back(present[i]);
      d.constants.push_back(present[i] && constant[i] ? &t : nullptr);
    }
    d.num_outputs = p.num_outputs;
    d.num_threads = p.num_threads;
    return d;
  }

  /// The reference kernel's outputs Y, Y_h (, Y_c).
  std::vector<OwnedTensor> reference() const {
    kernels::RnnInputs in;
    const Tensor** slots[] = {&in.x,         &in.w,        &in.r, &in.b, &in.sequence_lens,
                              &in.initial_h, &in.initial_c};
    for (size_t i = 0; i < inputs.size(); ++i)
      *slots[i] = present[i] ? &inputs[i].tensor() : nullptr;
    kernels::RnnOptions options;
    options.cell = p.cell;
    options.direction = p.direction;
    options.linear_before_reset = p.linear_before_reset;
    options.layout = p.layout;
    auto shapes = kernels::rnn_shapes(in, options);
    EXPECT_TRUE(shapes.ok()) << shapes.status();
    std::vector<OwnedTensor> out;
    out.push_back(OwnedTensor::zeros(ScalarType::Float32, shapes->y));
    out.push_back(OwnedTensor::zeros(ScalarType::Float32, shapes->y_h));
    out.push_back(OwnedTensor::zeros(ScalarType::Float32, shapes->y_h));
    kernels::RnnOutputs targets{&out[0].tensor(), &out[1].tensor(),
                                p.cell == RnnCell::Lstm ? &out[2].tensor() : nullptr};
    runtime::Status status = kernels::rnn(in, options, targets);
    EXPECT_TRUE(status.ok()) << status;
    return out;
  }
};

/// Creates `layer`'s op (with `packed` as its weight store, when given) and checks it against
/// the reference kernel; returns the op's description.
std::string check_matches_reference(const RnnParams& p, uint32_t seed,
                                    PackedConstants* packed = nullptr) {
  SCOPED_TRACE(name_of(p));
  Layer layer(p, seed);
  OpDesc desc = layer.desc();
  if (packed != nullptr) {
    desc.packed = packed;
    // Content hashes as a model gives them: the op must key what it packs by them.
    desc.constant_hashes.assign(desc.inputs.size(), 0);
    for (size_t i = 0; i < desc.inputs.size(); ++i) {
      if (desc.constants[i] != nullptr) desc.constant_hashes[i] = 0x1234 + seed * 16 + i;
    }
  }
  auto op = CpuOp::create(desc);
  EXPECT_TRUE(op.ok()) << op.status();
  if (!op.ok()) return std::string();
  const auto& types = (*op)->outputs();
  EXPECT_EQ(types.size(), static_cast<size_t>(p.num_outputs));
  if (types.size() != static_cast<size_t>(p.num_outputs)) return std::string();
  std::vector<OwnedTensor> expected = layer.reference();
  std::vector<OwnedTensor> actual;
  for (const TensorDesc& t : types)
    actual.push_back(OwnedTensor::zeros(ScalarType::Float32, t.sizes));
  std::vector<Tensor*> outs;
  for (OwnedTensor& t : actual) outs.push_back(&t.tensor());
  std::vector<const Tensor*> ins;
  for (size_t i = 0; i < layer.inputs.size(); ++i) {
    // Constant and absent inputs: the run must not read them.
    ins.push_back(layer.present[i] && !layer.constant[i] ? &layer.inputs[i].tensor() : nullptr);
  }
  // Twice: the second run reuses every buffer of the first.
  for (int run = 0; run < 2; ++run) {
    runtime::Status status = (*op)->run(ins, outs);
    EXPECT_TRUE(status.ok()) << status;
  }
  const char* names[] = {"Y", "Y_h", "Y_c"};
  for (size_t i = 0; i < actual.size(); ++i) expect_near(actual[i], expected[i], names[i]);
  return (*op)->describe();
}

struct CellKind {
  RnnCell cell;
  bool linear_before_reset;
};
constexpr CellKind kCells[] = {{RnnCell::Lstm, false}, {RnnCell::Gru, false}, {RnnCell::Gru, true}};

TEST(DnnlRnn, MatchesReferenceOverCellsDirectionsAndLayouts) {
  uint32_t seed = 10;
  for (CellKind c : kCells) {
    for (RnnDirection dir :
         {RnnDirection::Forward, RnnDirection::Reverse, RnnDirection::Bidirectional}) {
      for (int64_t layout : {0, 1}) {
        RnnParams p;
        p.cell = c.cell;
        p.linear_before_reset = c.linear_before_reset;
        p.direction = dir;
        p.layout = layout;
        p.seq = 5;
        p.batch = 3;
        p.input = 7;
        p.hidden = 6;
        p.bias = Given::Constant;
        p.initial = Given::AtRunTime;
        p.num_outputs = c.cell == RnnCell::Lstm ? 3 : 2;
        check_matches_reference(p, seed += 10);
      }
    }
  }
}

TEST(DnnlRnn, MatchesReferenceOverStatesBiasesSizesAndOutputs) {
  struct Shape {
    int64_t seq, batch, input, hidden;
  };
  const Shape shapes[] = {{1, 1, 4, 3}, {6, 1, 5, 16}, {1, 4, 8, 8}, {4, 2, 3, 20}};
  uint32_t seed = 500;
  for (CellKind c : kCells) {
    for (const Shape& s : shapes) {
      for (Given bias : {Given::Absent, Given::Constant, Given::AtRunTime}) {
        for (Given initial : {Given::Absent, Given::Constant, Given::AtRunTime}) {
          RnnParams p;
          p.cell = c.cell;
          p.linear_before_reset = c.linear_before_reset;
          p.direction = seed % 2 == 0 ? RnnDirection::Bidirectional : RnnDirection::Reverse;
          p.seq = s.seq;
          p.batch = s.batch;
          p.input = s.input;
          p.hidden = s.hidden;
          p.bias = bias;
          p.initial = initial;
          const int max_outputs = c.cell == RnnCell::Lstm ? 3 : 2;
          p.num_outputs = 1 + static_cast<int>(seed % static_cast<uint32_t>(max_outputs));
          check_matches_reference(p, seed += 7);
        }
      }
    }
  }
}

// A bidirectional LSTM over 7 steps of a batch of 2 (kiln's small-batch cell where the CPU
// runs kiln's vector loops), bias constant, initial states at run time, all three outputs.
RnnParams small_batch_lstm(int64_t hidden) {
  RnnParams p;
  p.direction = RnnDirection::Bidirectional;
  p.seq = 7;
  p.batch = 2;
  p.input = 9;
  p.hidden = hidden;
  p.bias = Given::Constant;
  p.initial = Given::AtRunTime;
  p.num_outputs = 3;
  return p;
}

// Gates far in the tails (X up to +-40: pre-activations of hundreds, past where exp is clamped)
// and hidden sizes that fill whole vectors, whole blocks of them, and neither.
TEST(DnnlRnn, LstmOfSmallBatchesMatchesReferenceInSaturation) {
  uint32_t seed = 4000;
  for (int64_t hidden : {5, 16, 20, 64}) {
    for (float scale : {1.0f, 40.0f}) {
      RnnParams p = small_batch_lstm(hidden);
      p.x_scale = scale;
      std::string described = check_matches_reference(p, seed += 10);
      EXPECT_NE(described.find("kiln LSTM cell"), std::string::npos) << described;
    }
  }
}

// An input projection past the small loops' work (14 rows x 96 inputs x 512 gates) runs on
// kiln's AVX-512 tiles where the CPU has them (no code generated), biased, in both layouts.
TEST(DnnlRnn, LstmOfSmallBatchesProjectsOnKilnsTilesPastTheSmallLoops) {
  uint32_t seed = 4300;
  for (int64_t layout : {0, 1}) {
    for (Given bias : {Given::Constant, Given::AtRunTime, Given::Absent}) {
      RnnParams p = small_batch_lstm(64);
      p.input = 96;
      p.layout = layout;
      p.bias = bias;
      std::string described = check_matches_reference(p, seed += 10);
      EXPECT_NE(described.find("kiln LSTM cell"), std::string::npos) << described;
      if (avx512_own_runtime_gemm()) {
        EXPECT_NE(described.find("kiln AVX-512 MatMul input projection"), std::string::npos)
            << described;
      }
    }
  }
}

// Without kiln's vector loops (a CPU without AVX-512: own_vector_loops), a small batch runs on
// oneDNN's LSTM, with the reference's results.
TEST(DnnlRnn, LstmOfSmallBatchesRunsOnOneDnnWithoutTheVectorLoops) {
  set_avx512_for_testing(false);
  std::string described = check_matches_reference(small_batch_lstm(16), 4500);
  set_avx512_for_testing(true);  // the binary's choice (own_loops_on.cpp)
  EXPECT_EQ(described.find("kiln LSTM cell"), std::string::npos) << described;
}

// Small batches on more than one thread: a bidirectional layer runs its directions side by
// side (LSTM: kiln's cell, in either layout; GRU: one oneDNN op per direction, sharing the
// weight store under keys of their own, in layout 0); anything else runs on one thread.
TEST(DnnlRnn, TwoThreadsMatchReferenceWithDirectionsSideBySide) {
  uint32_t seed = 2000;
  for (CellKind c : kCells) {
    for (int64_t layout : {0, 1}) {
      for (int64_t batch : {1, 2, 3}) {
        for (Given given : {Given::Absent, Given::Constant, Given::AtRunTime}) {
          for (RnnDirection dir : {RnnDirection::Bidirectional, RnnDirection::Reverse}) {
            RnnParams p;
            p.cell = c.cell;
            p.linear_before_reset = c.linear_before_reset;
            p.direction = dir;
            p.layout = layout;
            p.seq = 5;
            p.batch = batch;
            p.input = 7;
            p.hidden = 6;
            p.bias = given;
            p.initial = given == Given::Absent ? Given::AtRunTime : given;
            p.num_outputs = c.cell == RnnCell::Lstm ? 3 : 2;
            p.num_threads = 2;
            PackedConstants packed;
            std::string described = check_matches_reference(p, seed += 10, &packed);
            // LSTM of a small batch: kiln's cell, any layout; GRU: oneDNN's, layout 0 only.
            const bool lstm = c.cell == RnnCell::Lstm && batch <= 2;
            const bool apart =
                dir == RnnDirection::Bidirectional && batch <= 2 && (layout == 0 || lstm);
            EXPECT_EQ(described.find("side by side") != std::string::npos, apart)
                << name_of(p) << ": " << described;
            EXPECT_EQ(described.find("kiln LSTM cell") != std::string::npos, lstm)
                << name_of(p) << ": " << described;
          }
        }
      }
    }
  }
}

TEST(DnnlRnn, RunThreadsSayWhetherARunSplitsItsWork) {
  struct Case {
    CellKind cell;
    RnnDirection direction;
    int64_t batch;
    int threads;
    int expected;
  };
  const CellKind lstm{RnnCell::Lstm, false}, gru{RnnCell::Gru, false};
  const Case cases[] = {
      {lstm, RnnDirection::Forward, 1, 2, 1},        // kiln's cell, one direction
      {lstm, RnnDirection::Bidirectional, 1, 2, 2},  // its directions side by side
      {lstm, RnnDirection::Bidirectional, 1, 1, 1},
      {gru, RnnDirection::Forward, 1, 2, 1},  // a small batch: one thread
      {gru, RnnDirection::Bidirectional, 2, 2, 2},
      {gru, RnnDirection::Forward, 64, 2, 2},  // a large batch: the threads asked
  };
  uint32_t seed = 2500;
  for (const Case& c : cases) {
    RnnParams p;
    p.cell = c.cell.cell;
    p.direction = c.direction;
    p.seq = 4;
    p.batch = c.batch;
    p.input = 16;
    p.hidden = 32;
    p.num_outputs = 2;
    p.num_threads = c.threads;
    Layer layer(p, seed += 10);
    auto op = CpuOp::create(layer.desc());
    ASSERT_TRUE(op.ok()) << name_of(p) << ": " << op.status().message();
    EXPECT_EQ((*op)->run_threads(), c.expected) << name_of(p) << ": " << (*op)->describe();
  }
}

TEST(DnnlRnn, TwoThreadsWithFewerOutputsMatchReference) {
  uint32_t seed = 3000;
  for (CellKind c : kCells) {
    const int max_outputs = c.cell == RnnCell::Lstm ? 3 : 2;
    for (int num_outputs = 1; num_outputs <= max_outputs; ++num_outputs) {
      RnnParams p;
      p.cell = c.cell;
      p.linear_before_reset = c.linear_before_reset;
      p.direction = RnnDirection::Bidirectional;
      p.seq = 4;
      p.input = 5;
      p.hidden = 16;
      p.bias = Given::AtRunTime;
      p.num_outputs = num_outputs;
      p.num_threads = 2;
      check_matches_reference(p, seed += 10);
    }
  }
}

TEST(DnnlRnn, LstmWithOneInitialStateMatchesReference) {
  for (size_t given : {5u, 6u}) {
    for (int num_outputs : {2, 3}) {
      for (int threads : {1, 2}) {
        SCOPED_TRACE("initial state input " + std::to_string(given) + ", " +
                     std::to_string(num_outputs) + " outputs, " + std::to_string(threads) +
                     " threads");
        RnnParams p;
        p.seq = 3;
        p.batch = 2;
        p.num_outputs = num_outputs;
        p.num_threads = threads;
        p.direction = threads == 2 ? RnnDirection::Bidirectional : RnnDirection::Forward;
        Layer layer(p, 900);
        layer.present[given] = true;
        auto op = CpuOp::create(layer.desc());
        ASSERT_TRUE(op.ok()) << op.status();
        std::vector<OwnedTensor> expected = layer.reference();
        std::vector<OwnedTensor> actual;
        for (const TensorDesc& t : (*op)->outputs()) {
          actual.push_back(OwnedTensor::zeros(ScalarType::Float32, t.sizes));
        }
        std::vector<Tensor*> outs;
        for (OwnedTensor& t : actual) outs.push_back(&t.tensor());
        std::vector<const Tensor*> ins(layer.inputs.size(), nullptr);
        ins[0] = &layer.inputs[0].tensor();
        ins[given] = &layer.inputs[given].tensor();
        ASSERT_TRUE((*op)->run(ins, outs).ok());
        for (size_t i = 0; i < actual.size(); ++i) {
          expect_near(actual[i], expected[i], "output " + std::to_string(i));
        }
      }
    }
  }
}

/// Expects `desc` to be declined with `code` and a message containing `culprit`.
void expect_declined(const OpDesc& desc, Error code, const std::string& culprit) {
  auto op = CpuOp::create(desc);
  ASSERT_FALSE(op.ok()) << culprit;
  EXPECT_EQ(op.error(), code) << op.status();
  EXPECT_NE(op.status().message().find(culprit), std::string::npos) << op.status();
}

TEST(DnnlRnn, DeclinesWhatOneDnnDoesNotCompute) {
  RnnParams p;
  p.seq = 2;
  Layer layer(p, 1000);
  {
    OpDesc d = layer.desc();
    d.inputs_present[4] = true;
    expect_declined(d, Error::NotSupported, "sequence_lens");
  }
  {
    OpDesc d = layer.desc();
    d.inputs.push_back(TensorDesc{ScalarType::Float32, {1, 3 * p.hidden}});
    d.inputs_present.push_back(true);
    d.constants.push_back(nullptr);
    expect_declined(d, Error::NotSupported, "input 7 (P)");
  }
  for (auto attribute : {ir::Attribute{"clip", 1.0}, ir::Attribute{"input_forget", int64_t{1}},
                         ir::Attribute{"activation_alpha", std::vector<double>{0.5}},
                         ir::Attribute{"activation_beta", std::vector<double>{0.5}}}) {
    OpDesc d = layer.desc();
    d.attributes.push_back(attribute);
    expect_declined(d, Error::NotSupported, "'" + attribute.name + "'");
  }
  {
    OpDesc d = layer.desc();
    d.attributes.push_back({"activations", std::vector<std::string>{"Sigmoid", "Relu", "Tanh"}});
    expect_declined(d, Error::NotSupported, "'Relu'");
  }
  {
    OpDesc d = layer.desc();
    d.attributes.push_back({"activations", std::vector<std::string>{"sigmoid", "TANH", "Tanh"}});
    EXPECT_TRUE(CpuOp::create(d).ok()) << "the default functions, spelled in any case";
  }
  for (size_t input : {1u, 2u}) {
    OpDesc d = layer.desc();
    d.constants[input] = nullptr;
    expect_declined(d, Error::NotSupported,
                    input == 1 ? "(W) is not constant" : "(R) is not constant");
  }
  {
    OpDesc d = layer.desc();
    d.num_outputs = 4;
    expect_declined(d, Error::NotSupported, "4 outputs");
  }
  {
    OpDesc d = layer.desc();
    d.attributes.push_back({"hidden_size", int64_t{5}});
    d.attributes.erase(d.attributes.begin() + 1);
    expect_declined(d, Error::InvalidArgument, "'hidden_size' is 5");
  }
  {
    OpDesc d = layer.desc();
    d.inputs[0].sizes = {p.seq, p.batch, p.input + 1};
    expect_declined(d, Error::InvalidArgument, "input 1 (W) has shape");
  }
}

}  // namespace
}  // namespace kiln::engine::cpu
