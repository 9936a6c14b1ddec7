// specialize_generic(): one shape-generic plan runs every input shape, matching the reference
// interpreter and the plan specialized for each shape; its MatMuls run on oneDNN; it checks the
// shapes of each call against the input types.
#include <kiln/engine/compile/step_profile.h>
#include <kiln/engine/compile/test/test_models.h>
#include <kiln/engine/cpu/cpu_op.h>

#include <gmock/gmock.h>

#include <map>

namespace kiln::engine {
namespace {

using namespace test_models;  // NOLINT(google-build-using-namespace): test helpers
using ::testing::HasSubstr;

/// x [1, seq, 16] → MatMul(W1) → Add(b1) → Relu → MatMul(W2) = y [1, seq, 16];
/// scores = MatMul(y, Transpose(y)) [1, seq, seq] → Softmax → MatMul(·, y) = out [1, seq, 16].
/// Two MatMuls by constant weights (one with a bias and Relu to fuse), two of computed values.
ir::Model attention_like_model() {
  ModelBuilder b(21);
  ir::Dim seq = ir::Dim::symbol("seq");
  int x = b.input("x", {1, seq, 16});
  int w1 = b.weight("w1", {16, 32});
  int b1 = b.weight("b1", {32});
  int w2 = b.weight("w2", {32, 16});
  int h0 = b.value("h0", {1, seq, 32});
  int h1 = b.value("h1", {1, seq, 32});
  int h = b.value("h", {1, seq, 32});
  int y = b.value("y", {1, seq, 16});
  int yt = b.value("yt", {1, 16, seq});
  int scores = b.value("scores", {1, seq, seq});
  int probs = b.value("probs", {1, seq, seq});
  int out = b.value("out", {1, seq, 16});
  b.node("MatMul", {x, w1}, {h0});
  b.node("Add", {h0, b1}, {h1});
  b.node("Relu", {h1}, {h});
  b.node("MatMul", {h, w2}, {y});
  b.node("Transpose", {y}, {yt}, {ints("perm", {0, 2, 1})});
  b.node("MatMul", {y, yt}, {scores});
  b.node("Softmax", {scores}, {probs}, {int_attr("axis", -1)});
  b.node("MatMul", {probs, y}, {out});
  b.output(out);
  return b.build();
}

std::vector<Buffer> run_generic(compile::CompiledFunction& f, const std::vector<int64_t>& sizes,
                                uint32_t seed, std::vector<Buffer>* inputs_out = nullptr) {
  std::vector<Buffer> inputs;
  inputs.push_back(random_input(ScalarType::Float32, sizes, seed));
  std::vector<Buffer> outputs = output_buffers(f);
  Status status = run(f, inputs, outputs);
  EXPECT_TRUE(status.ok()) << status.to_string();
  if (inputs_out != nullptr) *inputs_out = std::move(inputs);
  return outputs;
}

TEST(GenericPlan, OnePlanRunsEveryShapeLikeTheReference) {
  ir::Model model = attention_like_model();
  auto compiled = compile::specialize_generic(model, "main", cpu_only());
  ASSERT_TRUE(compiled.ok()) << compiled.status().to_string();
  compile::CompiledFunction& f = **compiled;
  EXPECT_TRUE(f.is_generic());
  EXPECT_FALSE(f.is_static());
  EXPECT_TRUE(f.input_sizes(0).empty());

  // Every MatMul on a run-time-shape op: kiln's loops (AVX2 or AVX-512) or oneDNN's, as the
  // CPU decides, and labelled by whose they are.
  int matmuls = 0;
  for (const auto& entry : f.placement()) {
    if (entry.op != "MatMul") continue;
    ++matmuls;
    EXPECT_EQ(entry.device, entry.detail.rfind("kiln", 0) == 0 ? "cpu:kiln" : "cpu:onednn")
        << entry.detail;
  }
  EXPECT_EQ(matmuls, 4);
  ASSERT_FALSE(f.placement().empty());
  EXPECT_EQ(f.placement()[0].op, "MatMul");
  EXPECT_THAT(f.placement()[0].fused, ::testing::ElementsAre("Add_1 (Add)", "Relu_2 (Relu)"));
  EXPECT_THAT(f.placement()[0].detail, HasSubstr("run-time rows"));

  uint32_t seed = 1;
  for (int64_t seq : {5, 1, 17, 3, 17}) {
    SCOPED_TRACE("seq " + std::to_string(seq));
    std::vector<Buffer> inputs;
    std::vector<Buffer> outputs = run_generic(f, {1, seq, 16}, seed++, &inputs);
    std::vector<Buffer> expected = interpret(model, {&inputs[0].tensor});
    expect_close(outputs[0].tensor, expected[0].tensor);

    // The same as the plan specialized for this shape.
    auto specialized = compile::specialize(model, "main", {{1, seq, 16}}, cpu_only());
    ASSERT_TRUE(specialized.ok()) << specialized.status().to_string();
    std::vector<Buffer> static_outputs = output_buffers(**specialized);
    ASSERT_TRUE(run(**specialized, inputs, static_outputs).ok());
    expect_close(outputs[0].tensor, static_outputs[0].tensor);
  }
}

TEST(GenericPlan, ProfileCountsTheWorkOfEachCallsShape) {
  ir::Model model = attention_like_model();
  auto compiled = compile::specialize_generic(model, "main", cpu_only());
  ASSERT_TRUE(compiled.ok()) << compiled.status().to_string();
  profiling::reset();
  profiling::set_enabled(true);
  run_generic(**compiled, {1, 5, 16}, 1);
  run_generic(**compiled, {1, 17, 16}, 2);
  profiling::set_enabled(false);
  // Per call of seq s: the weight MatMuls 2 x s x 16 x 32 each, the attention ones
  // 2 x s x 16 x s each; summed over s = 5 and 17.
  std::map<std::string, double> flops;
  for (const auto& t : profiling::step_times()) {
    EXPECT_EQ(t.calls, 2u) << t.node;
    flops[t.node] = t.total_flops;
  }
  profiling::reset();
  const double weights = 2.0 * (5 + 17) * 16 * 32;
  const double attention = 2.0 * (5 * 5 + 17 * 17) * 16;
  EXPECT_DOUBLE_EQ(flops["MatMul_0"], weights);
  EXPECT_DOUBLE_EQ(flops["MatMul_3"], weights);
  EXPECT_DOUBLE_EQ(flops["MatMul_5"], attention);
  EXPECT_DOUBLE_EQ(flops["MatMul_7"], attention);
  EXPECT_EQ(flops["Softmax_6"], 0.0);
}

/// x [2, seq, 24] → LayerNormalization(scale, B) → MatMul(W) [2, seq, 40] → Softmax and
/// LogSoftmax (last axis) → Add = out; and LayerNormalization without B of the MatMul's result.
/// Rows of 24 and 40 floats: whole vectors of 16 and a remainder.
ir::Model row_ops_model() {
  ModelBuilder b(8);
  ir::Dim seq = ir::Dim::symbol("seq");
  int x = b.input("x", {2, seq, 24});
  int scale = b.weight("scale", {24}, 1.5f);
  int bias = b.weight("bias", {24});
  int w = b.weight("w", {24, 40}, 2.0f);
  int scale2 = b.weight("scale2", {40}, 1.5f);
  int n = b.value("n", {2, seq, 24});
  int h = b.value("h", {2, seq, 40});
  int p = b.value("p", {2, seq, 40});
  int lp = b.value("lp", {2, seq, 40});
  int out = b.value("out", {2, seq, 40});
  int n2 = b.value("n2", {2, seq, 40});
  b.node("LayerNormalization", {x, scale, bias}, {n},
         {int_attr("axis", -1), ir::Attribute{"epsilon", 1e-3}});
  b.node("MatMul", {n, w}, {h});
  b.node("Softmax", {h}, {p}, {int_attr("axis", -1)});
  b.node("LogSoftmax", {h}, {lp}, {int_attr("axis", 2)});
  b.node("Add", {p, lp}, {out});
  b.node("LayerNormalization", {h, scale2}, {n2}, {int_attr("axis", 2)});
  b.output(out);
  b.output(n2);
  return b.build();
}

TEST(GenericPlan, SoftmaxAndLayerNormRunOnKilnRowLoops) {
  ir::Model model = row_ops_model();
  for (int threads : {1, 2}) {
    SCOPED_TRACE("threads " + std::to_string(threads));
    CompileOptions options;
    options.num_threads = threads;
    auto compiled = compile::specialize_generic(model, "main", cpu_only(), options);
    ASSERT_TRUE(compiled.ok()) << compiled.status().to_string();
    compile::CompiledFunction& f = **compiled;
    int on_rows = 0;
    for (const auto& entry : f.placement()) {
      if (entry.op != "Softmax" && entry.op != "LogSoftmax" && entry.op != "LayerNormalization") {
        continue;
      }
      EXPECT_EQ(entry.device, "cpu:kiln") << entry.node << ": " << entry.detail;
      EXPECT_THAT(entry.detail, HasSubstr("kiln rows (run-time shapes)"));
      ++on_rows;
    }
    EXPECT_EQ(on_rows, 4);
    uint32_t seed = 40;
    // 2 x 700 rows of 40: enough work to split over two threads.
    for (int64_t seq : {5, 1, 700, 17}) {
      SCOPED_TRACE("seq " + std::to_string(seq));
      std::vector<Buffer> inputs;
      std::vector<Buffer> outputs = run_generic(f, {2, seq, 24}, seed++, &inputs);
      std::vector<Buffer> expected = interpret(model, {&inputs[0].tensor});
      expect_close(outputs[0].tensor, expected[0].tensor);
      expect_close(outputs[1].tensor, expected[1].tensor);
    }
  }
}

/// x [2, seq, 8] → Mul(scale [1]) → Where(Greater(x, 0), ·, fill [8]) → Div(divisor [8]) →
/// Sub(·, x) → Add(row [1, 1, 8]) = out: an attention mask's element-wise ops (a constant
/// scalar, a constant row, a computed operand of equal shape) on run-time shapes.
ir::Model masked_elementwise_model() {
  ModelBuilder b(12);
  ir::Dim seq = ir::Dim::symbol("seq");
  int x = b.input("x", {2, seq, 8});
  int scale = b.weight("scale", {1}, 2.0f);
  int zero = b.weight_of("zero", {1}, {0.0f});
  int fill = b.weight("fill", {8}, 4.0f);
  int divisor = b.weight_of("divisor", {8}, {0.5f, -2.0f, 4.0f, 1.5f, -0.25f, 3.0f, 8.0f, -1.0f});
  int row = b.weight("row", {1, 1, 8});
  int s = b.value("s", {2, seq, 8});
  int m = b.value("m", {2, seq, 8}, ScalarType::Bool);
  int f = b.value("f", {2, seq, 8});
  int d = b.value("d", {2, seq, 8});
  int e = b.value("e", {2, seq, 8});
  int out = b.value("out", {2, seq, 8});
  b.node("Mul", {x, scale}, {s});
  b.node("Greater", {x, zero}, {m});
  b.node("Where", {m, s, fill}, {f});
  b.node("Div", {f, divisor}, {d});
  b.node("Sub", {d, x}, {e});
  b.node("Add", {e, row}, {out});
  b.output(out);
  return b.build();
}

TEST(GenericPlan, ElementwiseOpsRunOnKilnLoopsWhereTheCpuTakesThem) {
  ir::Model model = masked_elementwise_model();
  auto compiled = compile::specialize_generic(model, "main", cpu_only());
  ASSERT_TRUE(compiled.ok()) << compiled.status().to_string();
  compile::CompiledFunction& f = **compiled;
  int on_loops = 0;
  for (const auto& entry : f.placement()) {
    if (entry.op == "Greater") continue;  // bool out: the reference kernel
    if (cpu::own_vector_loops()) {
      EXPECT_EQ(entry.device, "cpu:kiln") << entry.node << ": " << entry.detail;
      EXPECT_EQ(entry.detail, "kiln " + entry.op + " (own loops, run-time shapes)");
      ++on_loops;
    } else {
      EXPECT_EQ(entry.device, "cpu:reference") << entry.node;
    }
  }
  EXPECT_EQ(on_loops, cpu::own_vector_loops() ? 5 : 0);
  uint32_t seed = 60;
  // Rows of 8 merged into 2 x seq x 8: under one vector, whole vectors and a tail; an empty one.
  for (int64_t seq : {1, 2, 37, 300, 0, 5}) {
    SCOPED_TRACE("seq " + std::to_string(seq));
    std::vector<Buffer> inputs;
    std::vector<Buffer> outputs = run_generic(f, {2, seq, 8}, seed++, &inputs);
    std::vector<Buffer> expected = interpret(model, {&inputs[0].tensor});
    expect_close(outputs[0].tensor, expected[0].tensor, 0.0, 0.0);
  }
}

TEST(GenericPlan, StorageGrowsOnlyForLargerShapes) {
  ir::Model model = attention_like_model();
  auto compiled = compile::specialize_generic(model, "main", cpu_only());
  ASSERT_TRUE(compiled.ok()) << compiled.status().to_string();
  compile::CompiledFunction& f = **compiled;
  run_generic(f, {1, 32, 16}, 1);
  uint64_t after_largest = f.num_dynamic_allocations();
  EXPECT_GT(after_largest, 0u);
  for (int64_t seq : {8, 32, 1, 31}) run_generic(f, {1, seq, 16}, 2);
  EXPECT_EQ(f.num_dynamic_allocations(), after_largest);
}

TEST(GenericPlan, RejectsShapesTheInputTypesDoNotAdmit) {
  ir::Model model = attention_like_model();
  auto compiled = compile::specialize_generic(model, "main", cpu_only());
  ASSERT_TRUE(compiled.ok()) << compiled.status().to_string();
  compile::CompiledFunction& f = **compiled;
  EXPECT_TRUE(f.accepts({{1, 9, 16}}).ok());

  Status wrong_dim = f.accepts({{1, 9, 15}});
  EXPECT_EQ(wrong_dim.code(), runtime::Error::InvalidArgument);
  EXPECT_THAT(wrong_dim.message(),
              HasSubstr("run function 'main' (shape-generic): input 'x' has shape [1, 9, 15]"));
  EXPECT_THAT(wrong_dim.message(), HasSubstr("expected"));

  std::vector<Buffer> inputs;
  inputs.push_back(random_input(ScalarType::Float32, {9, 16}, 3));
  std::vector<Buffer> outputs = output_buffers(f);
  Status wrong_rank = run(f, inputs, outputs);
  EXPECT_EQ(wrong_rank.code(), runtime::Error::InvalidArgument);
  EXPECT_THAT(wrong_rank.message(), HasSubstr("input 'x' has shape [9, 16]"));
  EXPECT_THAT(wrong_rank.message(), HasSubstr("rank 3"));
}

TEST(GenericPlan, InputsSharingASymbolMustAgree) {
  ModelBuilder b(5);
  ir::Dim seq = ir::Dim::symbol("seq");
  int x = b.input("x", {seq, 4});
  int m = b.input("m", {seq, 4});
  int w = b.weight("w", {4, 3});
  int s = b.value("s", {seq, 4});
  int y = b.value("y", {seq, 3});
  b.node("Add", {x, m}, {s});
  b.node("MatMul", {s, w}, {y});
  b.output(y);
  ir::Model model = b.build();
  auto compiled = compile::specialize_generic(model, "main", cpu_only());
  ASSERT_TRUE(compiled.ok()) << compiled.status().to_string();
  EXPECT_TRUE((*compiled)->accepts({{6, 4}, {6, 4}}).ok());
  Status disagree = (*compiled)->accepts({{6, 4}, {5, 4}});
  EXPECT_EQ(disagree.code(), runtime::Error::InvalidArgument);
  EXPECT_THAT(disagree.message(), HasSubstr("input 'm' dim 0 is 5 (expected 6: symbol 'seq'"));
}

}  // namespace
}  // namespace kiln::engine

namespace kiln::engine {
namespace {

// x [n, 4] → doubled = Mul(x, 2), shifted = Add(x, 1): two outputs, the first computed while x
// is still to be read by the second.
ir::Model two_outputs_model() {
  ModelBuilder b(23);
  ir::Dim n = ir::Dim::symbol("n");
  int x = b.input("x", {n, 4});
  int two = b.weight_of("two", {1}, {2.0f});
  int one = b.weight_of("one", {1}, {1.0f});
  int doubled = b.value("doubled", {n, 4});
  int shifted = b.value("shifted", {n, 4});
  b.node("Mul", {x, two}, {doubled});
  b.node("Add", {x, one}, {shifted});
  b.output(doubled);
  b.output(shifted);
  return b.build();
}

// A shape-generic plan writes each output into the caller's tensor when that memory is apart
// from the inputs and the other outputs, and computes it elsewhere (then copies it) when the
// caller gives an output the input's own memory.
TEST(GenericPlan, OutputsGoStraightToTheCallerUnlessTheyOverlapAnInput) {
  ir::Model model = two_outputs_model();
  auto compiled = compile::specialize_generic(model, "main", cpu_only());
  ASSERT_TRUE(compiled.ok()) << compiled.status().to_string();
  compile::CompiledFunction& f = **compiled;
  for (int64_t n : {3, 7}) {
    SCOPED_TRACE("n " + std::to_string(n));
    Buffer x = random_input(ScalarType::Float32, {n, 4}, static_cast<uint32_t>(n));
    std::vector<float> original(x.tensor.data_ptr<float>(), x.tensor.data_ptr<float>() + n * 4);
    std::vector<Buffer> outputs = output_buffers(f);
    std::vector<const Tensor*> in = {&x.tensor};
    std::vector<Tensor*> out = {&outputs[0].tensor, &outputs[1].tensor};
    ASSERT_TRUE(f.run(in, out).ok());
    for (int64_t i = 0; i < n * 4; ++i) {
      EXPECT_EQ(outputs[0].tensor.data_ptr<float>()[i], original[i] * 2.0f) << i;
      EXPECT_EQ(outputs[1].tensor.data_ptr<float>()[i], original[i] + 1.0f) << i;
    }

    // `doubled` written over x: computed elsewhere, so `shifted` still reads the input.
    Tensor over_x(ScalarType::Float32, {0}, x.bytes.data(), runtime::ShapeDynamism::Unbounded,
                  x.bytes.size());
    std::vector<Tensor*> aliased = {&over_x, &outputs[1].tensor};
    ASSERT_TRUE(f.run(in, aliased).ok());
    for (int64_t i = 0; i < n * 4; ++i) {
      EXPECT_EQ(over_x.data_ptr<float>()[i], original[i] * 2.0f) << i;
      EXPECT_EQ(outputs[1].tensor.data_ptr<float>()[i], original[i] + 1.0f) << i;
    }
  }
}

}  // namespace
}  // namespace kiln::engine
