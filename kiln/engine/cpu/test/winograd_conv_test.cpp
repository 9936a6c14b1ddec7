// 3x3 stride-1 Convs on kiln's Winograd loops (winograd_conv.cpp) against the reference kernel
// on seeded random data: channel counts around the blocks of 16, image sizes that are not whole
// 4 x 4 tiles, pads of every side and none, many chunks of tiles, batches, biases, post-ops with
// a residual before or after an activation, 1 and 2 threads (splitting the tiles, or the output
// blocks of a small image); nChw16c in, out and residual, each native or plain; scratch memory
// shared with other ops; the choice through CpuOp::create and the Convs left to other kernels.
#include <kiln/engine/cpu/dnnl_common.h>
#include <kiln/engine/cpu/test/blocked16.h>
#include <kiln/engine/cpu/test/conv_case.h>
#include <kiln/kernels/kernels.h>

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

namespace kiln::engine::cpu {
namespace {

using namespace test_support;  // NOLINT(google-build-using-namespace): test helpers
using runtime::ScalarType;
using runtime::Tensor;

constexpr const char* kWinograd = "kiln Winograd";
runtime::Result<std::unique_ptr<CpuOp>> winograd_loops(const OpDesc& desc) {
  return dnnl_impl::create_winograd_conv(desc);
}
runtime::Result<std::unique_ptr<CpuOp>> winograd_f3(const OpDesc& desc) {
  return dnnl_impl::create_winograd_conv(desc, dnnl_impl::WinogradTile::F3x3);
}
runtime::Result<std::unique_ptr<CpuOp>> winograd_f4(const OpDesc& desc) {
  return dnnl_impl::create_winograd_conv(desc, dnnl_impl::WinogradTile::F4x4);
}
constexpr dnnl_impl::WinogradTile kTiles[] = {dnnl_impl::WinogradTile::F3x3,
                                              dnnl_impl::WinogradTile::F4x4};

OwnedTensor abs_of(const Tensor& t) {
  std::vector<float> v(t.data_ptr<float>(), t.data_ptr<float>() + t.numel());
  for (float& x : v) x = std::fabs(x);
  return OwnedTensor::of(std::vector<int64_t>(t.sizes().begin(), t.sizes().end()), std::move(v));
}

// Fails (naming up to 5 elements) unless every element is within 1e-5 + 1e-4 * |expected| plus
// 2e-6 of `magnitude` (the sum of the products' magnitudes there): Winograd's F(3x3, 3x3)
// rounds to up to about 4e-7 of it, F(4x4, 3x3) to about 9e-7 (sums of 300-1300 products here),
// while a wrong or missing product is off by about 1e-2.
void expect_winograd_near(const OwnedTensor& actual, const OwnedTensor& expected,
                          const OwnedTensor& magnitude) {
  ASSERT_EQ(actual.tensor().numel(), expected.tensor().numel());
  std::vector<float> a = actual.values<float>(), e = expected.values<float>(),
                     m = magnitude.values<float>();
  int failures = 0;
  for (size_t i = 0; i < a.size() && failures < 5; ++i) {
    const double tolerance = 1e-5 + 1e-4 * std::fabs(e[i]) + 2e-6 * m[i];
    if (!(std::fabs(a[i] - e[i]) <= tolerance)) {
      ADD_FAILURE() << "element " << i << ": " << a[i] << " (expected " << e[i] << ", products' "
                    << "magnitude " << m[i] << ")";
      ++failures;
    }
  }
}

// A 3x3 Conv given to Winograd's kernels: X, W, optionally B, optionally a residual;
// `expected` from the reference convolution and post-ops.
struct WinogradCase : ConvCase {
  OwnedTensor magnitude = zeros({0});  // the reference Conv of |X| and |W|, without B

  WinogradCase(const ConvGeometry& g, bool bias, const std::vector<PostOp>& post_ops, int threads,
               uint32_t& seed)
      : ConvCase(g, bias, post_ops, threads, seed) {
    c.desc.winograd = true;
    c.desc.avoid_generated_code = true;
    magnitude = zeros(out);
    EXPECT_TRUE(kernels::conv(abs_of(c.at(0)).tensor(), abs_of(c.at(1)).tensor(), nullptr,
                              conv_options(g), magnitude.tensor())
                    .ok());
  }

  // The Winograd loops' op of `tile`, not through CpuOp::create.
  runtime::Result<std::unique_ptr<CpuOp>> create(
      dnnl_impl::WinogradTile tile = dnnl_impl::WinogradTile::Auto) {
    return c.create_with(tile == dnnl_impl::WinogradTile::Auto   ? winograd_loops
                         : tile == dnnl_impl::WinogradTile::F3x3 ? winograd_f3
                                                                 : winograd_f4);
  }
};

TEST(WinogradConv, MatchesTheReferenceOverShapesPadsPostOpsAndThreads) {
  const std::vector<ConvGeometry> shapes = {
      {1, 16, 16, 4, 4},   // one tile
      {1, 20, 24, 5, 7},   // a padded input block, a padded output block
      {2, 32, 40, 13, 9},  // a batch, partial tiles both ways, three output blocks
      {1, 48, 16, 1, 1},   // one pixel: every tap but the centre in the pads
      {1, 16, 32, 6, 6, 3, 3, 1, {0, 0, 0, 0}},   // no pads: 4 x 4 from 6 x 6
      {1, 16, 16, 9, 10, 3, 3, 1, {0, 1, 1, 0}},  // pads on two sides
      {1, 16, 16, 7, 7, 3, 3, 1, {2, 2, 2, 2}},   // pads wider than the taps' reach
      {1, 64, 64, 66, 40},                        // 170 tiles: several chunks and a short last one
      {1, 16, 16, 3, 50},                         // one row of tiles
      {1, 144, 48, 10, 10},                       // nine input blocks: the 1x1 loops' weight chunks
  };
  const std::vector<std::vector<PostOp>> post_op_sets = {
      {},
      {{PostOpKind::Relu}},
      {{PostOpKind::Clip, 0.0f, 6.0f}},
      {{PostOpKind::Sigmoid}},
      {{PostOpKind::Linear, 0.5f, -0.25f}},
      {{PostOpKind::AddResidual}, {PostOpKind::Relu}},
      {{PostOpKind::Relu}, {PostOpKind::AddResidual}},
  };
  uint32_t seed = 7100;
  for (auto tile : kTiles) {
    const std::string tile_name =
        tile == dnnl_impl::WinogradTile::F3x3 ? "F(3x3, 3x3)" : "F(4x4, 3x3)";
    for (int threads : {1, 2}) {
      for (const ConvGeometry& s : shapes) {
        for (size_t k = 0; k < post_op_sets.size(); ++k) {
          const bool bias = k % 2 == 0;
          SCOPED_TRACE(tile_name + " " + name_of(s) + (bias ? " bias" : "") +
                       post_ops_name(post_op_sets[k]) + ", " + std::to_string(threads) +
                       " thread(s)");
          WinogradCase w(s, bias, post_op_sets[k], threads, seed);
          auto op = w.create(tile);
          ASSERT_TRUE(op.ok()) << op.status();
          EXPECT_NE((*op)->describe().find(tile_name), std::string::npos) << (*op)->describe();
          expect_winograd_near(w.c.run(**op), w.expected, w.magnitude);
        }
      }
    }
  }
}

// In a function of blocked Convs its neighbours hand it nChw16c: each of the input, the
// output and the residual given natively or plain; the output's padding lanes written zero.
TEST(WinogradConv, ReadsAndWritesNChw16cNativelyOrPlain) {
  uint32_t seed = 7300;
  for (int native = 0; native < 8; ++native) {
    const bool native_in = (native & 1) != 0, native_out = (native & 2) != 0,
               native_residual = (native & 4) != 0;
    SCOPED_TRACE(std::string(native_in ? "native in " : "plain in ") +
                 (native_out ? "native out " : "plain out ") +
                 (native_residual ? "native residual" : "plain residual"));
    for (auto tile : kTiles) {
      // (A sigmoid makes 0.5 of a zero sum: the padding lanes must still be written zero.)
      WinogradCase w({2, 40, 24, 9, 6}, true, {{PostOpKind::AddResidual}, {PostOpKind::Sigmoid}}, 1,
                     seed);
      auto op = w.create(tile);
      ASSERT_TRUE(op.ok()) << op.status();
      expect_winograd_near(
          run_blocked16(**op, w.c.at(0), w.c.at(3), 3, 4, native_in, native_out, native_residual),
          w.expected, w.magnitude);
    }
  }
}

// The transformed tiles and products live in scratch memory other steps also write: each run
// writes before it reads, at 1 and 2 threads (each thread its own part).
TEST(WinogradConv, RunsInScratchMemoryOthersSpoil) {
  uint32_t seed = 7500;
  for (int threads : {1, 2}) {
    SCOPED_TRACE(std::to_string(threads) + " thread(s)");
    for (auto tile : kTiles) {
      WinogradCase w({1, 32, 48, 30, 22}, true, {{PostOpKind::Relu}}, threads, seed);
      auto op = w.create(tile);
      ASSERT_TRUE(op.ok()) << op.status();
      uint64_t placed = 0;
      expect_winograd_near(w.c.run_in_spoiled_scratch(**op, placed), w.expected, w.magnitude);
      EXPECT_GT(placed, 0u);
    }
  }
}

// Through CpuOp::create: a Conv given to Winograd takes these loops over images of 12 x 12
// pixels or more, and over smaller ones when asked (avoid_generated_code); oneDNN's kernel over
// smaller ones when not; the direct loops when not given to Winograd. Convs of other geometry,
// groups or Gelu go elsewhere, still right.
TEST(WinogradConv, IsChosenForConvsGivenToWinograd) {
  uint32_t seed = 7700;
  struct Choice {
    const char* name;
    int64_t hw;
    bool winograd, avoid_generated_code, own;
  };
  for (const Choice& choice :
       {Choice{"large image", 28, true, false, true}, Choice{"12 x 12", 12, true, false, true},
        Choice{"small image", 8, true, false, false},
        Choice{"small image, no generated code", 8, true, true, true},
        Choice{"direct", 28, false, false, false}}) {
    SCOPED_TRACE(choice.name);
    WinogradCase w({1, 64, 64, choice.hw, choice.hw}, true, {{PostOpKind::Relu}}, 2, seed);
    w.c.desc.winograd = choice.winograd;
    w.c.desc.avoid_generated_code = choice.avoid_generated_code;
    expect_winograd_near(w.c.run(), w.expected, w.magnitude);
    EXPECT_EQ(w.c.description.find(kWinograd) != std::string::npos, choice.own) << w.c.description;
  }
  auto other = [](std::string why, std::vector<int64_t> x, std::vector<int64_t> w,
                  std::vector<ir::Attribute> attributes, std::vector<PostOp> post_ops = {}) {
    return OtherConv{.why = std::move(why),
                     .x = std::move(x),
                     .w = std::move(w),
                     .attributes = std::move(attributes),
                     .post_ops = std::move(post_ops),
                     .winograd = true,
                     .avoid_generated_code = true};
  };
  const std::vector<OtherConv> others = {
      other("stride 2", {1, 32, 14, 14}, {32, 32, 3, 3}, {ints("strides", {2, 2})}),
      other("5x5", {1, 32, 14, 14}, {32, 32, 5, 5}, {}),
      other("dilation 2", {1, 32, 14, 14}, {32, 32, 3, 3}, {ints("dilations", {2, 2})}),
      other("groups", {1, 32, 14, 14}, {32, 16, 3, 3}, {int_attr("group", 2)}),
      other("an image of 8 channels", {1, 8, 14, 14}, {32, 8, 3, 3}, {}),
      other("Gelu", {1, 32, 14, 14}, {32, 32, 3, 3}, {}, {{PostOpKind::Gelu}}),
  };
  expect_left_to_others(others, winograd_loops, kWinograd, seed);
}

// The loops' own choice: 4 x 4 output tiles unless they would waste more of the image's edges
// than 3 x 3 ones (14 x 14, 13 x 13 pixels); both right.
TEST(WinogradConv, TakesFourByFourTilesWhereTheyWasteLittle) {
  uint32_t seed = 7600;
  for (auto [h, w, tile] : {std::tuple{40, 40, "F(4x4, 3x3)"},
                            {16, 16, "F(4x4, 3x3)"},
                            {10, 10, "F(4x4, 3x3)"},
                            {4, 8, "F(4x4, 3x3)"},
                            {14, 14, "F(3x3, 3x3)"},
                            {13, 13, "F(3x3, 3x3)"}}) {
    SCOPED_TRACE(std::to_string(h) + " x " + std::to_string(w));
    WinogradCase c({1, 32, 32, h, w}, true, {{PostOpKind::Relu}}, 1, seed);
    auto op = c.create();
    ASSERT_TRUE(op.ok()) << op.status();
    EXPECT_NE((*op)->describe().find(tile), std::string::npos) << (*op)->describe();
    expect_winograd_near(c.c.run(**op), c.expected, c.magnitude);
  }
}

// OpDesc::winograd_one_tile (a shape-generic plan's Convs): 4 x 4 tiles at 14 x 14 too, so
// that every image size reads one packing of the weights.
TEST(WinogradConv, OneTileForEveryImageSizeWhenAsked) {
  uint32_t seed = 7650;
  for (bool one_tile : {false, true}) {
    SCOPED_TRACE(one_tile ? "one tile" : "the loops' choice");
    WinogradCase w({1, 32, 32, 14, 14}, true, {{PostOpKind::Relu}}, 1, seed);
    w.c.desc.winograd = true;
    w.c.desc.winograd_one_tile = one_tile;
    expect_winograd_near(w.c.run(), w.expected, w.magnitude);
    EXPECT_NE(w.c.description.find(one_tile ? "F(4x4, 3x3)" : "F(3x3, 3x3)"), std::string::npos)
        << w.c.description;
  }
}

// A residual of another shape than the output's is refused, naming both.
TEST(WinogradConv, RefusesAResidualOfAnotherShape) {
  uint32_t seed = 7900;
  WinogradCase w({1, 16, 16, 8, 8}, false, {{PostOpKind::AddResidual}}, 1, seed);
  w.c.desc.inputs.back().sizes = {1, 16, 8, 9};
  auto op = w.create();
  ASSERT_FALSE(op.ok());
  EXPECT_EQ(op.error(), runtime::Error::InvalidArgument);
  EXPECT_NE(op.status().message().find("[1, 16, 8, 9]"), std::string::npos) << op.status();
  EXPECT_NE(op.status().message().find("[1, 16, 8, 8]"), std::string::npos) << op.status();
}

}  // namespace
}  // namespace kiln::engine::cpu
