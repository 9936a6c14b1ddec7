// Common subexpressions (passes/common_subexpressions.h): repeated shape arithmetic merged, the
// merged model's results those of the graph as written (reference interpreter), and what must
// stay: random ops, nodes of other attributes or inputs, nodes whose outputs the graph returns,
// and readers inside regions read the kept node's outputs.
#include <kiln/engine/compile/test/test_models.h>
#include <kiln/engine/passes/common_subexpressions.h>

namespace kiln::engine {
namespace {

using namespace test_models;  // NOLINT(google-build-using-namespace): test helpers

size_t count_op(const ir::Graph& graph, const std::string& op) {
  size_t count = 0;
  for (const ir::Node& node : graph.nodes) count += node.op == op ? 1 : 0;
  return count;
}

// Two layers that each take x's shape, pick its last dim and reshape x by [-1, it] (as
// exporters write per layer), and two Relus of x (the second one the graph returns).
ir::Model repeated_model() {
  ModelBuilder b(31);
  ir::Dim n = ir::Dim::symbol("n");
  int x = b.input("x", {n, 6});
  int minus_one = b.int_weight("minus_one", {-1});
  int index_a = b.int_weight("index_a", {1});
  int index_b = b.int_weight("index_b", {1});  // equal bytes: one weight entry, two values
  std::vector<int> flat(2), shape(2), dim(2), target(2);
  for (int layer = 0; layer < 2; ++layer) {
    const std::string s = std::to_string(layer);
    shape[layer] = b.value("shape" + s, {2}, runtime::ScalarType::Int64);
    dim[layer] = b.value("dim" + s, {1}, runtime::ScalarType::Int64);
    target[layer] = b.value("target" + s, {2}, runtime::ScalarType::Int64);
    flat[layer] = b.value("flat" + s, {n, 6});
    b.node("Shape", {x}, {shape[layer]});
    b.node("Gather", {shape[layer], layer == 0 ? index_a : index_b}, {dim[layer]},
           {int_attr("axis", 0)});
    b.node("Concat", {minus_one, dim[layer]}, {target[layer]}, {int_attr("axis", 0)});
    b.node("Reshape", {x, target[layer]}, {flat[layer]});
  }
  int sum = b.value("sum", {n, 6});
  b.node("Add", {flat[0], flat[1]}, {sum});
  int r1 = b.value("r1", {n, 6}), r2 = b.value("r2", {n, 6}), out = b.value("out", {n, 6});
  b.node("Relu", {x}, {r1});
  b.node("Relu", {x}, {r2});  // the graph returns it: kept
  b.node("Add", {sum, r1}, {out});
  b.output(out);
  b.output(r2);
  return b.build();
}

TEST(CommonSubexpressions, RepeatedShapeArithmeticIsMergedAndResultsStay) {
  const ir::Model original = repeated_model();
  ir::Model merged = repeated_model();
  ir::Graph& graph = merged.functions[0];
  const size_t before = graph.nodes.size();
  // Layer 1's Shape, Gather (its index a weight of equal bytes), Concat and Reshape; the
  // second Relu is returned, so it stays.
  EXPECT_EQ(passes::merge_common_subexpressions(graph), 4u);
  EXPECT_EQ(graph.nodes.size(), before - 4);
  EXPECT_EQ(count_op(graph, "Shape"), 1u);
  EXPECT_EQ(count_op(graph, "Reshape"), 1u);
  EXPECT_EQ(count_op(graph, "Relu"), 2u);
  EXPECT_EQ(passes::merge_common_subexpressions(graph), 0u);  // nothing left to merge

  for (int64_t n : {1, 4}) {
    SCOPED_TRACE("n " + std::to_string(n));
    std::vector<Buffer> inputs;
    inputs.push_back(random_input(runtime::ScalarType::Float32, {n, 6}, 7));
    std::vector<const runtime::Tensor*> in = {&inputs[0].tensor};
    std::vector<Buffer> expected = interpret(original, in);
    std::vector<Buffer> got = interpret(merged, in);
    ASSERT_EQ(got.size(), expected.size());
    for (size_t i = 0; i < got.size(); ++i) expect_close(got[i].tensor, expected[i].tensor);
    auto compiled = compile::specialize(merged, "main", {{n, 6}}, cpu_only());
    ASSERT_TRUE(compiled.ok()) << compiled.status().to_string();
  }
}

TEST(CommonSubexpressions, RandomOpsOtherAttributesAndRegionsAreHandled) {
  ModelBuilder b(32);
  int x = b.input("x", {4, 6});
  int u1 = b.value("u1", {4, 6}), u2 = b.value("u2", {4, 6});
  b.node("RandomUniformLike", {x}, {u1});
  b.node("RandomUniformLike", {x}, {u2});  // random: both stay
  int s1 = b.value("s1", {4, 6}), s2 = b.value("s2", {4, 6});
  b.node("Softmax", {x}, {s1}, {int_attr("axis", 1)});
  b.node("Softmax", {x}, {s2}, {int_attr("axis", 0)});  // another axis: stays
  int e1 = b.value("e1", {4, 6}), e2 = b.value("e2", {4, 6});
  b.node("Exp", {x}, {e1});
  b.node("Exp", {x}, {e2});  // merged into e1
  int a = b.value("a", {4, 6}), c = b.value("c", {4, 6}), d = b.value("d", {4, 6});
  b.node("Add", {u1, u2}, {a});
  b.node("Add", {s1, s2}, {c});
  b.node("Add", {e1, e2}, {d});
  b.output(a);
  b.output(c);
  b.output(d);
  ir::Model model = b.build();
  ir::Graph& graph = model.functions[0];
  // A region reading e2: it must read e1 after the merge.
  ir::Node holder;
  holder.name = "holder";
  holder.op = "If";
  ir::Region region;
  ir::Node inner;
  inner.name = "inner";
  inner.op = "Identity";
  inner.inputs = {e2};
  inner.outputs = {
      graph.add_value(ir::Value{"inner_out", graph.values[static_cast<size_t>(e2)].type, -1})};
  region.nodes.push_back(inner);
  region.outputs = {e2};
  holder.regions.push_back(region);
  graph.nodes.push_back(holder);

  EXPECT_EQ(passes::merge_common_subexpressions(graph), 1u);
  EXPECT_EQ(count_op(graph, "RandomUniformLike"), 2u);
  EXPECT_EQ(count_op(graph, "Softmax"), 2u);
  EXPECT_EQ(count_op(graph, "Exp"), 1u);
  const ir::Node& last = graph.nodes.back();
  ASSERT_EQ(last.op, "If");
  EXPECT_EQ(last.regions[0].nodes[0].inputs[0], e1);
  EXPECT_EQ(last.regions[0].outputs[0], e1);
  const ir::Node& sum = graph.nodes[graph.nodes.size() - 2];
  EXPECT_EQ(sum.inputs, (std::vector<int>{e1, e1}));
}

}  // namespace
}  // namespace kiln::engine
