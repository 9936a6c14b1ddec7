// rule_shapes: output shapes from input shapes, without running a kernel.
#include <kiln/engine/compile/shape_resolution.h>

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
