// engine::passes::rewrite_group_norm through the importer: PyTorch's GroupNorm export before
// opset 18 (Reshape to [N, G, -1], InstanceNormalization, Reshape back, Mul, Add) becomes one
// GroupNormalization; results match the graph as written (reference kernels); what is not a
// group normalization is left alone.
#include <kiln/exporter/onnx/onnx_importer.h>
#include <kiln/exporter/test/onnx_model_builder.h>
#include <kiln/exporter/test/portable_run.h>

#include <gtest/gtest.h>

namespace kiln::exporter {
namespace {

using test::expect_same_results;
using test::OnnxModelBuilder;
using test::seeded;
constexpr int kF32 = onnx::TensorProto::FLOAT;
constexpr int kI64 = onnx::TensorProto::INT64;

struct GroupSpelling {
  std::string label;
  std::vector<int64_t> split = {0, 4, -1};  // the Reshape into groups
  std::vector<int64_t> restore = {};        // empty: Reshape(i, Shape(x)); else a constant
  bool unit_instance = true;                // the InstanceNormalization's s = 1, b = 0
  std::vector<int64_t> scale = {8, 1, 1};   // empty: no Mul
  std::vector<int64_t> bias = {8, 1, 1};    // empty: no Add
  bool constant_first = false;              // Mul(gamma, y), Add(beta, g)
  std::vector<int64_t> out = {2, 8, 5, 6};  // y's shape
  bool symbolic_batch = false;              // x [N, 8, 5, 6]: Shape(x) stays a node
};

// x [2, 8, 5, 6] in 4 groups, as PyTorch's exporter writes nn.GroupNorm(4, 8).
std::string group_norm_model(const GroupSpelling& s) {
  OnnxModelBuilder b(13);
  const std::vector<std::string> batch =
      s.symbolic_batch ? std::vector<std::string>{"N"} : std::vector<std::string>{};
  b.input("x", kF32, {2, 8, 5, 6}, batch);
  b.output("y", kF32, s.out, batch);
  b.initializer_i64("split", {3}, s.split);
  b.node("Reshape", {"x", "split"}, {"r"});
  b.initializer_f32("s", {4},
                    s.unit_instance ? std::vector<float>(4, 1.0f) : seeded(4, 3, 0.5f, 2.0f));
  b.initializer_f32("b", {4},
                    s.unit_instance ? std::vector<float>(4, 0.0f) : seeded(4, 4, -1.0f, 1.0f));
  auto& norm = b.node("InstanceNormalization", {"r", "s", "b"}, {"i"});
  OnnxModelBuilder::float_attribute(norm, "epsilon", 1e-3f);
  if (s.restore.empty()) {
    b.node("Shape", {"x"}, {"shape"});
  } else {
    b.initializer_i64("shape", {static_cast<int64_t>(s.restore.size())}, s.restore);
  }
  b.node("Reshape", {"i", "shape"}, {"n"});
  std::string current = "n";
  auto step = [&](const char* op, const std::string& name, const std::vector<int64_t>& sizes,
                  uint32_t seed, const std::string& out) {
    b.initializer_f32(name, sizes, seeded(test::numel(sizes), seed, 0.5f, 2.0f));
    b.node(op,
           s.constant_first ? std::vector<std::string>{name, current}
                            : std::vector<std::string>{current, name},
           {out});
    current = out;
  };
  if (!s.scale.empty()) step("Mul", "gamma", s.scale, 5, s.bias.empty() ? "y" : "g");
  if (!s.bias.empty()) step("Add", "beta", s.bias, 6, "y");
  if (current != "y") b.node("Identity", {current}, {"y"});
  return b.bytes();
}

TEST(GroupNormPattern, PyTorchsGroupNormBecomesGroupNormalization) {
  const std::vector<GroupSpelling> spellings = {
      {"as PyTorch writes it"},
      {.label = "a symbolic batch: back by Shape(x)", .symbolic_batch = true},
      {.label = "a constant shape back", .restore = {2, 8, 5, 6}},
      {.label = "a constant shape back, batch copied", .restore = {0, 8, -1, 6}},
      {.label = "the static batch and rest", .split = {2, 4, 60}},
      {.label = "a scale and bias in the instance normalization", .unit_instance = false},
      {.label = "constants first, [1, C, 1, 1]",
       .scale = {1, 8, 1, 1},
       .bias = {1, 8, 1, 1},
       .constant_first = true},
      {.label = "scale only", .bias = {}},
      {.label = "a scalar scale, no bias", .scale = {1}, .bias = {}},
  };
  for (const GroupSpelling& s : spellings) {
    SCOPED_TRACE(s.label);
    engine::ir::Model model = expect_same_results(group_norm_model(s), {2, 8, 5, 6});
    ASSERT_FALSE(model.functions.empty());
    EXPECT_EQ(test::op_names(model), std::vector<std::string>{"GroupNormalization"});
    const engine::ir::Node& norm = model.functions[0].nodes[0];
    ASSERT_EQ(norm.inputs.size(), 3u);
    EXPECT_NEAR(std::get<double>(norm.attribute("epsilon")->value), 1e-3, 1e-9);
    EXPECT_EQ(std::get<int64_t>(norm.attribute("num_groups")->value), 4);
    for (int param : {norm.inputs[1], norm.inputs[2]}) {
      const int weight = model.functions[0].values[static_cast<size_t>(param)].weight;
      ASSERT_GE(weight, 0);
      EXPECT_EQ(model.weights[static_cast<size_t>(weight)].sizes, std::vector<int64_t>{8});
    }
  }
}

TEST(GroupNormPattern, WhatIsNotAGroupNormalizationIsLeftAlone) {
  struct Case {
    GroupSpelling spelling;
    std::vector<std::string> ops;
  };
  const std::vector<Case> cases = {
      // One image of both samples: the statistics would mix the batch. (Shape(x) of a static x
      // is folded into a constant.)
      {{.label = "samples merged", .split = {1, 4, -1}},
       {"Reshape", "InstanceNormalization", "Reshape", "Mul", "Add"}},
      // Back to another shape than x's.
      {{.label = "another shape back",
        .restore = {2, 8, 6, 5},
        .scale = {},
        .bias = {},
        .out = {2, 8, 6, 5}},
       {"Reshape", "InstanceNormalization", "Reshape", "Identity"}},
      // A spatial scale: a group normalization, then the Mul as written.
      {{.label = "spatial scale", .scale = {5, 6}, .bias = {}}, {"GroupNormalization", "Mul"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.spelling.label);
    EXPECT_EQ(test::op_names(expect_same_results(group_norm_model(c.spelling), {2, 8, 5, 6})),
              c.ops);
  }
}

}  // namespace
}  // namespace kiln::exporter
