// passes/rank_completion.h: the shapes each rule gives values that ONNX's shape inference left
// without one, and what it leaves unknown.
#include <kiln/engine/compile/test/test_models.h>
#include <kiln/engine/passes/rank_completion.h>

namespace kiln::engine {
namespace {

using namespace test_models;  // NOLINT(google-build-using-namespace): test helpers
using ir::Dim;

const ir::TensorType& type_of(const ir::Model& model, int value) {
  return model.functions[0].values[static_cast<size_t>(value)].type;
}

bool anonymous(const Dim& d) {
  const auto terms = d.terms();
  return d.constant() == 0 && terms.size() == 1 && terms[0].is_anonymous();
}

TEST(RankCompletion, EachRuleGivesTheShapeItsOpImplies) {
  ModelBuilder b;
  const Dim seq = Dim::symbol("seq");
  int x = b.input("x", {1, seq, 8});
  int shape4 = b.input("shape4", {4}, ScalarType::Int64);
  int shape3 = b.input("shape3", {3}, ScalarType::Int64);
  int y = b.input("y", {1, seq, 16});
  int r = b.unknown("r"), t = b.unknown("t"), u = b.unknown("u"), m = b.unknown("m");
  int a = b.unknown("a"), z = b.unknown("z"), rm = b.unknown("rm"), sq = b.unknown("sq");
  int us = b.unknown("us"), s0 = b.unknown("s0"), s1 = b.unknown("s1"), g = b.unknown("g");
  int v = b.unknown("v"), mv = b.unknown("mv"), am = b.unknown("am");
  b.node("Reshape", {x, shape4}, {r});
  b.node("Transpose", {r}, {t}, {ints("perm", {0, 2, 1, 3})});
  b.node("Reshape", {t, shape3}, {u});
  b.node("MatMul", {u, b.weight("w", {8, 16})}, {m});
  b.node("Add", {m, b.weight("bias", {16})}, {a});
  b.node("Add", {a, y}, {z});
  b.node("ReduceMean", {z}, {rm}, {ints("axes", {-1}), int_attr("keepdims", 1)});
  b.node("Squeeze", {rm, b.int_weight("squeeze_axes", {2})}, {sq});
  b.node("Unsqueeze", {sq, b.int_weight("unsqueeze_axes", {0})}, {us});
  b.node("Split", {a, b.int_weight("split", {4, 12})}, {s0, s1}, {int_attr("axis", -1)});
  b.node("Gelu", {s1}, {g});
  b.node("ReduceSum", {z, b.int_weight("sum_axes", {0, 1})}, {v}, {int_attr("keepdims", 0)});
  b.node("MatMul", {g, b.weight("vector", {12})}, {mv});
  b.node("ArgMax", {z}, {am}, {int_attr("axis", 1), int_attr("keepdims", 1)});
  b.output(us);
  ir::Model model = b.build();

  EXPECT_EQ(passes::complete_ranks(model, model.functions[0]), 15u);
  for (int value : {r, t, u, m, a, z, rm, sq, us, s0, s1, g, v, mv, am}) {
    EXPECT_TRUE(type_of(model, value).rank_known) << value;
  }
  // A Reshape to a computed shape: as many dims as the shape has, each its own unknown.
  const auto& rs = type_of(model, r).shape;
  ASSERT_EQ(rs.size(), 4u);
  for (const Dim& d : rs) EXPECT_TRUE(anonymous(d)) << d.to_string();
  EXPECT_NE(rs[0], rs[1]);
  // Transpose permutes the very dims.
  EXPECT_EQ(type_of(model, t).shape, (std::vector<Dim>{rs[0], rs[2], rs[1], rs[3]}));
  const auto& us3 = type_of(model, u).shape;
  ASSERT_EQ(us3.size(), 3u);
  // MatMul: A's rows, B's columns; the bias keeps them.
  EXPECT_EQ(type_of(model, m).shape, (std::vector<Dim>{us3[0], us3[1], 16}));
  EXPECT_EQ(type_of(model, a).shape, type_of(model, m).shape);
  // Broadcast with [1, seq, 16]: a 1 takes the other side; two unknowns make a new one.
  const auto& zs = type_of(model, z).shape;
  ASSERT_EQ(zs.size(), 3u);
  EXPECT_EQ(zs[0], us3[0]);
  EXPECT_TRUE(anonymous(zs[1]));
  EXPECT_NE(zs[1], us3[1]);
  EXPECT_NE(zs[1], seq);
  EXPECT_EQ(zs[2], Dim(16));
  EXPECT_EQ(type_of(model, rm).shape, (std::vector<Dim>{zs[0], zs[1], 1}));
  EXPECT_EQ(type_of(model, sq).shape, (std::vector<Dim>{zs[0], zs[1]}));
  EXPECT_EQ(type_of(model, us).shape, (std::vector<Dim>{1, zs[0], zs[1]}));
  EXPECT_EQ(type_of(model, s0).shape, (std::vector<Dim>{us3[0], us3[1], 4}));
  EXPECT_EQ(type_of(model, s1).shape, (std::vector<Dim>{us3[0], us3[1], 12}));
  EXPECT_EQ(type_of(model, g).shape, type_of(model, s1).shape);
  EXPECT_EQ(type_of(model, v).shape, (std::vector<Dim>{16}));
  EXPECT_EQ(type_of(model, mv).shape, (std::vector<Dim>{us3[0], us3[1]}));
  EXPECT_EQ(type_of(model, am).shape, (std::vector<Dim>{zs[0], 1, 16}));
}

// A Reshape to Shape(v) takes v's dims (PyTorch's GroupNorm restores its input's shape so), and
// a Conv gives X's batch and W's output channels: the group normalization after a Conv whose
// input ONNX left without a shape is still found.
TEST(RankCompletion, ReshapeToAValuesShapeAndConvKeepWhatTheyKnow) {
  ModelBuilder b;
  const Dim batch = Dim::symbol("N");
  int x = b.input("x", {batch, 8, 5, 6});
  int split = b.input("split", {3}, ScalarType::Int64);
  int r = b.unknown("r"), back = b.unknown("back"), c = b.unknown("c");
  int s = b.unknown("s", ScalarType::Int64);
  int sliced = b.unknown("sliced", ScalarType::Int64), partial = b.unknown("partial");
  b.node("Reshape", {x, split}, {r});
  b.node("Shape", {x}, {s});
  b.node("Reshape", {r, s}, {back});
  b.node("Conv", {back, b.weight("w", {16, 8, 3, 3})}, {c});
  b.node("Shape", {x}, {sliced}, {int_attr("start", 1)});
  b.node("Reshape", {r, sliced}, {partial});
  b.output(c);
  b.output(partial);
  ir::Model model = b.build();
  passes::complete_ranks(model, model.functions[0]);
  EXPECT_EQ(type_of(model, back).shape, (std::vector<Dim>{batch, 8, 5, 6}));
  const auto& cs = type_of(model, c).shape;
  ASSERT_EQ(cs.size(), 4u);
  EXPECT_EQ(cs[0], batch);
  EXPECT_EQ(cs[1], Dim(16));
  EXPECT_TRUE(anonymous(cs[2]) && anonymous(cs[3]));
  // Part of a shape (start = 1) is not the value's own: as many unknowns as it has elements,
  // when that is known.
  const ir::TensorType& p = type_of(model, partial);
  if (p.rank_known) {
    for (const Dim& d : p.shape) EXPECT_TRUE(anonymous(d)) << d.to_string();
  }
}

TEST(RankCompletion, WhatTheOpsDoNotAllowOrDoNotTellStaysUnknown) {
  ModelBuilder b;
  int p = b.input("p", {3});
  int q = b.input("q", {4});
  int x = b.input("x", {2, 5});
  int free = b.unknown("free");
  int shape = b.input("shape", {Dim::symbol("n")}, ScalarType::Int64);
  int long_shape = b.input("long_shape", {100}, ScalarType::Int64);
  std::vector<int> outs;
  for (int i = 0; i < 12; ++i) outs.push_back(b.unknown("out" + std::to_string(i)));
  int typed = b.value("typed", {7});
  b.node("Add", {p, q}, {outs[0]});                              // 3 against 4
  b.node("Transpose", {x}, {outs[1]}, {ints("perm", {0, 0})});   // not a permutation
  b.node("Squeeze", {x, b.int_weight("axes", {1})}, {outs[2]});  // a dim of 5
  b.node("Split", {x, b.int_weight("split", {1, 3})}, {outs[3], outs[4]},
         {int_attr("axis", 1)});                  // 1 + 3 is not 5
  b.node("Relu", {free}, {outs[5]});              // an input of no rank
  b.node("Reshape", {x, shape}, {outs[6]});       // a shape of free length
  b.node("ReduceMean", {x}, {outs[7]});           // all axes or none
  b.node("Squeeze", {x}, {outs[8]});              // the 1s at run time
  b.node("Reshape", {x, long_shape}, {outs[9]});  // 100 dims: a corrupt model
  b.node("Split", {x, b.int_weight("negative", {6, -1})}, {outs[10], outs[11]},
         {int_attr("axis", 1)});  // a negative part
  b.node("Relu", {x}, {typed});   // already typed: kept
  ir::Model model = b.build();

  EXPECT_EQ(passes::complete_ranks(model, model.functions[0]), 0u);
  for (int value : outs) EXPECT_FALSE(type_of(model, value).rank_known) << value;
  EXPECT_EQ(type_of(model, typed).shape, (std::vector<Dim>{7}));
}

}  // namespace
}  // namespace kiln::engine
