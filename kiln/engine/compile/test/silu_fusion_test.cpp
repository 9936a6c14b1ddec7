// SiLU as exporters write it (x * sigmoid(x): a Sigmoid and a Mul both reading x) after a Conv,
// MatMul, instance or group normalization is fused as one Swish post-op: on oneDNN's kernels and on
// kiln's own loops, with the reference interpreter's results; spellings that are not x * sigmoid(x)
// stay as written.
#include <kiln/engine/compile/test/test_models.h>

namespace kiln::engine {
namespace {

using namespace test_models;  // NOLINT(google-build-using-namespace): test helpers

// x [1, 4, 6, 6] → Conv 3x3 (8) + bias → SiLU, sigmoid on the left; y1 → Conv 1x1 (16) → SiLU;
// v [3, 16] x a constant [16, 8] → SiLU, sigmoid on the right. Without `exact`: the last Mul
// squares the MatMul's result beside its Sigmoid, and the Sigmoids after the 1x1 Conv and the
// MatMul are also graph outputs.
ir::Model silu_model(bool exact) {
  ModelBuilder b(41);
  int x = b.input("x", {1, 4, 6, 6});
  int v = b.input("v", {3, 16});
  int w = b.weight("w", {8, 4, 3, 3}, 0.3f);
  int bias = b.weight("bias", {8});
  int w1 = b.weight("w1", {16, 8, 1, 1}, 0.3f);
  int m = b.weight("m", {16, 8});
  std::vector<ir::Dim> image = {1, 8, 6, 6}, wide = {1, 16, 6, 6};
  int c = b.value("c", image), s = b.value("s", image), y1 = b.value("y1", image);
  int c2 = b.value("c2", wide), s2 = b.value("s2", wide), y2 = b.value("y2", wide);
  int p = b.value("p", {3, 8}), sp = b.value("sp", {3, 8}), z = b.value("z", {3, 8});
  b.node("Conv", {x, w, bias}, {c}, {ints("pads", {1, 1, 1, 1}), ints("kernel_shape", {3, 3})});
  b.node("Sigmoid", {c}, {s});
  b.node("Mul", {s, c}, {y1});
  b.node("Conv", {y1, w1}, {c2}, {ints("kernel_shape", {1, 1})});
  b.node("Sigmoid", {c2}, {s2});
  b.node("Mul", {c2, s2}, {y2});
  b.node("MatMul", {v, m}, {p});
  b.node("Sigmoid", {p}, {sp});
  b.node("Mul", {p, exact ? sp : p}, {z});
  b.output(y2);
  b.output(z);
  if (!exact) {
    b.output(s2);
    b.output(sp);
  }
  return b.build();
}

int fused_count(const compile::CompiledFunction& f, const std::string& op) {
  int n = 0;
  for (const auto& entry : f.placement()) {
    for (const std::string& name : entry.fused) n += name.find("(" + op + ")") != std::string::npos;
  }
  return n;
}

TEST(Specialize, SiluIsFusedAsOneSwishPostOp) {
  const std::vector<std::vector<int64_t>> sizes = {{1, 4, 6, 6}, {3, 16}};
  CompileOptions onednn_only;
  onednn_only.small_ops_own_loops = false;
  for (const CompileOptions& options : {onednn_only, CompileOptions{}}) {
    SCOPED_TRACE(options.small_ops_own_loops ? "kiln's loops for small ops" : "oneDNN only");
    auto f = check_against_reference(silu_model(true), sizes, options);
    ASSERT_NE(f, nullptr);
    for (const auto& entry : f->placement()) {
      EXPECT_NE(entry.op, "Sigmoid") << "a Sigmoid left as a step of its own";
      EXPECT_NE(entry.op, "Mul") << "a Mul left as a step of its own";
    }
    EXPECT_EQ(fused_count(*f, "Sigmoid"), 3);
    EXPECT_EQ(fused_count(*f, "Mul"), 3);
    EXPECT_EQ(f->placement().size(), 3u);
  }
}

// x * x beside sigmoid(x), and a Sigmoid also returned: each stays as written, and the results
// are the graph's.
TEST(Specialize, WhatIsNotSiluIsNotFusedAsOne) {
  const std::vector<std::vector<int64_t>> sizes = {{1, 4, 6, 6}, {3, 16}};
  auto f = check_against_reference(silu_model(false), sizes, CompileOptions{});
  ASSERT_NE(f, nullptr);
  // Only the first Conv's SiLU fuses: the second's Sigmoid is a graph output, and the MatMul's
  // Mul squares p.
  EXPECT_EQ(fused_count(*f, "Sigmoid"), 1);
  int sigmoid_steps = 0;
  for (const auto& entry : f->placement()) sigmoid_steps += entry.op == "Sigmoid";
  EXPECT_EQ(sigmoid_steps, 2);
}

// x [2, 8, 5, 6] → GroupNormalization (4 groups) → SiLU → InstanceNormalization → Relu → + x:
// each normalization takes its activation; the residual Add stays a step (no residual after a
// normalization).
TEST(Specialize, ActivationsAfterInstanceAndGroupNormalizationAreFused) {
  ModelBuilder b(43);
  std::vector<ir::Dim> shape = {2, 8, 5, 6};
  int x = b.input("x", shape);
  int g = b.value("g", shape), s = b.value("s", shape), silu = b.value("silu", shape);
  int n = b.value("n", shape), r = b.value("r", shape), y = b.value("y", shape);
  b.node("GroupNormalization", {x, b.weight("gs", {8}), b.weight("gb", {8})}, {g},
         {int_attr("num_groups", 4), ir::Attribute{"epsilon", 1e-3}});
  b.node("Sigmoid", {g}, {s});
  b.node("Mul", {g, s}, {silu});
  b.node("InstanceNormalization", {silu, b.weight("is", {8}), b.weight("ib", {8})}, {n});
  b.node("Relu", {n}, {r});
  b.node("Add", {r, x}, {y});
  b.output(y);
  const ir::Model model = b.build();
  for (bool fuse : {true, false}) {
    SCOPED_TRACE(fuse ? "fused" : "not fused");
    CompileOptions options;
    options.fuse = fuse;
    auto f = check_against_reference(model, {{2, 8, 5, 6}}, options);
    ASSERT_NE(f, nullptr);
    std::vector<std::string> ops;
    for (const auto& entry : f->placement()) ops.push_back(entry.op);
    if (fuse) {
      EXPECT_EQ(ops,
                (std::vector<std::string>{"GroupNormalization", "InstanceNormalization", "Add"}));
      EXPECT_EQ(fused_count(*f, "Sigmoid"), 1);
      EXPECT_EQ(fused_count(*f, "Mul"), 1);
      EXPECT_EQ(fused_count(*f, "Relu"), 1);
      EXPECT_EQ(f->placement()[0].device, "cpu:kiln");
      EXPECT_EQ(f->placement()[1].device, "cpu:kiln");
    } else {
      EXPECT_EQ(ops.size(), 6u);
    }
  }
}

}  // namespace
}  // namespace kiln::engine
