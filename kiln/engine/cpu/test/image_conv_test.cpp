// The first Convs of blocked networks, over images of 1-15 channels, on kiln's loops
// (image_conv.cpp) against the reference kernel on seeded random data: channel counts below a
// block, output channels around the blocks of 16 and their pairs, kernels (3x3, 7x7, 5x5, 1x3,
// 1x1), strides, pads of every side (columns and rows whose taps reach past the image, rows with
// none inside), row widths around the tiles of 12, batches, biases, post-ops applied in the tiles
// (none, Relu, a Clip keeping zero) and after them (others, residuals), 1 and 2 threads; the
// image read plain, the output and the residual nChw16c or plain; the choice through
// CpuOp::create and the Convs left to other kernels.
#include <kiln/engine/cpu/dnnl_common.h>
#include <kiln/engine/cpu/test/blocked16.h>
#include <kiln/engine/cpu/test/conv_case.h>
#include <kiln/kernels/kernels.h>

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::engine::cpu {
namespace {

using namespace test_support;  // NOLINT(google-build-using-namespace): test helpers

constexpr const char* kImageConv = "kiln image Conv";

// The image Conv loops' op, not through CpuOp::create.
runtime::Result<std::unique_ptr<CpuOp>> create_loops(ConvCase& s) {
  return s.c.create_with(dnnl_impl::create_image_conv);
}

TEST(ImageConv, MatchesTheReferenceOverGeometriesPostOpsAndThreads) {
  const std::vector<ConvGeometry> geometries = {
      {1, 3, 16, 32, 32, 3, 3, 2},                 // an RGB stem: 3x3 stride 2, one block
      {2, 3, 40, 15, 27, 3, 3, 2},                 // a batch, odd sizes, a pair and a padded one
      {1, 3, 32, 9, 30, 3, 3, 1},                  // stride 1: two tiles and a tail a row
      {1, 1, 24, 6, 8, 5, 5, 1, {2, 2, 2, 2}},     // one channel, 5x5, a padded block
      {1, 4, 64, 20, 20, 7, 7, 2, {3, 3, 3, 3}},   // a 7x7 stem of stride 2
      {1, 15, 16, 7, 13, 1, 3, 1, {0, 1, 0, 1}},   // 15 channels, 1x3
      {1, 8, 16, 8, 8, 3, 3, 1, {0, 0, 0, 0}},     // no pads
      {1, 3, 16, 4, 4, 3, 3, 1, {2, 3, 0, 1}},     // uneven pads, rows with no tap inside
      {1, 3, 16, 3, 3, 3, 3, 1, {4, 4, 4, 4}},     // pads past the kernel: columns of none
      {1, 3, 16, 9, 9, 3, 3, 2, {1, 1, 1, 1}, 3},  // vertical stride 3
      {1, 2, 16, 5, 25, 1, 1, 1, {0, 0, 0, 0}},    // 1x1: 25 pixels, tiles of 12, 13
      {1, 3, 32, 11, 1, 3, 3, 1, {1, 1, 1, 1}},    // one column
  };
  const std::vector<std::vector<PostOp>> post_op_sets = {
      {},
      {{PostOpKind::Relu}},
      {{PostOpKind::Clip, 0.0f, 6.0f}},
      {{PostOpKind::Clip, 0.5f, 6.0f}},  // (raises zero: after the tiles, padding lanes zeroed)
      {{PostOpKind::Sigmoid}},
      {{PostOpKind::Linear, 0.5f, -0.25f}, {PostOpKind::Relu}},
      {{PostOpKind::AddResidual}, {PostOpKind::Relu}},
      {{PostOpKind::Relu}, {PostOpKind::AddResidual}},
  };
  uint32_t seed = 8100;
  for (int threads : {1, 2}) {
    for (const ConvGeometry& g : geometries) {
      for (size_t k = 0; k < post_op_sets.size(); ++k) {
        const bool bias = k % 2 == 0;
        SCOPED_TRACE(name_of(g) + (bias ? " bias" : "") + post_ops_name(post_op_sets[k]) + ", " +
                     std::to_string(threads) + " thread(s)");
        ConvCase s(g, bias, post_op_sets[k], threads, seed);
        auto op = create_loops(s);
        ASSERT_TRUE(op.ok()) << op.status();
        EXPECT_NE((*op)->describe().find(kImageConv), std::string::npos) << (*op)->describe();
        expect_near(s.c.run(**op), s.expected);
      }
    }
  }
}

// The image is read plain (it has no native layout); the output and the residual are each
// handed over in nChw16c or plain, the output's padding lanes written zero.
TEST(ImageConv, ReadsThePlainImageAndWritesNChw16cNativelyOrPlain) {
  uint32_t seed = 8300;
  for (int native = 0; native < 4; ++native) {
    const bool native_out = (native & 1) != 0, native_residual = (native & 2) != 0;
    SCOPED_TRACE(std::string(native_out ? "native out " : "plain out ") +
                 (native_residual ? "native residual" : "plain residual"));
    // (A sigmoid makes 0.5 of a zero sum: the padding lanes must still be written zero.)
    ConvCase s({2, 3, 24, 9, 14, 3, 3, 2}, true, {{PostOpKind::AddResidual}, {PostOpKind::Sigmoid}},
               1, seed);
    auto op = create_loops(s);
    ASSERT_TRUE(op.ok()) << op.status();
    EXPECT_FALSE((*op)->native_input_layout(0).has_value());
    EXPECT_FALSE((*op)->use_native_input(0).ok());
    expect_near(run_blocked16(**op, s.c.at(0), s.c.at(3), 3, 4, false, native_out, native_residual,
                              /*plain_input=*/true),
                s.expected);
  }
}

// Through CpuOp::create: a blocked Conv over an image takes the loops; others go elsewhere,
// still right.
TEST(ImageConv, IsChosenForBlockedConvsOverImages) {
  uint32_t seed = 8500;
  ConvCase s({1, 3, 32, 64, 64, 3, 3, 2}, true, {{PostOpKind::Relu}}, 2, seed);
  expect_near(s.c.run(), s.expected);
  EXPECT_NE(s.c.description.find(kImageConv), std::string::npos) << s.c.description;

  const std::vector<OtherConv> others = {
      {.why = "16 channels", .x = {1, 16, 32, 32}, .w = {16, 16, 3, 3}},
      {.why = "groups",
       .x = {1, 4, 32, 32},
       .w = {16, 2, 3, 3},
       .attributes = {int_attr("group", 2)}},
      {.why = "dilations",
       .x = {1, 3, 32, 32},
       .w = {16, 3, 3, 3},
       .attributes = {ints("dilations", {2, 2})}},
      {.why = "a horizontal stride of 3",
       .x = {1, 3, 32, 32},
       .w = {16, 3, 3, 3},
       .attributes = {ints("strides", {1, 3})}},
      {.why = "not among blocked Convs",
       .x = {1, 3, 32, 32},
       .w = {16, 3, 3, 3},
       .layout = ActivationLayout::Preferred},
      {.why = "Gelu", .x = {1, 3, 32, 32}, .w = {16, 3, 3, 3}, .post_ops = {{PostOpKind::Gelu}}},
      {.why = "over 1024 taps", .x = {1, 15, 32, 32}, .w = {16, 15, 9, 9}},
  };
  expect_left_to_others(others, dnnl_impl::create_image_conv, kImageConv, seed);
}

// A residual of another shape than the output's is refused, naming both.
TEST(ImageConv, RefusesAResidualOfAnotherShape) {
  uint32_t seed = 8700;
  ConvCase s({1, 3, 16, 16, 16, 3, 3, 2}, false, {{PostOpKind::AddResidual}}, 1, seed);
  s.c.desc.inputs.back().sizes = {1, 16, 8, 9};
  auto op = create_loops(s);
  ASSERT_FALSE(op.ok());
  EXPECT_EQ(op.error(), runtime::Error::InvalidArgument);
  EXPECT_NE(op.status().message().find("[1, 16, 8, 9]"), std::string::npos) << op.status();
  EXPECT_NE(op.status().message().find("[1, 16, 8, 8]"), std::string::npos) << op.status();
}

}  // namespace
}  // namespace kiln::engine::cpu
