// engine::passes::rewrite_layer_norm's instance normalization through the importer: a layer
// normalization spelled out over the spatial axes of [N, C, H, W] and followed by a Mul by and
// an Add of per-channel constants (as TensorFlow's converters and style-transfer exports write
// instance normalization) becomes one InstanceNormalization; results match the graph as
// written (reference kernels); steps that are not per channel keep the layer normalization.
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

struct InstanceSpelling {
  std::string label;
  std::vector<int64_t> scale = {4, 1, 1};  // empty: no Mul
  std::vector<int64_t> bias = {4, 1, 1};   // empty: no Add
  bool constant_first = false;             // Mul(gamma, n), Add(beta, g)
};

// y = (x - mean) / sqrt(var + eps) over axes [2, 3] of x [2, 4, 5, 6], then the steps.
std::string instance_norm_model(const InstanceSpelling& s) {
  OnnxModelBuilder b(13);
  b.input("x", kF32, {2, 4, 5, 6});
  b.output("y", kF32, {2, 4, 5, 6});
  b.initializer_f32("eps", {}, {1e-3f});
  auto mean = [&](const std::string& in, const std::string& out) {
    auto& n = b.node("ReduceMean", {in}, {out});
    OnnxModelBuilder::ints_attribute(n, "axes", {2, 3});
    OnnxModelBuilder::int_attribute(n, "keepdims", 1);
  };
  mean("x", "mean");
  b.node("Sub", {"x", "mean"}, {"d"});
  b.node("Mul", {"d", "d"}, {"sq"});
  mean("sq", "var");
  b.node("Add", {"var", "eps"}, {"ve"});
  b.node("Sqrt", {"ve"}, {"sd"});
  b.node("Div", {"d", "sd"}, {"n"});
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

TEST(InstanceNormPattern, SpatialNormalizationWithPerChannelStepsBecomesInstanceNormalization) {
  const std::vector<InstanceSpelling> spellings = {
      {"scale and bias [C, 1, 1]"},
      {.label = "constants first, [1, C, 1, 1]",
       .scale = {1, 4, 1, 1},
       .bias = {1, 4, 1, 1},
       .constant_first = true},
      {.label = "scale only", .bias = {}},
      {.label = "bias only", .scale = {}},
      {.label = "a scalar scale", .scale = {1}},
  };
  for (const InstanceSpelling& s : spellings) {
    SCOPED_TRACE(s.label);
    engine::ir::Model model = expect_same_results(instance_norm_model(s), {2, 4, 5, 6});
    ASSERT_FALSE(model.functions.empty());
    EXPECT_EQ(test::op_names(model), std::vector<std::string>{"InstanceNormalization"});
    const engine::ir::Node& norm = model.functions[0].nodes[0];
    ASSERT_EQ(norm.inputs.size(), 3u);
    EXPECT_NEAR(std::get<double>(norm.attribute("epsilon")->value), 1e-3, 1e-9);
    for (int param : {norm.inputs[1], norm.inputs[2]}) {
      const int weight = model.functions[0].values[static_cast<size_t>(param)].weight;
      ASSERT_GE(weight, 0);
      EXPECT_EQ(model.weights[static_cast<size_t>(weight)].sizes, std::vector<int64_t>{4});
    }
  }
}

TEST(InstanceNormPattern, StepsThatAreNotPerChannelKeepTheLayerNormalization) {
  struct Case {
    InstanceSpelling spelling;
    std::vector<std::string> ops;
  };
  const std::vector<Case> cases = {
      // A scale of the normalized shape: the layer normalization takes it.
      {{.label = "spatial scale", .scale = {5, 6}, .bias = {}}, {"LayerNormalization"}},
      // A scale over the batch: per (n) rather than per channel.
      {{.label = "batch scale", .scale = {2, 1, 1, 1}, .bias = {}}, {"LayerNormalization", "Mul"}},
      // No step at all: a layer normalization over the spatial axes.
      {{.label = "no steps", .scale = {}, .bias = {}}, {"LayerNormalization", "Identity"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.spelling.label);
    EXPECT_EQ(test::op_names(expect_same_results(instance_norm_model(c.spelling), {2, 4, 5, 6})),
              c.ops);
  }
}

}  // namespace
}  // namespace kiln::exporter
