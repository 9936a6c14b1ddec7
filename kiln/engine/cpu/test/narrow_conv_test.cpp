// Convs of few output channels (narrow_conv.cpp) on kiln's loops over output pixels against the
// reference kernel on seeded random data: channel counts around the tiles of four, rows of
// whole vectors and remainders, kernels, pads, biases, post-ops and threads; what they leave
// to oneDNN (other geometries, and images too large to copy padded).

#include <kiln/engine/cpu/test/op_case.h>
#include <kiln/kernels/kernels.h>

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace kiln::engine::cpu {
namespace {

using namespace test_support;  // NOLINT(google-build-using-namespace): test helpers

constexpr const char* kNarrow = "kiln narrow Conv";

struct Geometry {
  std::vector<int64_t> x, w, pads;
};

TEST(NarrowConv, MatchesTheReferenceOverChannelsGeometryBiasPostOpsAndThreads) {
  const std::vector<Geometry> geometries = {
      {{1, 32, 40, 40}, {3, 32, 9, 9}, {4, 4, 4, 4}},   // a style network's RGB output
      {{1, 16, 37, 70}, {1, 16, 3, 3}, {1, 1, 1, 1}},   // one map; rows of 4 vectors and a tail
      {{2, 8, 30, 33}, {5, 8, 3, 3}, {1, 1, 1, 1}},     // two tiles of channels, a batch
      {{1, 24, 20, 129}, {8, 24, 5, 5}, {2, 2, 2, 2}},  // 8 channels, 9 vectors a row
      {{1, 12, 33, 49}, {2, 12, 4, 3}, {2, 0, 1, 2}},   // uneven kernel and pads
      {{1, 64, 24, 40}, {7, 64, 1, 1}, {0, 0, 0, 0}},   // 1x1
  };
  const std::vector<std::vector<PostOp>> post_op_sets = {{},
                                                         {{PostOpKind::Tanh}},
                                                         {{PostOpKind::Sigmoid}},
                                                         {{PostOpKind::Relu}},
                                                         {{PostOpKind::Swish}}};
  uint32_t seed = 1200;
  for (int threads : {1, 2}) {
    for (const Geometry& g : geometries) {
      for (bool bias : {true, false}) {
        for (const auto& post_ops : post_op_sets) {
          SCOPED_TRACE(runtime::shape_to_string(g.x) + " * " + runtime::shape_to_string(g.w) +
                       (bias ? " bias" : "") + post_ops_name(post_ops) + ", " +
                       std::to_string(threads) + " thread(s)");
          kernels::ConvOptions options;
          options.pads = g.pads;
          Case c("Conv", {ints("pads", g.pads)});
          c.desc.num_threads = threads;
          c.add(random_tensor(g.x, seed++), false);
          c.add(random_tensor(g.w, seed++, -0.3, 0.3), true);
          if (bias) c.add(random_tensor({g.w[0]}, seed++), true);
          expect_conv_like_reference(c, options, bias, post_ops, seed);
          EXPECT_NE(c.description.find(kNarrow), std::string::npos) << c.description;
        }
      }
    }
  }
}

TEST(NarrowConv, LeavesOtherConvsToOneDnn) {
  const std::vector<std::pair<Geometry, std::vector<ir::Attribute>>> others = {
      {{{1, 32, 40, 40}, {16, 32, 3, 3}, {1, 1, 1, 1}}, {}},  // 16 channels
      {{{1, 32, 40, 40}, {3, 32, 3, 3}, {1, 1, 1, 1}}, {ints("strides", {2, 2})}},
      {{{1, 32, 40, 40}, {3, 32, 3, 3}, {2, 2, 2, 2}}, {ints("dilations", {2, 2})}},
      {{{1, 32, 40, 40}, {4, 16, 3, 3}, {1, 1, 1, 1}}, {int_attr("group", 2)}},
      {{{1, 64, 400, 400}, {3, 64, 3, 3}, {1, 1, 1, 1}}, {}},  // a padded copy of 43 MB
  };
  uint32_t seed = 1300;
  for (const auto& [g, attributes] : others) {
    SCOPED_TRACE(runtime::shape_to_string(g.w));
    std::vector<ir::Attribute> all = attributes;
    all.push_back(ints("pads", g.pads));
    Case c("Conv", all);
    c.add(random_tensor(g.x, seed++), false);
    c.add(random_tensor(g.w, seed++, -0.3, 0.3), true);
    auto op = c.create();
    ASSERT_TRUE(op.ok()) << op.status();
    EXPECT_EQ((*op)->describe().find(kNarrow), std::string::npos) << (*op)->describe();
  }
}

}  // namespace
}  // namespace kiln::engine::cpu
