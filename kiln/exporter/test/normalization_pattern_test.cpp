// engine::passes normalization patterns through the importer: layer normalization in each
// spelling exporters write becomes one LayerNormalization; results match the graph as written
// (run on the reference kernels); what does not match exactly is left as it is.
#include <kiln/exporter/onnx/onnx_importer.h>
#include <kiln/exporter/test/onnx_model_builder.h>
#include <kiln/exporter/test/portable_run.h>

#include <gtest/gtest.h>

#include <algorithm>

namespace kiln::exporter {
namespace {

using test::OnnxModelBuilder;
constexpr int kF32 = onnx::TensorProto::FLOAT;

using test::expect_same_results;
using test::numel;
using test::seeded;

std::vector<std::string> ops(const engine::ir::Model& model) { return test::op_names(model); }

bool has_op(const engine::ir::Model& model, const std::string& op) {
  auto all = ops(model);
  return std::find(all.begin(), all.end(), op) != all.end();
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

// Not a layer norm; where the centred value d is whole and the rest is d / sqrt(mean(d^2) +
// eps), that part is an RMS normalization of d, and is rewritten as one (exactly).
TEST(NormalizationPatterns, LayerNormSpellingsThatDifferAreLeftAlone) {
  struct Case {
    LayerNormSpelling spelling;
    bool rms_of_d;
  };
  std::vector<Case> cases = {
      {{.label = "leading axis", .axes = {1}}, false},
      {{.label = "mean minus x", .reversed_sub = true}, true},
      {{.label = "centred value read elsewhere", .d_is_output = true}, true},
      {{.label = "epsilon not a constant", .eps_input = true}, false},
  };
  for (const auto& [s, rms_of_d] : cases) {
    SCOPED_TRACE(s.label);
    ImportOptions plain;
    plain.rewrite_patterns = false;
    auto original = import_onnx(layer_norm_model(s), "m.onnx", plain);
    ASSERT_TRUE(original.ok()) << original.status();
    engine::ir::Model model = s.eps_input ? std::move(*import_onnx(layer_norm_model(s), "m.onnx"))
                                          : expect_same_results(layer_norm_model(s), {2, 3, 8});
    EXPECT_FALSE(has_op(model, "LayerNormalization"));
    EXPECT_EQ(has_op(model, "RMSNormalization"), rms_of_d);
    // The RMS normalization takes the square, the mean, the Add, the Sqrt, the Div and the
    // scale's Mul: six ops become one.
    EXPECT_EQ(ops(model).size(), ops(*original).size() - (rms_of_d ? 5 : 0));
  }
}

struct RmsNormSpelling {
  std::string label;
  bool mul_square = false;             // Mul(x, x) instead of Pow(x, 2)
  std::string inverse = "reciprocal";  // "reciprocal", "one over" (Div(1, rms)) or "divide"
  bool inverse_first = false;          // Mul(inverse, x) rather than Mul(x, inverse)
  std::string scale = "normalized";    // "normalized", "none" or "scalar" (a [1] constant)
  std::vector<int64_t> axes = {-1};
  bool x_read_elsewhere = true;  // the residual stream: x also goes to an Add after the norm
  bool rms_is_output = false;    // the root mean square is also a graph output
  bool eps_input = false;        // epsilon a graph input rather than a constant
};

// y = RMS norm of x [2, 3, 8] over `axes` (+ x when it is read elsewhere), spelled out as `s`
// says.
std::string rms_norm_model(const RmsNormSpelling& s) {
  OnnxModelBuilder b(14);
  b.input("x", kF32, {2, 3, 8});
  if (s.eps_input) b.input("eps", kF32, {});
  b.output("y", kF32, {2, 3, 8});
  if (s.rms_is_output) b.output("rms", kF32, {2, 3, 1});
  const std::vector<int64_t> normalized =
      s.axes.size() == 2 ? std::vector<int64_t>{3, 8} : std::vector<int64_t>{8};
  b.initializer_f32("two", {}, {2.0f});
  b.initializer_f32("one", {}, {1.0f});
  if (!s.eps_input) b.initializer_f32("eps", {}, {1e-6f});
  if (s.scale == "scalar") {
    b.initializer_f32("w", {1}, {1.5f});
  } else {
    b.initializer_f32("w", normalized, seeded(numel(normalized), 3, 0.5f, 1.5f));
  }
  if (s.mul_square) {
    b.node("Mul", {"x", "x"}, {"sq"});
  } else {
    b.node("Pow", {"x", "two"}, {"sq"});
  }
  auto& mean = b.node("ReduceMean", {"sq"}, {"ms"});
  OnnxModelBuilder::ints_attribute(mean, "axes", s.axes);
  b.node("Add", {"ms", "eps"}, {"ve"});
  b.node("Sqrt", {"ve"}, {"rms"});
  if (s.inverse == "divide") {
    b.node("Div", {"x", "rms"}, {"n"});
  } else {
    if (s.inverse == "reciprocal") {
      b.node("Reciprocal", {"rms"}, {"r"});
    } else {
      b.node("Div", {"one", "rms"}, {"r"});
    }
    b.node(
        "Mul",
        s.inverse_first ? std::vector<std::string>{"r", "x"} : std::vector<std::string>{"x", "r"},
        {"n"});
  }
  std::string current = "n";
  if (s.scale != "none") {
    b.node("Mul", {"w", "n"}, {"g"});
    current = "g";
  }
  if (s.x_read_elsewhere) {
    b.node("Add", {current, "x"}, {"y"});
  } else {
    b.node("Identity", {current}, {"y"});
  }
  return b.bytes();
}

TEST(NormalizationPatterns, RmsNormInEachSpellingBecomesOneRmsNormalization) {
  std::vector<RmsNormSpelling> spellings = {
      {"pow, reciprocal, scale"},
      {.label = "mul square, one over, reversed",
       .mul_square = true,
       .inverse = "one over",
       .inverse_first = true},
      {.label = "divide, no scale", .inverse = "divide", .scale = "none"},
      {.label = "two trailing axes", .axes = {2, 1}},
      {.label = "x read by the pattern only", .x_read_elsewhere = false},
      {.label = "a scalar scale stays a Mul", .scale = "scalar"},
  };
  for (const RmsNormSpelling& s : spellings) {
    SCOPED_TRACE(s.label);
    engine::ir::Model model = expect_same_results(rms_norm_model(s), {2, 3, 8});
    ASSERT_FALSE(model.functions.empty());
    std::vector<std::string> expected = {"RMSNormalization"};
    if (s.scale == "scalar") expected.push_back("Mul");
    expected.push_back(s.x_read_elsewhere ? "Add" : "Identity");
    EXPECT_EQ(ops(model), expected);
    const engine::ir::Node& norm = model.functions[0].nodes[0];
    EXPECT_EQ(std::get<int64_t>(norm.attribute("axis")->value), s.axes.size() == 2 ? 1 : 2);
    EXPECT_NEAR(std::get<double>(norm.attribute("epsilon")->value), 1e-6, 1e-12);
    ASSERT_EQ(norm.inputs.size(), 2u);
  }
}

TEST(NormalizationPatterns, RmsNormSpellingsThatDifferAreLeftAlone) {
  std::vector<RmsNormSpelling> spellings = {
      {.label = "leading axis", .axes = {1}},
      {.label = "root mean square read elsewhere", .rms_is_output = true},
      {.label = "epsilon not a constant", .eps_input = true},
  };
  for (const RmsNormSpelling& s : spellings) {
    SCOPED_TRACE(s.label);
    ImportOptions plain;
    plain.rewrite_patterns = false;
    auto original = import_onnx(rms_norm_model(s), "m.onnx", plain);
    auto model = import_onnx(rms_norm_model(s), "m.onnx");
    ASSERT_TRUE(model.ok() && original.ok()) << model.status();
    EXPECT_FALSE(has_op(*model, "RMSNormalization"));
    // Only the square may change (Pow(x, 2) becomes Mul(x, x)).
    EXPECT_EQ(ops(*model).size(), ops(*original).size());
  }
}

// PyTorch's attention splits heads with a Reshape to a computed shape, which ONNX's shape
// inference leaves without a rank, and with it everything after. The importer completes the
// ranks (passes/rank_completion.h), so the layer norm after the head merge still matches.
std::string layer_norm_after_computed_reshape() {
  OnnxModelBuilder b(14);
  b.input("x", kF32, {2, 3, 8}, {"", "seq"});  // a free length keeps the Shape from folding
  b.output("y", kF32, {2, 3, 8}, {"", "seq"});
  b.initializer_f32("w", {8, 8}, seeded(64, 5));
  b.initializer_f32("two", {}, {2.0f});
  b.initializer_f32("eps", {}, {1e-5f});
  b.initializer_f32("gamma", {8}, seeded(8, 3, 0.5f, 1.5f));
  b.initializer_f32("beta", {8}, seeded(8, 4));
  b.node("Shape", {"x"}, {"shape"});
  b.node("Reshape", {"x", "shape"}, {"r"});
  b.node("MatMul", {"r", "w"}, {"x2"});
  auto mean = [&](const std::string& in, const std::string& out) {
    auto& n = b.node("ReduceMean", {in}, {out});
    OnnxModelBuilder::ints_attribute(n, "axes", {-1});
  };
  mean("x2", "mean");
  b.node("Sub", {"x2", "mean"}, {"d"});
  b.node("Pow", {"d", "two"}, {"sq"});
  mean("sq", "var");
  b.node("Add", {"var", "eps"}, {"ve"});
  b.node("Sqrt", {"ve"}, {"sd"});
  b.node("Div", {"d", "sd"}, {"n"});
  b.node("Mul", {"n", "gamma"}, {"g"});
  b.node("Add", {"g", "beta"}, {"y"});
  return b.bytes();
}

TEST(NormalizationPatterns, LayerNormAfterAReshapeToAComputedShapeIsRewritten) {
  ImportOptions plain;
  plain.rewrite_patterns = false;
  auto written = import_onnx(layer_norm_after_computed_reshape(), "m.onnx", plain);
  ASSERT_TRUE(written.ok()) << written.status();
  // The MatMul's result: the Reshape's rank with B's columns, where ONNX gave no shape.
  const engine::ir::Graph& g = written->functions[0];
  const engine::ir::TensorType& x2 = g.values[static_cast<size_t>(g.find_value("x2"))].type;
  ASSERT_TRUE(x2.rank_known) << x2.to_string();
  ASSERT_EQ(x2.shape.size(), 3u);
  EXPECT_EQ(x2.shape[2], engine::ir::Dim(8));

  engine::ir::Model model = expect_same_results(layer_norm_after_computed_reshape(), {2, 3, 8});
  ASSERT_FALSE(model.functions.empty());
  EXPECT_EQ(ops(model),
            (std::vector<std::string>{"Shape", "Reshape", "MatMul", "LayerNormalization"}));
}

}  // namespace
}  // namespace kiln::exporter
