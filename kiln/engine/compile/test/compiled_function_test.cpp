// specialize() against a reference interpreter over the same IR.
#include <kiln/engine/compile/function_plan.h>
#include <kiln/engine/compile/test/test_models.h>
#include <kiln/engine/cpu/cpu_op.h>

#include <regex>

namespace kiln::engine {
namespace {

using namespace test_models;  // NOLINT(google-build-using-namespace): test helpers

TEST(Specialize, ConvBiasReluResidualMatchesReference) {
  ir::Model model = conv_residual_model();
  auto f = check_against_reference(model, {{1, 8, 10, 10}}, /*fuse=*/true);
  ASSERT_NE(f, nullptr);
  const auto& placement = f->placement();
  ASSERT_EQ(placement.size(), 2u);
  EXPECT_EQ(placement[0].op, "Conv");
  EXPECT_EQ(placement[0].device, "cpu:kiln");
  EXPECT_THAT(placement[0].fused, ::testing::ElementsAre("Add_1 (Add)", "Relu_2 (Relu)"));
  EXPECT_EQ(placement[1].device, "cpu:onednn");  // a residual: not on the small-op loops
  EXPECT_THAT(placement[1].fused, ::testing::ElementsAre("Add_4 (Add)", "Relu_5 (Relu)"));
  EXPECT_TRUE(f->is_static());
}

TEST(Specialize, FusionOffGivesTheSameResults) {
  ir::Model model = conv_residual_model();
  auto fused = check_against_reference(model, {{1, 8, 10, 10}}, true);
  auto unfused = check_against_reference(model, {{1, 8, 10, 10}}, false);
  ASSERT_NE(unfused, nullptr);
  EXPECT_EQ(unfused->placement().size(), 6u);
  for (const auto& entry : unfused->placement()) EXPECT_TRUE(entry.fused.empty());
  std::vector<Buffer> inputs;
  inputs.push_back(random_input(ScalarType::Float32, {1, 8, 10, 10}, 9));
  auto a = output_buffers(*fused), b = output_buffers(*unfused);
  ASSERT_TRUE(run(*fused, inputs, a).ok());
  ASSERT_TRUE(run(*unfused, inputs, b).ok());
  expect_close(a[0].tensor, b[0].tensor);
}

/// x → Conv(16, Relu) → a; Conv(a) + a → Relu → b; Conv(b) → y: `a` is read by a Conv as its
/// source and as its residual, `b` by a Conv as its source.
ir::Model conv_chain_model() {
  ModelBuilder b(5);
  int x = b.input("x", {1, 16, 12, 12});
  std::vector<ir::Dim> shape = {1, 16, 12, 12};
  std::vector<ir::Attribute> conv = {ints("pads", {1, 1, 1, 1}), ints("kernel_shape", {3, 3})};
  int w1 = b.weight("w1", {16, 16, 3, 3}, 0.2f), w2 = b.weight("w2", {16, 16, 3, 3}, 0.2f);
  int w3 = b.weight("w3", {16, 16, 3, 3}, 0.2f);
  int c1 = b.value("c1", shape), a = b.value("a", shape), c2 = b.value("c2", shape);
  int s2 = b.value("s2", shape), r2 = b.value("r2", shape), y = b.value("y", shape);
  b.node("Conv", {x, w1}, {c1}, conv);
  b.node("Relu", {c1}, {a});
  b.node("Conv", {a, w2}, {c2}, conv);
  b.node("Add", {c2, a}, {s2});
  b.node("Relu", {s2}, {r2});
  b.node("Conv", {r2, w3}, {y}, conv);
  b.output(y);
  return b.build();
}

TEST(Specialize, NativeLayoutsBetweenConvsGiveTheSameResults) {
  ir::Model model = conv_chain_model();
  CompileOptions plain;
  plain.propagate_layouts = false;
  auto native = check_against_reference(model, {{1, 16, 12, 12}}, CompileOptions{});
  auto converted = check_against_reference(model, {{1, 16, 12, 12}}, plain);
  ASSERT_NE(native, nullptr);
  ASSERT_NE(converted, nullptr);
  ASSERT_EQ(native->placement().size(), 3u);
  // When oneDNN computes in a layout of its own (nhwc "acdb" or blocked, as on AVX-512 and
  // AVX2 machines), the first two Convs hand their results over in it; the last one converts
  // (y is the function output).
  bool blocked = native->placement()[0].detail.find("dst:abcd") == std::string::npos;
  for (size_t i = 0; i < 3; ++i) {
    bool kept = native->placement()[i].detail.find("native layout") != std::string::npos;
    EXPECT_EQ(kept, blocked && i < 2) << native->placement()[i].detail;
    EXPECT_EQ(converted->placement()[i].detail.find("native layout"), std::string::npos);
  }
  std::vector<Buffer> inputs;
  inputs.push_back(random_input(ScalarType::Float32, {1, 16, 12, 12}, 21));
  auto a = output_buffers(*native), b = output_buffers(*converted);
  ASSERT_TRUE(run(*native, inputs, a).ok());
  ASSERT_TRUE(run(*converted, inputs, b).ok());
  expect_close(a[0].tensor, b[0].tensor);
  ASSERT_TRUE(run(*native, inputs, a).ok());  // again: the native buffers are reused
  expect_close(a[0].tensor, b[0].tensor);
}

/// x → Conv → MaxPool → (Conv a, Conv b) → Concat → GlobalAveragePool → y: pooling and Concat
/// between Convs.
ir::Model conv_pool_concat_model() {
  ModelBuilder b(7);
  int x = b.input("x", {1, 16, 12, 12});
  std::vector<ir::Attribute> conv = {ints("pads", {1, 1, 1, 1}), ints("kernel_shape", {3, 3})};
  int w1 = b.weight("w1", {32, 16, 3, 3}, 0.2f), w2 = b.weight("w2", {16, 32, 3, 3}, 0.2f);
  int w3 = b.weight("w3", {16, 32, 3, 3}, 0.2f);
  int c1 = b.value("c1", {1, 32, 12, 12}), p1 = b.value("p1", {1, 32, 6, 6});
  int c2 = b.value("c2", {1, 16, 6, 6}), c3 = b.value("c3", {1, 16, 6, 6});
  int cat = b.value("cat", {1, 32, 6, 6}), y = b.value("y", {1, 32, 1, 1});
  b.node("Conv", {x, w1}, {c1}, conv);
  b.node("MaxPool", {c1}, {p1}, {ints("kernel_shape", {2, 2}), ints("strides", {2, 2})});
  b.node("Conv", {p1, w2}, {c2}, conv);
  b.node("Conv", {p1, w3}, {c3}, conv);
  b.node("Concat", {c2, c3}, {cat}, {int_attr("axis", 1)});
  b.node("GlobalAveragePool", {cat}, {y});
  b.output(y);
  return b.build();
}

// The oneDNN steps of a function share one scratchpad, as large as the largest any of them
// needs; running them one after the other over it gives the reference results, run after run.
TEST(Specialize, OneDnnStepsScratchIsPartOfTheArena) {
  ir::Model model = conv_chain_model();
  CompileOptions onednn_only;  // (kiln's Winograd loops would take the Convs)
  onednn_only.small_ops_own_loops = false;
  auto f = check_against_reference(model, {{1, 16, 12, 12}}, onednn_only);
  ASSERT_NE(f, nullptr);
  std::vector<Buffer> inputs;
  inputs.push_back(random_input(ScalarType::Float32, {1, 16, 12, 12}, 3));
  auto first = output_buffers(*f), second = output_buffers(*f);
  ASSERT_TRUE(run(*f, inputs, first).ok());
  ASSERT_TRUE(run(*f, inputs, second).ok());
  EXPECT_EQ(std::memcmp(first[0].bytes.data(), second[0].bytes.data(), first[0].bytes.size()), 0);
  for (const auto& step : f->placement()) EXPECT_EQ(step.device, "cpu:onednn");
  EXPECT_GE(f->arena_bytes(), f->scratchpad_bytes());
  // Counted with the arena among the process's activation bytes.
  EXPECT_GE(compile::live_activation_bytes(), f->arena_bytes());
}

/// x → Relu → r (1x16x24x24) → MaxPool → p (1x16x12x12) → Conv → y: the Conv's scratch is
/// alive only while r is dead.
ir::Model pool_then_conv_model() {
  ModelBuilder b(6);
  int x = b.input("x", {1, 16, 24, 24});
  int w = b.weight("w", {16, 16, 3, 3}, 0.2f);
  int r = b.value("r", {1, 16, 24, 24}), p = b.value("p", {1, 16, 12, 12});
  int y = b.value("y", {1, 16, 12, 12});
  b.node("Relu", {x}, {r});
  b.node("MaxPool", {r}, {p}, {ints("kernel_shape", {2, 2}), ints("strides", {2, 2})});
  b.node("Conv", {p, w}, {y}, {ints("pads", {1, 1, 1, 1}), ints("kernel_shape", {3, 3})});
  b.output(y);
  return b.build();
}

TEST(Specialize, StepScratchSharesTheArenaWithDeadValues) {
  CompileOptions onednn_only;
  onednn_only.small_ops_own_loops = false;
  auto f = check_against_reference(pool_then_conv_model(), {{1, 16, 24, 24}}, onednn_only);
  ASSERT_NE(f, nullptr);
  // r and p (36864 + 9216 bytes) are alive at the MaxPool; p, y and the Conv's scratch at the
  // Conv. Kept apart, scratch and values would take 46080 bytes + the scratch.
  constexpr uint64_t kPool = 36864 + 9216, kConv = 2 * 9216, kSlack = 4 * 64;
  const uint64_t scratch = f->scratchpad_bytes();
  EXPECT_GE(f->arena_bytes(), std::max(kPool, kConv + scratch));
  EXPECT_LE(f->arena_bytes(), std::max(kPool, kConv + scratch) + kSlack);
  // Run twice: the scratch written by the Conv overlaps r, which the next run writes again.
  std::vector<Buffer> inputs;
  inputs.push_back(random_input(ScalarType::Float32, {1, 16, 24, 24}, 4));
  auto first = output_buffers(*f), second = output_buffers(*f);
  ASSERT_TRUE(run(*f, inputs, first).ok());
  ASSERT_TRUE(run(*f, inputs, second).ok());
  EXPECT_EQ(std::memcmp(first[0].bytes.data(), second[0].bytes.data(), first[0].bytes.size()), 0);
}

TEST(Specialize, PoolingAndConcatKeepNativeLayouts) {
  ir::Model model = conv_pool_concat_model();
  CompileOptions onednn_only;
  onednn_only.small_ops_own_loops = false;  // the pooling is tiny
  CompileOptions plain = onednn_only;
  plain.propagate_layouts = false;
  auto native = check_against_reference(model, {{1, 16, 12, 12}}, onednn_only);
  auto converted = check_against_reference(model, {{1, 16, 12, 12}}, plain);
  ASSERT_NE(native, nullptr);
  ASSERT_NE(converted, nullptr);
  const auto& steps = native->placement();
  ASSERT_EQ(steps.size(), 6u);
  for (const auto& step : steps) EXPECT_EQ(step.device, "cpu:onednn") << step.node;
  if (steps[0].detail.find("dst:abcd") == std::string::npos) {
    // Every value but the output is handed over in the Convs' layout.
    for (size_t i = 0; i < 5; ++i) {
      EXPECT_NE(steps[i].detail.find("native layout"), std::string::npos) << steps[i].detail;
    }
  }
  std::vector<Buffer> inputs;
  inputs.push_back(random_input(ScalarType::Float32, {1, 16, 12, 12}, 23));
  auto a = output_buffers(*native), b = output_buffers(*converted);
  ASSERT_TRUE(run(*native, inputs, a).ok());
  ASSERT_TRUE(run(*converted, inputs, b).ok());
  expect_close(a[0].tensor, b[0].tensor);
}

// Winograd on (the default) and off both match the reference interpreter, on a residual chain
// and on pooling and Concat between Convs. Where oneDNN has Winograd kernels (AVX-512), the
// 3x3 Convs report one and the Concat of their blocked results copies whole pieces.
TEST(Specialize, WinogradConvsMatchReferenceOnAndOff) {
  for (bool winograd : {true, false}) {
    SCOPED_TRACE(winograd ? "winograd" : "direct");
    CompileOptions options;
    options.winograd = winograd;
    auto chain = check_against_reference(conv_chain_model(), {{1, 16, 12, 12}}, options);
    auto concat = check_against_reference(conv_pool_concat_model(), {{1, 16, 12, 12}}, options);
    ASSERT_NE(chain, nullptr);
    ASSERT_NE(concat, nullptr);
    const auto& steps = concat->placement();
    ASSERT_EQ(steps.size(), 6u);
    bool wino = is_winograd(steps[2].detail);
    if (!winograd) {
      EXPECT_FALSE(wino) << steps[2].detail;
    }
    if (wino) {
      EXPECT_NE(steps[4].detail.find("pieces copied"), std::string::npos) << steps[4].detail;
    }
  }
}

// A 3x3 Conv whose weight is too large to transform at load (384x384x3x3) stays direct, and
// out of the blocked layout of its Winograd neighbours: it runs on oneDNN's nhwc brgemm
// kernel (has_large_weights), as does a large stride-2 one; results match the reference.
TEST(Specialize, LargeWeightsRunDirectInTheLayoutOneDnnPrefers) {
  ModelBuilder b(9);
  int x = b.input("x", {1, 16, 8, 8});
  std::vector<ir::Attribute> conv = {ints("pads", {1, 1, 1, 1}), ints("kernel_shape", {3, 3})};
  std::vector<ir::Attribute> strided = conv;
  strided.push_back(ints("strides", {2, 2}));
  int w1 = b.weight("w1", {384, 16, 3, 3}, 0.2f), w2 = b.weight("w2", {384, 384, 3, 3}, 0.05f);
  int w3 = b.weight("w3", {384, 384, 3, 3}, 0.05f), w4 = b.weight("w4", {16, 384, 3, 3}, 0.05f);
  int c1 = b.value("c1", {1, 384, 8, 8}), c2 = b.value("c2", {1, 384, 8, 8});
  int c3 = b.value("c3", {1, 384, 4, 4}), y = b.value("y", {1, 16, 4, 4});
  b.node("Conv", {x, w1}, {c1}, conv);
  b.node("Conv", {c1, w2}, {c2}, conv);
  b.node("Conv", {c2, w3}, {c3}, strided);
  b.node("Conv", {c3, w4}, {y}, conv);
  b.output(y);
  auto f = check_against_reference(b.build(), {{1, 16, 8, 8}}, CompileOptions{});
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(f->placement().size(), 4u);
  for (size_t large : {1, 2}) {
    const std::string& detail = f->placement()[large].detail;
    EXPECT_FALSE(is_winograd(detail)) << detail;
    EXPECT_EQ(detail.find("aBcd16b"), std::string::npos) << detail;
  }
  if (is_winograd(f->placement()[0].detail)) {  // AVX-512: blocked convs
    EXPECT_TRUE(is_winograd(f->placement()[3].detail)) << f->placement()[3].detail;
  }
}

// A 3x3 Conv to one block of output channels over a large image: where kiln's loops run, its
// Winograd loops take it and its neighbour (with or without frequent reshapes); on oneDNN's
// kernels it stays direct beside Winograd neighbours (winograd_fit: FewOutputChannels), in
// their blocked layout, on CPUs where the direct kernel wins (direct_wins_one_block). Results
// match.
TEST(Specialize, OneOutputBlockOverALargeImageStaysDirectOnOneDnn) {
  ModelBuilder b(13);
  int x = b.input("x", {1, 16, 80, 80});
  std::vector<ir::Attribute> conv = {ints("pads", {1, 1, 1, 1}), ints("kernel_shape", {3, 3})};
  int w1 = b.weight("w1", {32, 16, 3, 3}, 0.2f), w2 = b.weight("w2", {16, 32, 3, 3}, 0.2f);
  int c1 = b.value("c1", {1, 32, 80, 80}), y = b.value("y", {1, 16, 80, 80});
  b.node("Conv", {x, w1}, {c1}, conv);
  b.node("Conv", {c1, w2}, {y}, conv);
  b.output(y);
  const ir::Model model = b.build();
  for (int setup = 0; setup < 3; ++setup) {
    const bool reshapes = setup == 1, own_loops = setup != 2;
    SCOPED_TRACE(reshapes ? "frequent reshapes" : own_loops ? "default options" : "oneDNN only");
    SpecializationOptions spec = cpu_only();
    spec.expect_frequent_reshapes = reshapes;
    CompileOptions options;
    options.small_ops_own_loops = own_loops;
    // (F(4x4, 3x3) rounds to about 9e-7 of the sums of the products' magnitudes, here about 30
    // for the second Conv's 288 products: outputs near zero differ by up to about 3e-5.)
    auto f = check_against_reference(model, {{1, 16, 80, 80}}, options, 1e-4, 5e-5, spec);
    ASSERT_NE(f, nullptr);
    ASSERT_EQ(f->placement().size(), 2u);
    const std::string& wide = f->placement()[0].detail;
    const std::string& narrow = f->placement()[1].detail;
    if (own_loops && cpu::own_vector_loops()) {
      EXPECT_NE(wide.find("kiln Winograd F(4x4, 3x3)"), std::string::npos) << wide;
      EXPECT_NE(narrow.find("kiln Winograd F(4x4, 3x3)"), std::string::npos) << narrow;
      continue;
    }
    if (!is_winograd(wide)) continue;  // no Winograd kernels on this CPU
    EXPECT_EQ(wide.find("kiln"), std::string::npos) << wide;
    if (!compile::direct_wins_one_block()) {
      EXPECT_TRUE(is_winograd(narrow)) << narrow;
      continue;
    }
    EXPECT_FALSE(is_winograd(narrow)) << narrow;
    // The blocked layout throughout: oneDNN's direct kernel.
    EXPECT_NE(narrow.find("aBcd16b"), std::string::npos) << narrow;
  }
}

// A function with a depthwise Conv builds every Conv blocked (nChw16c or nChw8c: oneDNN's jit_dw
// and jit_1x1 kernels); one without keeps oneDNN's preferred nhwc kernels.
TEST(Specialize, DepthwiseSeparableConvsUseTheBlockedLayout) {
  std::vector<ir::Attribute> depthwise = {ints("pads", {1, 1, 1, 1}), ints("kernel_shape", {3, 3}),
                                          int_attr("group", 32)};
  auto model = [&](bool with_depthwise) {
    ModelBuilder b(12);
    int x = b.input("x", {1, 32, 12, 12});
    int w1 = b.weight("w1", {32, 1, 3, 3}), w2 = b.weight("w2", {64, 32, 1, 1}, 0.2f);
    int d = b.value("d", {1, 32, 12, 12}), y = b.value("y", {1, 64, 12, 12});
    if (with_depthwise) {
      b.node("Conv", {x, w1}, {d}, depthwise);
      b.node("Conv", {d, w2}, {y});
    } else {
      b.node("Conv", {x, w2}, {y});
    }
    b.output(y);
    return b.build();
  };
  CompileOptions options;
  options.small_ops_own_loops = false;  // oneDNN's kernels, whose layouts are the point
  auto separable = check_against_reference(model(true), {{1, 32, 12, 12}}, options);
  auto plain = check_against_reference(model(false), {{1, 32, 12, 12}}, options);
  ASSERT_NE(separable, nullptr);
  ASSERT_NE(plain, nullptr);
  ASSERT_EQ(separable->placement().size(), 2u);
  ASSERT_EQ(plain->placement().size(), 1u);
  // Blocks of 16 channels with AVX-512, of 8 with AVX2.
  const std::regex blocked("dst:aBcd(8|16)b");
  for (const auto& step : separable->placement()) {
    EXPECT_TRUE(std::regex_search(step.detail, blocked)) << step.detail;
  }
  EXPECT_NE(separable->placement()[0].detail.find("jit_dw"), std::string::npos)
      << separable->placement()[0].detail;
  // Without one, oneDNN's preferred layout: nhwc with AVX-512 (brgemm kernels); with AVX2 its
  // blocked one (jit_1x1), which there is no choice of kiln's to check.
  if (cpu::cpu_has_avx512()) {
    EXPECT_FALSE(std::regex_search(plain->placement()[0].detail, std::regex("aBcd(8|16)b")))
        << plain->placement()[0].detail;
  }
}

TEST(Specialize, MatMulBiasGeluFuses) {
  ModelBuilder b(4);
  int x = b.input("x", {ir::Dim::symbol("batch"), 16});
  int w = b.weight("w", {16, 32});
  int bias = b.weight("bias", {32});
  int m = b.value("m", {ir::Dim::symbol("batch"), 32});
  int a = b.value("a", {ir::Dim::symbol("batch"), 32});
  int y = b.value("y", {ir::Dim::symbol("batch"), 32});
  b.node("MatMul", {x, w}, {m});
  b.node("Add", {bias, m}, {a});
  b.node("Gelu", {a}, {y});
  b.output(y);
  ir::Model model = b.build();
  for (int64_t batch : {1, 5}) {
    auto f = check_against_reference(model, {{batch, 16}}, true);
    ASSERT_NE(f, nullptr);
    ASSERT_EQ(f->placement().size(), 1u);
    // kiln's loops where it has them for this CPU (AVX-512's tiles and streaming rows, AVX2's
    // tiles), with the bias and the Gelu in their epilogue; else oneDNN.
    const bool own = cpu::avx512_own_runtime_gemm() || cpu::avx2_own_gemm() ||
                     (batch == 1 && cpu::streaming_b_blocked());
    EXPECT_EQ(f->placement()[0].device, own ? "cpu:kiln" : "cpu:onednn")
        << batch << " " << f->placement()[0].detail;
    EXPECT_THAT(f->placement()[0].fused, ::testing::ElementsAre("Add_1 (Add)", "Gelu_2 (Gelu)"));
    EXPECT_EQ(*f->output_sizes(0), (std::vector<int64_t>{batch, 32}));
  }
}

// Where oneDNN applies a fused GELU slowly (a CPU without AVX-512: cpu::gelu_post_op_fast), the
// MatMul takes its bias and the GELU is a step of its own, with the same results.
TEST(Specialize, MatMulBiasGeluLeavesTheGeluAStepWhereItFusesSlowly) {
  ModelBuilder b(4);
  int x = b.input("x", {64, 16});
  int w = b.weight("w", {16, 32});
  int bias = b.weight("bias", {32});
  int m = b.value("m", {64, 32}), a = b.value("a", {64, 32}), y = b.value("y", {64, 32});
  b.node("MatMul", {x, w}, {m});
  b.node("Add", {bias, m}, {a});
  b.node("Gelu", {a}, {y});
  b.output(y);
  ir::Model model = b.build();
  cpu::set_avx512_for_testing(false);
  auto f = check_against_reference(model, {{64, 16}}, true);
  cpu::set_avx512_for_testing(true);  // the binary's choice (own_loops_on.cpp)
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(f->placement().size(), 2u);
  EXPECT_EQ(f->placement()[0].op, "MatMul");
  EXPECT_THAT(f->placement()[0].fused, ::testing::ElementsAre("Add_1 (Add)"));
  EXPECT_EQ(f->placement()[1].op, "Gelu");
}

TEST(Specialize, LayerNormSoftmaxAndAReferenceOnlyOp) {
  ModelBuilder b(5);
  int x = b.input("x", {2, 5, 16});
  int scale = b.weight("scale", {16});
  int shift = b.weight("shift", {16});
  int k = b.int_weight("k", {3});
  int n = b.value("n", {2, 5, 16}), s = b.value("s", {2, 5, 16});
  int top = b.value("top", {2, 5, 3});
  int idx = b.value("idx", {2, 5, 3}, ScalarType::Int64);
  b.node("LayerNormalization", {x, scale, shift}, {n}, {int_attr("axis", -1)});
  b.node("Softmax", {n}, {s}, {int_attr("axis", -1)});
  b.node("TopK", {s, k}, {top, idx}, {int_attr("axis", -1)});
  b.output(s);
  b.output(top);
  b.output(idx);
  ir::Model model = b.build();
  CompileOptions onednn_only;
  onednn_only.small_ops_own_loops = false;
  auto f = check_against_reference(model, {{2, 5, 16}}, onednn_only);
  ASSERT_NE(f, nullptr);
  std::map<std::string, std::string> where;
  for (const auto& entry : f->placement()) where[entry.op] = entry.device;
  EXPECT_EQ(where["LayerNormalization"], "cpu:onednn");
  EXPECT_EQ(where["Softmax"], "cpu:onednn");
  EXPECT_EQ(where["TopK"], "cpu:reference");
  // By default, work this small generates no code: the layer normalization and the softmax
  // run on kiln's row loops (with AVX-512), the rest on the reference kernels.
  auto small = check_against_reference(model, {{2, 5, 16}}, CompileOptions{});
  ASSERT_NE(small, nullptr);
  for (const auto& entry : small->placement()) {
    const bool rows = entry.op != "TopK" && cpu::own_vector_loops();
    EXPECT_EQ(entry.device, rows ? "cpu:kiln" : "cpu:reference") << entry.op;
    if (!rows && entry.op == "Softmax") {
      EXPECT_THAT(entry.detail, HasSubstr("little work")) << entry.detail;
    }
  }
}

// Layer normalizations and softmaxes on kiln's row loops, against the reference kernel, whether
// of little work (a decoder's one row) or not (attention's rows, on one and two threads): layer
// normalizations with and without B, float statistics only (stash_type 11 stays on the
// reference kernel when the work is little, else on oneDNN); softmaxes over the last axis only.
TEST(Specialize, RowsRunOnKilnsRows) {
  struct Variant {
    const char* op;
    bool bias;
    std::vector<ir::Attribute> attributes;
    bool rows;
  };
  const std::vector<Variant> variants = {
      {"LayerNormalization", true, {int_attr("axis", -1)}, true},
      {"LayerNormalization", false, {int_attr("axis", -1)}, true},
      {"LayerNormalization", true, {int_attr("axis", -1), int_attr("stash_type", 11)}, false},
      {"Softmax", false, {int_attr("axis", -1)}, true},
      {"LogSoftmax", false, {int_attr("axis", 2)}, true},
      {"Softmax", false, {int_attr("axis", 1)}, false},
  };
  uint32_t seed = 17;
  for (const std::vector<int64_t>& shape :
       {std::vector<int64_t>{1, 2, 64}, std::vector<int64_t>{3, 40, 200}}) {
    const bool little = shape[1] == 2;
    for (int threads : {1, 2}) {
      for (const Variant& v : variants) {
        SCOPED_TRACE(std::string(v.op) + " " + std::to_string(seed) + " " +
                     runtime::shape_to_string(shape) + " threads " + std::to_string(threads));
        ModelBuilder b(seed++);
        const std::vector<ir::Dim> dims(shape.begin(), shape.end());
        int x = b.input("x", dims);
        int y = b.value("y", dims);
        std::vector<int> inputs = {x};
        if (std::string(v.op) == "LayerNormalization") {
          inputs.push_back(b.weight("scale", {shape.back()}));
          if (v.bias) inputs.push_back(b.weight("shift", {shape.back()}));
        }
        b.node(v.op, inputs, {y}, v.attributes);
        b.output(y);
        CompileOptions options;
        options.num_threads = threads;
        auto f = check_against_reference(b.build(), {shape}, options);
        ASSERT_NE(f, nullptr);
        ASSERT_EQ(f->placement().size(), 1u);
        const bool rows = v.rows && cpu::own_vector_loops();
        EXPECT_EQ(f->placement()[0].device, rows     ? "cpu:kiln"
                                            : little ? "cpu:reference"
                                                     : "cpu:onednn");
        if (rows) {
          EXPECT_THAT(f->placement()[0].detail, HasSubstr("kiln rows"));
        }
      }
    }
  }
}

// Concats of plain inputs copy row by row (a decoder's keys appended to the past ones, head
// by head), against the reference kernel; a result over a megabyte split over two threads
// stays on oneDNN's concat.
TEST(Specialize, PlainConcatsCopyRowByRow) {
  struct Variant {
    std::vector<int64_t> a, b;
    int64_t axis;
    int threads;
    bool rows;
  };
  const std::vector<Variant> variants = {
      {{1, 4, 8, 16}, {1, 4, 1, 16}, 2, 1, true},       // the past keys and this step's
      {{3, 5}, {3, 2}, -1, 1, true},                    // the last axis
      {{2, 3, 4}, {1, 3, 4}, 0, 1, true},               // whole inputs, one row
      {{2, 1, 5, 7}, {2, 3, 5, 7}, 1, 2, true},         // two threads, a small result
      {{1, 4, 512, 64}, {1, 4, 520, 64}, 2, 2, false},  // two threads, over 1 MiB
      {{1, 4, 512, 64}, {1, 4, 512, 64}, 2, 1, true},   // one thread, any size
  };
  uint32_t seed = 40;
  for (const Variant& v : variants) {
    SCOPED_TRACE(runtime::shape_to_string(v.a) + " + " + runtime::shape_to_string(v.b) + " axis " +
                 std::to_string(v.axis) + ", " + std::to_string(v.threads) + " thread(s)");
    ModelBuilder b(seed++);
    int x = b.input("x", std::vector<ir::Dim>(v.a.begin(), v.a.end()));
    int y = b.input("y", std::vector<ir::Dim>(v.b.begin(), v.b.end()));
    // Each input is an op's result (a Relu), as in a model: a Concat of graph inputs only.
    int rx = b.value("rx", std::vector<ir::Dim>(v.a.begin(), v.a.end()));
    int ry = b.value("ry", std::vector<ir::Dim>(v.b.begin(), v.b.end()));
    std::vector<int64_t> out = v.a;
    const size_t axis =
        static_cast<size_t>(v.axis < 0 ? v.axis + static_cast<int64_t>(out.size()) : v.axis);
    out[axis] += v.b[axis];
    int cat = b.value("cat", std::vector<ir::Dim>(out.begin(), out.end()));
    b.node("Relu", {x}, {rx});
    b.node("Relu", {y}, {ry});
    b.node("Concat", {rx, ry}, {cat}, {int_attr("axis", v.axis)});
    b.output(cat);
    CompileOptions options;
    options.num_threads = v.threads;
    auto f = check_against_reference(b.build(), {v.a, v.b}, options);
    ASSERT_NE(f, nullptr);
    bool found = false;
    for (const auto& entry : f->placement()) {
      if (entry.op != "Concat") continue;
      found = true;
      EXPECT_EQ(entry.detail.find("rows copied") != std::string::npos, v.rows) << entry.detail;
    }
    EXPECT_TRUE(found);
  }
}

TEST(Specialize, EinsumRunsOnTheReferenceKernel) {
  ModelBuilder b(6);
  int x = b.input("x", {3, 4});
  int w = b.weight("w", {4, 5});
  int y = b.value("y", {3, 5});
  b.node("Einsum", {x, w}, {y}, {{"equation", std::string("ij,jk->ik")}});
  b.output(y);
  auto f = check_against_reference(b.build(), {{3, 4}}, true);
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(f->placement().size(), 1u);
  EXPECT_EQ(f->placement()[0].device, "cpu:reference");
  EXPECT_THAT(f->placement()[0].detail, HasSubstr("no oneDNN implementation"));
}

TEST(Specialize, ConstantSubgraphsAreFoldedAndShapesProbed) {
  // Reshape(x, Concat(Shape(x)[0], -1)) with the model not knowing the result's shape.
  ModelBuilder b(7);
  int x = b.input("x", {ir::Dim::symbol("n"), 4, 3});
  int shape = b.value("shape", {3}, ScalarType::Int64);
  int zero = b.int_weight("zero", {0});
  int first = b.value("first", {1}, ScalarType::Int64);
  int minus_one = b.int_weight("minus_one", {-1});
  int target = b.value("target", {2}, ScalarType::Int64);
  int r = b.unknown("r");
  int w = b.weight("w", {12, 6});
  int y = b.unknown("y");
  b.node("Shape", {x}, {shape});
  b.node("Gather", {shape, zero}, {first});
  b.node("Concat", {first, minus_one}, {target}, {int_attr("axis", 0)});
  b.node("Reshape", {x, target}, {r});
  b.node("MatMul", {r, w}, {y});
  b.output(y);
  auto f = check_against_reference(b.build(), {{2, 4, 3}}, true);
  ASSERT_NE(f, nullptr);
  EXPECT_TRUE(f->is_static());
  ASSERT_EQ(f->placement().size(), 2u);  // Shape, Gather and Concat were folded
  EXPECT_EQ(f->placement()[0].op, "Reshape");
  EXPECT_EQ(f->placement()[1].device, "cpu:kiln");
  EXPECT_EQ(*f->output_sizes(0), (std::vector<int64_t>{2, 6}));
}

TEST(Specialize, ShapesTheModelDeclaresWronglyFollowTheInputs) {
  // A detector's output is declared [1, 1, h, w], true only for some inputs: here Concat
  // doubles the width, and the declared width holds for no input.
  ModelBuilder b(9);
  ir::Dim h = ir::Dim::symbol("h"), w = ir::Dim::symbol("w");
  int x = b.input("x", {1, 1, h, w});
  int wide = b.value("wide", {1, 1, h, w});
  int y = b.value("y", {1, 1, h, w});
  b.node("Concat", {x, x}, {wide}, {int_attr("axis", 3)});
  b.node("Sigmoid", {wide}, {y});
  b.output(y);
  auto f = check_against_reference(b.build(), {{1, 1, 2, 3}}, true);
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(*f->output_sizes(0), (std::vector<int64_t>{1, 1, 2, 6}));
}

TEST(Specialize, DataDependentShapesRunOnTheReferencePath) {
  ModelBuilder b(8);
  int x = b.input("x", {6});
  int nz = b.unknown("nz", ScalarType::Int64);
  int c = b.unknown("c", ScalarType::Int64);
  b.node("NonZero", {x}, {nz});
  b.node("Add", {nz, nz}, {c});
  b.output(c);
  ir::Model model = b.build();
  auto compiled = compile::specialize(model, "main", {{6}}, cpu_only());
  ASSERT_TRUE(compiled.ok()) << compiled.status().to_string();
  auto& f = **compiled;
  EXPECT_FALSE(f.is_static());
  EXPECT_FALSE(f.output_sizes(0).has_value());
  for (const auto& entry : f.placement()) {
    EXPECT_EQ(entry.device, "cpu:reference");
    EXPECT_EQ(entry.detail, "shape known only at run time") << entry.node;
  }
  std::vector<float> data = {0, 1, 0, 2, 3, 0};
  std::vector<Buffer> inputs(1);
  inputs[0].tensor = Tensor(ScalarType::Float32, {6}, data.data());
  auto outputs = output_buffers(f);
  Status st = run(f, inputs, outputs);
  ASSERT_TRUE(st.ok()) << st.to_string();
  ASSERT_EQ(runtime::shape_to_string(outputs[0].tensor.sizes()), "[1, 3]");
  const int64_t* out = outputs[0].tensor.data_ptr<int64_t>();
  EXPECT_EQ(out[0], 2);
  EXPECT_EQ(out[1], 6);
  EXPECT_EQ(out[2], 8);
}

TEST(Specialize, RangeWithFloatBoundsFromDataIsDataDependent) {
  ModelBuilder b(9);
  int limit = b.input("limit", {});
  int start = b.weight_of("start", {}, {0.0f});
  int delta = b.weight_of("delta", {}, {1.0f});
  int r = b.unknown("r");
  b.node("Range", {start, limit, delta}, {r});
  b.output(r);
  ir::Model model = b.build();
  auto compiled = compile::specialize(model, "main", {{}}, cpu_only());
  ASSERT_TRUE(compiled.ok()) << compiled.status().to_string();
  auto& f = **compiled;
  EXPECT_FALSE(f.output_sizes(0).has_value());
  for (float value : {3.0f, 5.0f}) {
    std::vector<Buffer> inputs(1);
    inputs[0].tensor = Tensor(ScalarType::Float32, {}, &value);
    auto outputs = output_buffers(f);
    Status st = run(f, inputs, outputs);
    ASSERT_TRUE(st.ok()) << st.to_string();
    EXPECT_EQ(outputs[0].tensor.numel(), static_cast<int64_t>(value));
  }
}

// A node reading one value twice whose output shape has no rule (Einsum, PRelu), so the build
// learns it by running the node on stand-ins: the value, a function input, stays one (the
// probe once swapped it out twice and restored its stand-in, and the run aborted).
TEST(Specialize, ANodeReadingAnInputTwiceKeepsItAnInputWhenItsShapeIsProbed) {
  for (const std::string op : {"Einsum", "PRelu"}) {
    SCOPED_TRACE(op);
    ModelBuilder b(10);
    int x = b.input("x", {2, 3});
    int y = b.unknown("y");
    std::vector<ir::Attribute> attributes;
    if (op == "Einsum") attributes = {{"equation", std::string("ij,ij->ij")}};
    b.node(op, {x, x}, {y}, attributes);
    b.output(y);
    EXPECT_NE(check_against_reference(b.build(), {{2, 3}}, CompileOptions{}), nullptr);
  }
}

// A package's declared static shapes are checked against the shapes its ops give where a rule
// computes them: a Conv declared [1, 4, 6, 6] whose pads give a width of 4194310 is refused,
// naming both, before its op is made (oneDNN allocated 512 MB making it for that width).
TEST(Specialize, ADeclaredShapeThatItsInputsDoNotGiveIsRefused) {
  ModelBuilder b(11);
  int x = b.input("x", {1, 2, 6, 6});
  int w = b.weight("w", {4, 2, 3, 3});
  int y = b.value("y", {1, 4, 6, 6});
  b.node("Conv", {x, w}, {y},
         {{"kernel_shape", std::vector<int64_t>{3, 3}},
          {"pads", std::vector<int64_t>{1, 1, 1, 4194305}}});
  b.output(y);
  auto f = compile::specialize(b.build(), "main", {{1, 2, 6, 6}}, cpu_only());
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), Error::InvalidArgument);
  EXPECT_THAT(f.status().message(),
              HasSubstr("node 'Conv_0' (Conv): output 0 'y' is declared [1, 4, 6, 6], but its "
                        "inputs give [1, 4, 6, 4194310]"));
}

TEST(Specialize, RunsAgainWithoutAllocating) {
  ir::Model model = conv_residual_model();
  auto compiled = compile::specialize(model, "main", {{1, 8, 10, 10}}, cpu_only());
  ASSERT_TRUE(compiled.ok());
  auto& f = **compiled;
  // Six 3200-byte activations, at most three alive at once, and one step's scratch at a time:
  // the arena reuses memory.
  EXPECT_GT(f.arena_bytes(), 0u);
  EXPECT_LE(f.arena_bytes(), 3u * 3200u + f.scratchpad_bytes() + 4u * 64u);
  std::vector<Buffer> inputs;
  inputs.push_back(random_input(ScalarType::Float32, {1, 8, 10, 10}, 3));
  auto first = output_buffers(f), second = output_buffers(f);
  ASSERT_TRUE(run(f, inputs, first).ok());
  ASSERT_TRUE(run(f, inputs, second).ok());
  EXPECT_EQ(f.num_dynamic_allocations(), 0u);
  EXPECT_EQ(std::memcmp(first[0].bytes.data(), second[0].bytes.data(), 3200), 0);
}

TEST(Specialize, ThreadTeamIsSizedByTheStepsThatSplitTheirWork) {
  // Steps of little work run on one thread: no team, whatever the threads allowed.
  ir::Model small = conv_residual_model();
  CompileOptions two;
  two.num_threads = 2;
  auto tiny = compile::specialize(small, "main", {{1, 8, 10, 10}}, cpu_only(), two);
  ASSERT_TRUE(tiny.ok()) << tiny.status().message();
  EXPECT_EQ((*tiny)->team_threads(), 1);

  // A MatMul of 2 * 256 * 512 * 512 FLOPs splits over the threads allowed, and no further.
  ModelBuilder b;
  int x = b.input("x", {256, 512});
  int w = b.weight("w", {512, 512});
  int y = b.value("y", {256, 512});
  b.node("MatMul", {x, w}, {y});
  b.output(y);
  ir::Model large = b.build();
  auto split = compile::specialize(large, "main", {{256, 512}}, cpu_only(), two);
  ASSERT_TRUE(split.ok()) << split.status().message();
  EXPECT_EQ((*split)->team_threads(), 2);
  CompileOptions one;
  one.num_threads = 1;
  auto single = compile::specialize(large, "main", {{256, 512}}, cpu_only(), one);
  ASSERT_TRUE(single.ok()) << single.status().message();
  EXPECT_EQ((*single)->team_threads(), 1);

  // The runs give the same results either way.
  std::vector<Buffer> inputs;
  inputs.push_back(random_input(ScalarType::Float32, {256, 512}, 5));
  auto a = output_buffers(**split), c = output_buffers(**single);
  ASSERT_TRUE(run(**split, inputs, a).ok());
  ASSERT_TRUE(run(**single, inputs, c).ok());
  expect_close(a[0].tensor, c[0].tensor);
}

TEST(Specialize, RejectsBadInputsWithTheirNames) {
  ir::Model model = conv_residual_model();
  auto compiled = compile::specialize(model, "main", {{1, 8, 10, 10}}, cpu_only());
  ASSERT_TRUE(compiled.ok());
  auto& f = **compiled;
  std::vector<Buffer> inputs;
  inputs.push_back(random_input(ScalarType::Float32, {1, 8, 10, 11}, 3));
  auto outputs = output_buffers(f);
  Status status = run(f, inputs, outputs);
  EXPECT_EQ(status.code(), Error::InvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("input 'x' has shape [1, 8, 10, 11] (expected "
                                          "[1, 8, 10, 10]"));
  inputs[0] = random_input(ScalarType::Int64, {1, 8, 10, 10}, 3);
  status = run(f, inputs, outputs);
  EXPECT_EQ(status.code(), Error::InvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("input 'x' has dtype"));
  inputs.clear();
  status = run(f, inputs, outputs);
  EXPECT_THAT(status.message(), HasSubstr("got 0 inputs (expected 1)"));

  auto wrong_rank = compile::specialize(model, "main", {{1, 8, 10}}, cpu_only());
  EXPECT_EQ(wrong_rank.error(), Error::InvalidArgument);
  EXPECT_THAT(wrong_rank.status().message(), HasSubstr("input 'x' has shape [1, 8, 10]"));
  auto missing = compile::specialize(model, "other", {{1}}, cpu_only());
  EXPECT_EQ(missing.error(), Error::NotFound);
}

TEST(Specialize, ConflictingSymbolBindingsAreRejected) {
  ModelBuilder b;
  int x = b.input("x", {ir::Dim::symbol("n"), 2});
  int y = b.input("y", {ir::Dim::symbol("n"), 2});
  int z = b.value("z", {ir::Dim::symbol("n"), 2});
  b.node("Add", {x, y}, {z});
  b.output(z);
  auto compiled = compile::specialize(b.build(), "main", {{3, 2}, {4, 2}}, cpu_only());
  EXPECT_EQ(compiled.error(), Error::InvalidArgument);
  EXPECT_THAT(compiled.status().message(), HasSubstr("symbol 'n' is bound by input 'x'"));
}

TEST(Specialize, OptionsWithoutTheCpuAreNotSupported) {
  SpecializationOptions gpu;
  gpu.allowed_kinds = {ComputeKind::Gpu};
  auto compiled = compile::specialize(conv_residual_model(), "main", {{1, 8, 10, 10}}, gpu);
  EXPECT_EQ(compiled.error(), Error::NotSupported);
  EXPECT_THAT(compiled.status().message(), HasSubstr(gpu.identifier()));
  auto loaded = ModelLoader::load(conv_residual_model(), gpu);
  EXPECT_EQ(loaded.error(), Error::NotSupported);
}

TEST(Specialize, DataDependentIfIsNotSupported) {
  ModelBuilder b;
  int c = b.input("c", {}, ScalarType::Bool);
  int y = b.unknown("y");
  b.node("If", {c}, {y});
  b.output(y);
  ir::Model model = b.build();
  model.functions[0].nodes[0].regions.resize(2);
  auto compiled = compile::specialize(model, "main", {{}}, cpu_only());
  EXPECT_EQ(compiled.error(), Error::NotSupported);
  EXPECT_THAT(compiled.status().message(), HasSubstr("node 'If_0' (If)"));
}

}  // namespace
}  // namespace kiln::engine
