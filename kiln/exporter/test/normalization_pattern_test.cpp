// engine::passes normalization patterns through the importer: layer normalization in each
// spelling exporters write becomes one LayerNormalization, a Conv's inference
// BatchNormalization is folded into its weights; results match the graph as written (run on
// the reference kernels); what does not match exactly is left as it is.
#include <kiln/engine/package/package.h>
#include <kiln/exporter/export.h>
#include <kiln/exporter/onnx/onnx_importer.h>
#include <kiln/exporter/test/onnx_model_builder.h>
#include <kiln/exporter/test/portable_run.h>
#include <kiln/runtime/core/data_loader.h>
#include <kiln/runtime/executor/program.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>

namespace kiln::exporter {
namespace {

using test::OnnxModelBuilder;
constexpr int kF32 = onnx::TensorProto::FLOAT;

std::vector<float> seeded(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& f : v) f = dist(rng);
  return v;
}

size_t numel(const std::vector<int64_t>& sizes) {
  size_t n = 1;
  for (int64_t s : sizes) n *= static_cast<size_t>(s);
  return n;
}

std::vector<float> run_model(const engine::ir::Model& model, const std::vector<int64_t>& sizes,
                             std::vector<float> x) {
  return test::run_portable(model, sizes, std::move(x));
}

std::vector<std::string> ops(const engine::ir::Model& model) { return test::op_names(model); }

bool has_op(const engine::ir::Model& model, const std::string& op) {
  auto all = ops(model);
  return std::find(all.begin(), all.end(), op) != all.end();
}

// The model imported with and without the rewrites, run on the same seeded input: returns the
// rewritten model after checking the outputs agree.
engine::ir::Model expect_same_results(const std::string& bytes, const std::vector<int64_t>& sizes,
                                      double tolerance = 1e-5) {
  auto rewritten = import_onnx(bytes, "m.onnx");
  ImportOptions plain;
  plain.rewrite_patterns = false;
  auto original = import_onnx(bytes, "m.onnx", plain);
  EXPECT_TRUE(rewritten.ok()) << rewritten.status();
  EXPECT_TRUE(original.ok()) << original.status();
  if (!rewritten.ok() || !original.ok()) return {};
  std::vector<float> x = seeded(numel(sizes), 7, -2.0f, 3.0f);
  std::vector<float> a = run_model(*rewritten, sizes, x), b = run_model(*original, sizes, x);
  EXPECT_EQ(a.size(), b.size());
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    EXPECT_NEAR(a[i], b[i], tolerance * (1.0 + std::fabs(b[i]))) << "element " << i;
  }
  return std::move(rewritten).get();
}

struct LayerNormSpelling {
  std::string label;
  bool mul_square = false;  // Mul(d, d) instead of Pow(d, 2)
  bool reciprocal = false;  // Mul(d, Reciprocal(std)) instead of Div(d, std)
  bool scale = true;
  bool bias = true;
  std::vector<int64_t> axes = {-1};
  bool reversed_sub = false;  // mean - x: the negated normalization
  bool d_is_output = false;   // the centred input is also a graph output
  bool eps_input = false;     // epsilon a graph input rather than a constant
};

// y = layer norm of x [2, 3, 8] over `axes`, spelled out as `s` says.
std::string layer_norm_model(const LayerNormSpelling& s) {
  OnnxModelBuilder b(13);  // (ReduceMean's axes as an input, opset 18: engine tests)
  b.input("x", kF32, {2, 3, 8});
  if (s.eps_input) b.input("eps", kF32, {});
  b.output("y", kF32, {2, 3, 8});
  if (s.d_is_output) b.output("d", kF32, {2, 3, 8});
  const std::vector<int64_t> normalized =
      s.axes.size() == 2 ? std::vector<int64_t>{3, 8} : std::vector<int64_t>{8};
  const size_t count = numel(normalized);
  b.initializer_f32("two", {}, {2.0f});
  if (!s.eps_input) b.initializer_f32("eps", {}, {1e-5f});
  b.initializer_f32("gamma", normalized, seeded(count, 3, 0.5f, 1.5f));
  b.initializer_f32("beta", normalized, seeded(count, 4));
  auto mean = [&](const std::string& in, const std::string& out) {
    auto& n = b.node("ReduceMean", {in}, {out});
    OnnxModelBuilder::ints_attribute(n, "axes", s.axes);
    OnnxModelBuilder::int_attribute(n, "keepdims", 1);
  };
  mean("x", "mean");
  if (s.reversed_sub) {
    b.node("Sub", {"mean", "x"}, {"d"});
  } else {
    b.node("Sub", {"x", "mean"}, {"d"});
  }
  if (s.mul_square) {
    b.node("Mul", {"d", "d"}, {"sq"});
  } else {
    b.node("Pow", {"d", "two"}, {"sq"});
  }
  mean("sq", "var");
  b.node("Add", {"var", "eps"}, {"ve"});
  b.node("Sqrt", {"ve"}, {"sd"});
  std::string current = "n";
  if (s.reciprocal) {
    b.node("Reciprocal", {"sd"}, {"r"});
    b.node("Mul", {"r", "d"}, {"n"});
  } else {
    b.node("Div", {"d", "sd"}, {"n"});
  }
  if (s.scale) {
    b.node("Mul", {"gamma", current}, {s.bias ? "g" : "y"});
    current = "g";
  }
  if (s.bias) {
    b.node("Add", {current, "beta"}, {"y"});
  } else if (!s.scale) {
    b.node("Identity", {"n"}, {"y"});
  }
  return b.bytes();
}

TEST(NormalizationPatterns, LayerNormInEachSpellingBecomesOneLayerNormalization) {
  std::vector<LayerNormSpelling> spellings = {
      {"pow and div"},
      {.label = "mul square", .mul_square = true},
      {.label = "reciprocal", .reciprocal = true},
      {.label = "no scale", .scale = false},
      {.label = "neither", .scale = false, .bias = false},
      {.label = "two trailing axes", .axes = {2, 1}},
      {.label = "positive axis", .axes = {2}},
  };
  for (const LayerNormSpelling& s : spellings) {
    SCOPED_TRACE(s.label);
    engine::ir::Model model = expect_same_results(layer_norm_model(s), {2, 3, 8});
    ASSERT_FALSE(model.functions.empty());
    std::vector<std::string> expected = {"LayerNormalization"};
    if (!s.scale && !s.bias) expected.push_back("Identity");
    EXPECT_EQ(ops(model), expected);
    const engine::ir::Node& norm = model.functions[0].nodes[0];
    const auto* axis = norm.attribute("axis");
    ASSERT_NE(axis, nullptr);
    EXPECT_EQ(std::get<int64_t>(axis->value), s.axes.size() == 2 ? 1 : 2);
    EXPECT_NEAR(std::get<double>(norm.attribute("epsilon")->value), 1e-5, 1e-12);
    EXPECT_EQ(norm.inputs.size(), s.bias ? 3u : 2u);
  }
}

TEST(NormalizationPatterns, LayerNormSpellingsThatDifferAreLeftAlone) {
  std::vector<LayerNormSpelling> spellings = {
      {.label = "leading axis", .axes = {1}},
      {.label = "mean minus x", .reversed_sub = true},
      {.label = "centred value read elsewhere", .d_is_output = true},
      {.label = "epsilon not a constant", .eps_input = true},
  };
  for (const LayerNormSpelling& s : spellings) {
    SCOPED_TRACE(s.label);
    ImportOptions plain;
    plain.rewrite_patterns = false;
    auto original = import_onnx(layer_norm_model(s), "m.onnx", plain);
    auto model = import_onnx(layer_norm_model(s), "m.onnx");
    ASSERT_TRUE(model.ok() && original.ok()) << model.status();
    EXPECT_FALSE(has_op(*model, "LayerNormalization"));
    EXPECT_EQ(ops(*model).size(), ops(*original).size());
  }
}

struct ConvBn {
  bool conv_bias = true;
  bool conv_read_elsewhere = false;
  bool mean_input = false;  // the running mean a graph input, not a constant
};

// x [1, 3, 6, 6] → Conv(4, 3x3, pads 1) → BatchNormalization(epsilon 1e-3) → Relu → y.
std::string conv_bn_model(const ConvBn& s) {
  OnnxModelBuilder b(13);
  b.input("x", kF32, {1, 3, 6, 6});
  if (s.mean_input) b.input("mean", kF32, {4});
  b.output("y", kF32, {1, 4, 6, 6});
  if (s.conv_read_elsewhere) b.output("c", kF32, {1, 4, 6, 6});
  b.initializer_f32("w", {4, 3, 3, 3}, seeded(108, 11));
  b.initializer_f32("b", {4}, seeded(4, 12));
  b.initializer_f32("scale", {4}, seeded(4, 13, 0.5f, 2.0f));
  b.initializer_f32("shift", {4}, seeded(4, 14));
  if (!s.mean_input) b.initializer_f32("mean", {4}, seeded(4, 15));
  b.initializer_f32("var", {4}, seeded(4, 16, 0.1f, 3.0f));
  std::vector<std::string> conv_inputs = {"x", "w"};
  if (s.conv_bias) conv_inputs.push_back("b");
  auto& conv = b.node("Conv", conv_inputs, {"c"});
  OnnxModelBuilder::ints_attribute(conv, "pads", {1, 1, 1, 1});
  OnnxModelBuilder::ints_attribute(conv, "kernel_shape", {3, 3});
  auto& bn = b.node("BatchNormalization", {"c", "scale", "shift", "mean", "var"}, {"n"});
  OnnxModelBuilder::float_attribute(bn, "epsilon", 1e-3f);
  b.node("Relu", {"n"}, {"y"});
  return b.bytes();
}

TEST(NormalizationPatterns, ConvBatchNormalizationIsFoldedIntoTheConvWeights) {
  for (bool conv_bias : {true, false}) {
    SCOPED_TRACE(conv_bias ? "conv with a bias" : "conv without a bias");
    engine::ir::Model model =
        expect_same_results(conv_bn_model({.conv_bias = conv_bias}), {1, 3, 6, 6}, 1e-5);
    ASSERT_FALSE(model.functions.empty());
    EXPECT_EQ(ops(model), (std::vector<std::string>{"Conv", "Relu"}));
    const engine::ir::Node& conv = model.functions[0].nodes[0];
    ASSERT_EQ(conv.inputs.size(), 3u);
    EXPECT_GE(conv.inputs[2], 0);
  }
}

TEST(NormalizationPatterns, ConvBatchNormalizationThatCannotFoldIsLeftAlone) {
  for (ConvBn s : {ConvBn{.conv_read_elsewhere = true}, ConvBn{.mean_input = true}}) {
    auto model = import_onnx(conv_bn_model(s), "m.onnx");
    ASSERT_TRUE(model.ok()) << model.status();
    EXPECT_EQ(ops(*model), (std::vector<std::string>{"Conv", "BatchNormalization", "Relu"}));
  }
}

// The ops of the one function, and the number of weights, of the model package a kiln export of
// `onnx_bytes` (with or without the rewrites) holds.
std::vector<std::string> exported_package(const std::string& onnx_bytes, bool rewrite,
                                          size_t& num_weights) {
  const std::filesystem::path file =
      std::filesystem::path(::testing::TempDir()) / "kiln_normalization_export.onnx";
  std::ofstream(file, std::ios::binary) << onnx_bytes;
  ExportOptions options;
  options.rewrite_patterns = rewrite;
  auto bytes = export_program({{"forward", file.string(), {}, {}, {}}}, options);
  std::filesystem::remove(file);
  EXPECT_TRUE(bytes.ok()) << bytes.status();
  if (!bytes.ok()) return {};
  auto program = runtime::Program::load(
      std::make_shared<runtime::BufferDataLoader>(bytes->data(), bytes->size()));
  EXPECT_TRUE(program.ok()) << program.status();
  if (!program.ok() || (*program)->named_data().keys().size() != 1) return {};
  auto data = (*program)->named_data().get_data((*program)->named_data().keys()[0]);
  EXPECT_TRUE(data.ok());
  auto view = engine::package::PackageView::open(
      runtime::Span<const uint8_t>(static_cast<const uint8_t*>(data->data()), data->size()));
  EXPECT_TRUE(view.ok()) << view.status();
  if (!view.ok()) return {};
  num_weights = view->num_weights();
  std::vector<std::string> out;
  for (const auto& node : view->model().functions[0].nodes) out.push_back(node.op);
  return out;
}

TEST(NormalizationPatterns, ExportsFoldedWeightsOnlyAndKeepsTheGraphAsWrittenWhenAsked) {
  const std::string onnx = conv_bn_model({});
  size_t folded_weights = 0, written_weights = 0;
  EXPECT_EQ(exported_package(onnx, true, folded_weights),
            (std::vector<std::string>{"Conv", "Relu"}));
  EXPECT_EQ(folded_weights, 2u);  // the folded W and b; not the originals nor the statistics
  EXPECT_EQ(exported_package(onnx, false, written_weights),
            (std::vector<std::string>{"Conv", "BatchNormalization", "Relu"}));
  EXPECT_EQ(written_weights, 6u);
}

}  // namespace
}  // namespace kiln::exporter
