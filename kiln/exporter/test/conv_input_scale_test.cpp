// engine::passes::fold_conv_input_scale through the importer: a Mul or Div of a Conv's input by
// a scalar or per-input-channel constant (an input normalization, x / 255) is folded into the
// Conv's weights, grouped Convs' too, with the results of the graph as written (reference
// kernels) whatever the padding; what is not such a scale is left as written.
#include <kiln/exporter/onnx/onnx_importer.h>
#include <kiln/exporter/test/onnx_model_builder.h>
#include <kiln/exporter/test/portable_run.h>

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace kiln::exporter {
namespace {

using test::expect_same_results;
using test::OnnxModelBuilder;
using test::seeded;
constexpr int kF32 = onnx::TensorProto::FLOAT;

enum class Scale {
  DivScalar,         // x / 16, a scalar
  MulChannels,       // x * [1, 4, 1, 1]
  ChannelsFirst,     // [4, 1, 1] * x
  AddChannels,       // x + [1, 4, 1, 1]: not a scale (the padding would not shift)
  ConstantOverX,     // 16 / x: not linear in x
  MulSpatial,        // x * [1, 1, 6, 6]: not per channel
  DivByZero,         // x / [1, 4, 1, 1] holding a zero
  ReadElsewhere,     // x * t, also a graph output
  ScaledIntoWeight,  // Conv(y, x * t): the scale feeds W, not X
};

struct Model {
  Scale scale = Scale::DivScalar;
  int64_t group = 1;
};

// x [1, 4, 6, 6] → the scale → Conv(8, 3x3, pads 1, group) → Relu → y.
std::string scaled_conv_model(const Model& m) {
  OnnxModelBuilder b(13);
  b.input("x", kF32, {1, 4, 6, 6});
  b.output("y", kF32, {1, 8, 6, 6});
  std::string op = "Mul";
  std::vector<std::string> inputs = {"x", "t"};
  switch (m.scale) {
    case Scale::DivScalar:
      b.initializer_f32("t", {}, {16.0f});
      op = "Div";
      break;
    case Scale::MulChannels:
    case Scale::ReadElsewhere:
      b.initializer_f32("t", {1, 4, 1, 1}, seeded(4, 30, 0.5f, 2.0f));
      break;
    case Scale::ChannelsFirst:
      b.initializer_f32("t", {4, 1, 1}, seeded(4, 31, -2.0f, -0.5f));
      inputs = {"t", "x"};
      break;
    case Scale::AddChannels:
      b.initializer_f32("t", {1, 4, 1, 1}, seeded(4, 32));
      op = "Add";
      break;
    case Scale::ConstantOverX:
      b.initializer_f32("t", {}, {16.0f});
      op = "Div";
      inputs = {"t", "x"};
      break;
    case Scale::MulSpatial:
      b.initializer_f32("t", {1, 1, 6, 6}, seeded(36, 33, 0.5f, 2.0f));
      break;
    case Scale::DivByZero:
      b.initializer_f32("t", {1, 4, 1, 1}, {1.0f, 2.0f, 0.0f, 4.0f});
      op = "Div";
      break;
    case Scale::ScaledIntoWeight:
      break;
  }
  if (m.scale == Scale::ScaledIntoWeight) {
    // W = w * t, computed from a graph input: the Conv's X is not what is scaled.
    b.initializer_f32("w", {8, 4 / m.group, 3, 3}, seeded(8 * 4 / m.group * 9, 34));
    b.input("t", kF32, {1});
    b.node("Mul", {"w", "t"}, {"s"});
    auto& conv = b.node("Conv", {"x", "s"}, {"c"});
    OnnxModelBuilder::ints_attribute(conv, "pads", {1, 1, 1, 1});
    b.node("Relu", {"c"}, {"y"});
    return b.bytes();
  }
  b.node(op, inputs, {"s"});
  if (m.scale == Scale::ReadElsewhere) b.output("s", kF32, {1, 4, 6, 6});
  b.initializer_f32("w", {8, 4 / m.group, 3, 3}, seeded(8 * 4 / m.group * 9, 35));
  b.initializer_f32("b", {8}, seeded(8, 36));
  auto& conv = b.node("Conv", {"s", "w", "b"}, {"c"});
  OnnxModelBuilder::ints_attribute(conv, "pads", {1, 1, 1, 1});
  OnnxModelBuilder::int_attribute(conv, "group", m.group);
  b.node("Relu", {"c"}, {"y"});
  return b.bytes();
}

TEST(ConvInputScale, ScalesOfTheInputChannelsAreFoldedIntoTheWeights) {
  // Group 2: input channel c feeds the rows of its group only, so scaling W's second axis by
  // the channel index as for one group would give other results.
  for (int64_t group : {1, 2, 4}) {
    for (Scale scale : {Scale::DivScalar, Scale::MulChannels, Scale::ChannelsFirst}) {
      SCOPED_TRACE("scale " + std::to_string(static_cast<int>(scale)) + ", group " +
                   std::to_string(group));
      engine::ir::Model model =
          expect_same_results(scaled_conv_model({scale, group}), {1, 4, 6, 6});
      ASSERT_FALSE(model.functions.empty());
      EXPECT_EQ(test::op_names(model), (std::vector<std::string>{"Conv", "Relu"}));
      const engine::ir::Graph& f = model.functions[0];
      ASSERT_FALSE(f.inputs.empty());
      EXPECT_EQ(f.nodes[0].inputs[0], f.inputs[0]) << "the Conv reads x itself";
    }
  }
}

TEST(ConvInputScale, WhatIsNotAScaleOfTheConvsInputIsLeftAsWritten) {
  struct Case {
    Scale scale;
    std::vector<std::string> ops;
  };
  const std::vector<Case> cases = {
      {Scale::AddChannels, {"Add", "Conv", "Relu"}},
      {Scale::ConstantOverX, {"Div", "Conv", "Relu"}},
      {Scale::MulSpatial, {"Mul", "Conv", "Relu"}},
      {Scale::DivByZero, {"Div", "Conv", "Relu"}},
      {Scale::ReadElsewhere, {"Mul", "Conv", "Relu"}},
      {Scale::ScaledIntoWeight, {"Mul", "Conv", "Relu"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE("scale " + std::to_string(static_cast<int>(c.scale)));
    const std::string bytes = scaled_conv_model({c.scale, 1});
    if (c.scale == Scale::DivByZero || c.scale == Scale::ScaledIntoWeight) {
      // (infinities either way; a second input)
      auto model = import_onnx(bytes, "m.onnx");
      ASSERT_TRUE(model.ok()) << model.status();
      EXPECT_EQ(test::op_names(*model), c.ops);
    } else {
      EXPECT_EQ(test::op_names(expect_same_results(bytes, {1, 4, 6, 6})), c.ops);
    }
  }
}

}  // namespace
}  // namespace kiln::exporter
