// rule_shapes: output shapes from input shapes, without running a kernel.
#include <kiln/engine/compile/shape_resolution.h>
#include <kiln/runtime/core/tensor.h>

#include <gtest/gtest.h>

namespace kiln::engine::compile {
namespace {

using Sizes = std::vector<int64_t>;
using Inputs = std::vector<std::optional<Sizes>>;

ir::Node node(const std::string& op, size_t inputs, size_t outputs = 1,
              std::vector<ir::Attribute> attributes = {}) {
  ir::Node n;
  n.name = op;
  n.op = op;
  for (size_t i = 0; i < inputs; ++i) n.inputs.push_back(static_cast<int>(i));
  for (size_t i = 0; i < outputs; ++i) n.outputs.push_back(static_cast<int>(inputs + i));
  n.attributes = std::move(attributes);
  return n;
}

std::optional<Sizes> first(const std::optional<std::vector<Sizes>>& shapes) {
  if (!shapes || shapes->empty()) return std::nullopt;
  return shapes->front();
}

TEST(RuleShapes, ElementwiseBroadcastMatMulAndTranspose) {
  EXPECT_EQ(first(rule_shapes(node("Erf", 1), Inputs{Sizes{2, 3}})), (Sizes{2, 3}));
  EXPECT_EQ(first(rule_shapes(node("Add", 2), Inputs{Sizes{4, 1, 3}, Sizes{5, 1}})),
            (Sizes{4, 5, 3}));
  EXPECT_EQ(first(rule_shapes(node("Where", 3), Inputs{Sizes{1, 8}, Sizes{8, 1}, Sizes{}})),
            (Sizes{8, 8}));
  EXPECT_EQ(first(rule_shapes(node("MatMul", 2), Inputs{Sizes{2, 4, 16, 32}, Sizes{32, 8}})),
            (Sizes{2, 4, 16, 8}));
  EXPECT_EQ(first(rule_shapes(node("MatMul", 2), Inputs{Sizes{7}, Sizes{3, 7, 5}})), (Sizes{3, 5}));
  ir::Attribute perm{"perm", std::vector<int64_t>{0, 2, 1, 3}};
  EXPECT_EQ(first(rule_shapes(node("Transpose", 1, 1, {perm}), Inputs{Sizes{1, 16, 4, 32}})),
            (Sizes{1, 4, 16, 32}));
  EXPECT_EQ(first(rule_shapes(node("Transpose", 1), Inputs{Sizes{2, 3, 5}})), (Sizes{5, 3, 2}));
}

// Conv and ConvTranspose: the kernels' shape functions over the node's attributes (probing
// them would run the reference convolution).
TEST(RuleShapes, ConvAndConvTransposeFollowTheirAttributes) {
  ir::Attribute strides{"strides", std::vector<int64_t>{2, 2}};
  ir::Attribute pads{"pads", std::vector<int64_t>{1, 1, 1, 1}};
  EXPECT_EQ(first(rule_shapes(node("Conv", 3, 1, {strides, pads}),
                              Inputs{Sizes{1, 3, 320, 320}, Sizes{16, 3, 3, 3}, Sizes{16}})),
            (Sizes{1, 16, 160, 160}));
  ir::Attribute group{"group", int64_t{8}};
  EXPECT_EQ(
      first(rule_shapes(node("Conv", 2, 1, {group}), Inputs{Sizes{2, 8, 9, 7}, Sizes{8, 1, 3, 3}})),
      (Sizes{2, 8, 7, 5}));
  ir::Attribute same{"auto_pad", std::string("SAME_UPPER")};
  EXPECT_EQ(first(rule_shapes(node("Conv", 2, 1, {same, strides}),
                              Inputs{Sizes{1, 4, 9, 9}, Sizes{4, 4, 3, 3}})),
            (Sizes{1, 4, 5, 5}));
  EXPECT_EQ(first(rule_shapes(node("ConvTranspose", 2, 1, {strides}),
                              Inputs{Sizes{1, 8, 10, 10}, Sizes{8, 4, 2, 2}})),
            (Sizes{1, 4, 20, 20}));
  // Channels that do not fit: the kernel reports it.
  EXPECT_FALSE(rule_shapes(node("Conv", 2), Inputs{Sizes{1, 3, 8, 8}, Sizes{4, 2, 3, 3}}));
}

TEST(RuleShapes, ConcatAndPools) {
  ir::Attribute axis{"axis", int64_t{1}};
  EXPECT_EQ(first(rule_shapes(node("Concat", 3, 1, {axis}),
                              Inputs{Sizes{1, 16, 8, 8}, Sizes{1, 32, 8, 8}, Sizes{1, 8, 8, 8}})),
            (Sizes{1, 56, 8, 8}));
  EXPECT_FALSE(rule_shapes(node("Concat", 2, 1, {axis}), Inputs{Sizes{1, 2, 8}, Sizes{1, 2, 9}}));
  ir::Attribute kernel{"kernel_shape", std::vector<int64_t>{3, 3}};
  ir::Attribute strides{"strides", std::vector<int64_t>{2, 2}};
  ir::Attribute ceil{"ceil_mode", int64_t{1}};
  EXPECT_EQ(first(rule_shapes(node("MaxPool", 1, 1, {kernel, strides}), Inputs{Sizes{1, 4, 8, 8}})),
            (Sizes{1, 4, 3, 3}));
  EXPECT_EQ(first(rule_shapes(node("AveragePool", 1, 1, {kernel, strides, ceil}),
                              Inputs{Sizes{1, 4, 8, 8}})),
            (Sizes{1, 4, 4, 4}));
  EXPECT_FALSE(rule_shapes(node("MaxPool", 1, 2, {kernel}), Inputs{Sizes{1, 4, 8, 8}}));
}

// Rules that read constant inputs: only when `constant` hands them over.
TEST(RuleShapes, ReshapeSqueezeUnsqueezeSplitAndResizeReadConstantInputs) {
  std::vector<int64_t> shape_values = {0, -1, 4};
  runtime::Tensor shape(runtime::ScalarType::Int64, {3}, shape_values.data());
  std::vector<int64_t> axes_values = {1};
  runtime::Tensor axes(runtime::ScalarType::Int64, {1}, axes_values.data());
  std::vector<int64_t> split_values = {2, 6};
  runtime::Tensor split(runtime::ScalarType::Int64, {2}, split_values.data());
  std::vector<float> scale_values = {1, 1, 2, 2};
  runtime::Tensor scales(runtime::ScalarType::Float32, {4}, scale_values.data());
  std::vector<int64_t> size_values = {1, 3, 5, 7};
  runtime::Tensor sizes(runtime::ScalarType::Int64, {4}, size_values.data());
  auto input1 = [](const runtime::Tensor* t) {
    return ConstantInput([t](size_t index) { return index == 1 ? t : nullptr; });
  };

  EXPECT_EQ(
      first(rule_shapes(node("Reshape", 2), Inputs{Sizes{2, 3, 8}, Sizes{3}}, input1(&shape))),
      (Sizes{2, 6, 4}));
  EXPECT_FALSE(rule_shapes(node("Reshape", 2), Inputs{Sizes{2, 3, 8}, Sizes{3}}));  // computed
  EXPECT_EQ(first(rule_shapes(node("Squeeze", 2), Inputs{Sizes{4, 1, 5}, Sizes{1}}, input1(&axes))),
            (Sizes{4, 5}));
  EXPECT_EQ(first(rule_shapes(node("Squeeze", 1), Inputs{Sizes{1, 4, 1}})), (Sizes{4}));
  EXPECT_EQ(first(rule_shapes(node("Unsqueeze", 2), Inputs{Sizes{4, 5}, Sizes{1}}, input1(&axes))),
            (Sizes{4, 1, 5}));
  ir::Attribute unsqueeze_axes{"axes", std::vector<int64_t>{0, -1}};
  EXPECT_EQ(first(rule_shapes(node("Unsqueeze", 1, 1, {unsqueeze_axes}), Inputs{Sizes{3}})),
            (Sizes{1, 3, 1}));

  ir::Attribute last_axis{"axis", int64_t{-1}};
  auto parts =
      rule_shapes(node("Split", 2, 2, {last_axis}), Inputs{Sizes{3, 8}, Sizes{2}}, input1(&split));
  ASSERT_TRUE(parts);
  EXPECT_EQ(*parts, (std::vector<Sizes>{{3, 2}, {3, 6}}));
  auto equal = rule_shapes(node("Split", 1, 3, {last_axis}), Inputs{Sizes{3, 12}});
  ASSERT_TRUE(equal);
  EXPECT_EQ(*equal, (std::vector<Sizes>{{3, 4}, {3, 4}, {3, 4}}));
  EXPECT_FALSE(rule_shapes(node("Split", 1, 3, {last_axis}), Inputs{Sizes{3, 10}}));

  // Resize (opset 11+): X, roi (absent), scales or sizes.
  ir::Node resize = node("Resize", 3);
  resize.inputs[1] = -1;
  auto by_scales = ConstantInput([&](size_t index) { return index == 2 ? &scales : nullptr; });
  EXPECT_EQ(
      first(rule_shapes(resize, Inputs{Sizes{1, 3, 10, 20}, std::nullopt, Sizes{4}}, by_scales)),
      (Sizes{1, 3, 20, 40}));
  ir::Node resize_sizes = node("Resize", 4);
  resize_sizes.inputs[1] = -1;
  resize_sizes.inputs[2] = -1;
  auto by_sizes = ConstantInput([&](size_t index) { return index == 3 ? &sizes : nullptr; });
  EXPECT_EQ(first(rule_shapes(resize_sizes,
                              Inputs{Sizes{1, 3, 10, 20}, std::nullopt, std::nullopt, Sizes{4}},
                              by_sizes)),
            (Sizes{1, 3, 5, 7}));
  EXPECT_FALSE(rule_shapes(resize, Inputs{Sizes{1, 3, 10, 20}, std::nullopt, Sizes{4}}));
}

// LSTM, GRU and RNN: from X, W and the attributes (probing them runs the recurrence).
TEST(RuleShapes, RecurrentOpsFollowXWAndTheirAttributes) {
  ir::Attribute both{"direction", std::string("bidirectional")};
  ir::Attribute hidden{"hidden_size", int64_t{8}};
  auto lstm = rule_shapes(node("LSTM", 4, 3, {both, hidden}),
                          Inputs{Sizes{5, 2, 4}, Sizes{2, 32, 4}, Sizes{2, 32, 8}, Sizes{2, 64}});
  ASSERT_TRUE(lstm);
  EXPECT_EQ(*lstm, (std::vector<Sizes>{{5, 2, 2, 8}, {2, 2, 8}, {2, 2, 8}}));
  // Batch first, hidden size from W, no bias.
  ir::Attribute batch_first{"layout", int64_t{1}};
  auto gru = rule_shapes(node("GRU", 3, 2, {batch_first}),
                         Inputs{Sizes{2, 5, 4}, Sizes{1, 24, 4}, Sizes{1, 24, 8}});
  ASSERT_TRUE(gru);
  EXPECT_EQ(*gru, (std::vector<Sizes>{{2, 5, 1, 8}, {2, 1, 8}}));
  ir::Node rnn = node("RNN", 4, 1);
  rnn.inputs[3] = -1;  // B absent
  EXPECT_EQ(first(rule_shapes(rnn, Inputs{Sizes{3, 1, 6}, Sizes{1, 7, 6}, Sizes{1, 7, 7},
                                          std::nullopt})),
            (Sizes{3, 1, 1, 7}));
  // What the kernel must report: W's input size, hidden size or directions that do not fit,
  // a fourth output, a W of unknown shape.
  EXPECT_FALSE(rule_shapes(node("LSTM", 3), Inputs{Sizes{5, 2, 4}, Sizes{1, 32, 3}, Sizes{}}));
  EXPECT_FALSE(rule_shapes(node("LSTM", 3, 1, {hidden}),
                           Inputs{Sizes{5, 2, 4}, Sizes{1, 24, 4}, Sizes{1, 24, 6}}));
  EXPECT_FALSE(rule_shapes(node("GRU", 3, 1, {both}),
                           Inputs{Sizes{5, 2, 4}, Sizes{1, 24, 4}, Sizes{1, 24, 8}}));
  EXPECT_FALSE(rule_shapes(node("LSTM", 3, 4), Inputs{Sizes{5, 2, 4}, Sizes{1, 32, 4}, Sizes{}}));
  EXPECT_FALSE(rule_shapes(node("RNN", 3), Inputs{Sizes{5, 2, 4}, std::nullopt, Sizes{}}));
}

TEST(RuleShapes, NoRuleWhenTheKernelMustDecide) {
  // Unknown ops, unknown input shapes, shapes the op rejects, extra outputs, a bad perm.
  EXPECT_FALSE(rule_shapes(node("Reshape", 2), Inputs{Sizes{2, 3}, Sizes{1}}));
  EXPECT_FALSE(rule_shapes(node("Add", 2), Inputs{Sizes{2, 3}, std::nullopt}));
  EXPECT_FALSE(rule_shapes(node("Add", 2), Inputs{Sizes{2, 3}, Sizes{4}}));
  EXPECT_FALSE(rule_shapes(node("MatMul", 2), Inputs{Sizes{2, 3}, Sizes{4, 5}}));
  EXPECT_FALSE(rule_shapes(node("LayerNormalization", 1, 3), Inputs{Sizes{2, 3}}));
  ir::Attribute repeated{"perm", std::vector<int64_t>{0, 0}};
  EXPECT_FALSE(rule_shapes(node("Transpose", 1, 1, {repeated}), Inputs{Sizes{2, 3}}));
  ir::Node absent = node("Clip", 3);
  absent.inputs[1] = -1;
  EXPECT_FALSE(rule_shapes(absent, Inputs{Sizes{2}, std::nullopt, Sizes{}}));
}

}  // namespace
}  // namespace kiln::engine::compile
