// engine::passes::fold_conv_affine through the importer: a Conv's inference BatchNormalization
// and its Mul, Div, Add and Sub by per-channel constants are folded into its weights and bias,
// with the results of the graph as written (reference kernels); steps that are not
// per-channel affine maps of the Conv's output stop the chain there.
#include <kiln/engine/package/package.h>
#include <kiln/exporter/export.h>
#include <kiln/exporter/onnx/onnx_importer.h>
#include <kiln/exporter/test/onnx_model_builder.h>
#include <kiln/exporter/test/portable_run.h>
#include <kiln/runtime/core/data_loader.h>
#include <kiln/runtime/executor/program.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace kiln::exporter {
namespace {

using test::expect_same_results;
using test::OnnxModelBuilder;
using test::seeded;
constexpr int kF32 = onnx::TensorProto::FLOAT;

std::vector<std::string> ops(const engine::ir::Model& model) { return test::op_names(model); }

// The steps after the Conv, each reading the previous one's output.
enum class Step {
  BatchNorm,      // BatchNormalization(epsilon 1e-3), constant statistics
  BatchNormLive,  // the same with its mean a graph input
  MulChannels,    // Mul by a [4, 1, 1] constant
  AddChannels,    // Add of a [1, 4, 1, 1] constant, the constant first
  DivScalar,      // Div by a scalar
  SubChannels,    // Sub of a [4, 1, 1] constant
  MulSpatial,     // Mul by a [1, 1, 6, 6] constant: not per channel
  ConstantMinus,  // Sub(constant, y): not y's affine form
  DivByZero,      // Div by a per-channel constant holding a zero
};

struct ConvChain {
  std::vector<Step> steps;
  bool conv_bias = true;
  bool conv_read_elsewhere = false;
  bool transpose = false;  // a grouped ConvTranspose in place of the Conv
};

// The input shape of conv_chain_model.
std::vector<int64_t> chain_input(const ConvChain& s) {
  return s.transpose ? std::vector<int64_t>{1, 4, 3, 3} : std::vector<int64_t>{1, 3, 6, 6};
}

// x [1, 3, 6, 6] → Conv(4, 3x3, pads 1) → the steps → Relu → y; or, transposed,
// x [1, 4, 3, 3] → ConvTranspose(4, 3x3, group 2, strides 2, pads 1, output_padding 1).
std::string conv_chain_model(const ConvChain& s) {
  OnnxModelBuilder b(13);
  b.input("x", kF32, chain_input(s));
  b.output("y", kF32, {1, 4, 6, 6});
  if (s.conv_read_elsewhere) b.output("c", kF32, {1, 4, 6, 6});
  // ConvTranspose's W is [C, M / group, kH, kW]: each output channel reads its own column.
  b.initializer_f32(
      "w", s.transpose ? std::vector<int64_t>{4, 2, 3, 3} : std::vector<int64_t>{4, 3, 3, 3},
      seeded(s.transpose ? 72 : 108, 11));
  b.initializer_f32("b", {4}, seeded(4, 12));
  std::vector<std::string> conv_inputs = {"x", "w"};
  if (s.conv_bias) conv_inputs.push_back("b");
  auto& conv = b.node(s.transpose ? "ConvTranspose" : "Conv", conv_inputs, {"c"});
  OnnxModelBuilder::ints_attribute(conv, "pads", {1, 1, 1, 1});
  OnnxModelBuilder::ints_attribute(conv, "kernel_shape", {3, 3});
  if (s.transpose) {
    OnnxModelBuilder::ints_attribute(conv, "strides", {2, 2});
    OnnxModelBuilder::ints_attribute(conv, "output_padding", {1, 1});
    OnnxModelBuilder::int_attribute(conv, "group", 2);
  }
  std::string current = "c";
  for (size_t i = 0; i < s.steps.size(); ++i) {
    const std::string k = std::to_string(i), out = "s" + k;
    switch (s.steps[i]) {
      case Step::BatchNorm:
      case Step::BatchNormLive: {
        b.initializer_f32("scale" + k, {4}, seeded(4, 13, 0.5f, 2.0f));
        b.initializer_f32("shift" + k, {4}, seeded(4, 14));
        if (s.steps[i] == Step::BatchNormLive) {
          b.input("mean" + k, kF32, {4});
        } else {
          b.initializer_f32("mean" + k, {4}, seeded(4, 15));
        }
        b.initializer_f32("var" + k, {4}, seeded(4, 16, 0.1f, 3.0f));
        auto& bn = b.node("BatchNormalization",
                          {current, "scale" + k, "shift" + k, "mean" + k, "var" + k}, {out});
        OnnxModelBuilder::float_attribute(bn, "epsilon", 1e-3f);
        break;
      }
      case Step::MulChannels:
        b.initializer_f32("t" + k, {4, 1, 1}, seeded(4, 20, 0.5f, 2.0f));
        b.node("Mul", {current, "t" + k}, {out});
        break;
      case Step::AddChannels:
        b.initializer_f32("t" + k, {1, 4, 1, 1}, seeded(4, 21));
        b.node("Add", {"t" + k, current}, {out});
        break;
      case Step::DivScalar:
        b.initializer_f32("t" + k, {}, {0.75f});
        b.node("Div", {current, "t" + k}, {out});
        break;
      case Step::SubChannels:
        b.initializer_f32("t" + k, {4, 1, 1}, seeded(4, 22));
        b.node("Sub", {current, "t" + k}, {out});
        break;
      case Step::MulSpatial:
        b.initializer_f32("t" + k, {1, 1, 6, 6}, seeded(36, 23));
        b.node("Mul", {current, "t" + k}, {out});
        break;
      case Step::ConstantMinus:
        b.initializer_f32("t" + k, {4, 1, 1}, seeded(4, 24));
        b.node("Sub", {"t" + k, current}, {out});
        break;
      case Step::DivByZero:
        b.initializer_f32("t" + k, {4, 1, 1}, {1.0f, 2.0f, 0.0f, 4.0f});
        b.node("Div", {current, "t" + k}, {out});
        break;
    }
    current = out;
  }
  b.node("Relu", {current}, {"y"});
  return b.bytes();
}

TEST(ConvFolding, AffineStepsAfterAConvAreFoldedIntoItsWeights) {
  const std::vector<ConvChain> chains = {
      {{Step::BatchNorm}},
      {{Step::BatchNorm}, /*conv_bias=*/false},
      {{Step::MulChannels, Step::AddChannels}},
      {{Step::DivScalar, Step::SubChannels, Step::BatchNorm}, false},
      {{Step::BatchNorm, Step::MulChannels, Step::AddChannels}},
  };
  for (size_t i = 0; i < chains.size(); ++i) {
    SCOPED_TRACE("chain " + std::to_string(i));
    engine::ir::Model model = expect_same_results(conv_chain_model(chains[i]), {1, 3, 6, 6});
    ASSERT_FALSE(model.functions.empty());
    EXPECT_EQ(ops(model), (std::vector<std::string>{"Conv", "Relu"}));
    const engine::ir::Node& conv = model.functions[0].nodes[0];
    ASSERT_EQ(conv.inputs.size(), 3u);
    EXPECT_GE(conv.inputs[2], 0);
  }
}

TEST(ConvFolding, AffineStepsAfterAGroupedConvTransposeAreFoldedIntoItsColumns) {
  // W [C, M / group, ...]: a per-channel factor scales a column of each group's rows, so a
  // folding that scaled rows (as for a Conv) would give other results.
  const std::vector<ConvChain> chains = {
      {{Step::BatchNorm}, true, false, /*transpose=*/true},
      {{Step::BatchNorm}, /*conv_bias=*/false, false, true},
      {{Step::MulChannels, Step::AddChannels}, true, false, true},
      {{Step::DivScalar, Step::SubChannels, Step::BatchNorm}, false, false, true},
  };
  for (size_t i = 0; i < chains.size(); ++i) {
    SCOPED_TRACE("chain " + std::to_string(i));
    engine::ir::Model model =
        expect_same_results(conv_chain_model(chains[i]), chain_input(chains[i]));
    ASSERT_FALSE(model.functions.empty());
    EXPECT_EQ(ops(model), (std::vector<std::string>{"ConvTranspose", "Relu"}));
    const engine::ir::Node& conv = model.functions[0].nodes[0];
    ASSERT_EQ(conv.inputs.size(), 3u);
    EXPECT_GE(conv.inputs[2], 0);
  }
  // What is not per-channel affine stops the chain as after a Conv.
  const ConvChain spatial{{Step::MulChannels, Step::MulSpatial}, true, false, true};
  EXPECT_EQ(ops(expect_same_results(conv_chain_model(spatial), chain_input(spatial))),
            (std::vector<std::string>{"ConvTranspose", "Mul", "Relu"}));
}

TEST(ConvFolding, StepsThatAreNotPerChannelAffineStopTheChain) {
  struct Case {
    ConvChain chain;
    std::vector<std::string> ops;
  };
  const std::vector<Case> cases = {
      {{{Step::BatchNorm}, true, /*conv_read_elsewhere=*/true},
       {"Conv", "BatchNormalization", "Relu"}},
      {{{Step::BatchNormLive}}, {"Conv", "BatchNormalization", "Relu"}},
      {{{Step::MulSpatial}}, {"Conv", "Mul", "Relu"}},
      {{{Step::ConstantMinus}}, {"Conv", "Sub", "Relu"}},
      {{{Step::DivByZero}}, {"Conv", "Div", "Relu"}},
      // Folded up to the step that is not.
      {{{Step::MulChannels, Step::MulSpatial, Step::AddChannels}}, {"Conv", "Mul", "Add", "Relu"}},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE("case " + std::to_string(i));
    // Results are compared but for a second input (BatchNormLive's mean) or a division by zero
    // (infinities either way).
    const Step first = cases[i].chain.steps[0];
    const std::string bytes = conv_chain_model(cases[i].chain);
    if (first != Step::BatchNormLive && first != Step::DivByZero) {
      EXPECT_EQ(ops(expect_same_results(bytes, {1, 3, 6, 6})), cases[i].ops);
    } else {
      auto model = import_onnx(bytes, "m.onnx");
      ASSERT_TRUE(model.ok()) << model.status();
      EXPECT_EQ(ops(*model), cases[i].ops);
    }
  }
}

// The ops of the one function, and the number of weights, of the model package a kiln export of
// `onnx_bytes` (with or without the rewrites) holds.
std::vector<std::string> exported_package(const std::string& onnx_bytes, bool rewrite,
                                          size_t& num_weights) {
  const std::filesystem::path file =
      std::filesystem::path(::testing::TempDir()) / "kiln_conv_folding_export.onnx";
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

TEST(ConvFolding, ExportsFoldedWeightsOnlyAndKeepsTheGraphAsWrittenWhenAsked) {
  const std::string onnx = conv_chain_model({{Step::BatchNorm}});
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
