// Depthwise Convs among blocked Convs on kiln's loops (depthwise_conv.cpp) against the reference
// kernel on seeded random data: channel counts around the blocks of 16 (the last block's padding
// lanes), kernels (3x3, 5x5, 1x3, 7x1), strides (horizontal 1 and 2, vertical 1 to 3), pads of
// every side (columns whose taps reach past the input, rows with none inside), row widths around
// the tiles of 8, batches, biases, post-ops and residuals, 1 and 2 threads; the input, output and
// residual each nChw16c or plain; the choice through CpuOp::create and the Convs left to other
// kernels.
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

constexpr const char* kDepthwise = "kiln depthwise Conv";

// The depthwise loops' op, not through CpuOp::create (narrow maps included).
runtime::Result<std::unique_ptr<CpuOp>> create_loops(ConvCase& s) {
  s.c.desc.avoid_generated_code = true;
  return s.c.create_with(dnnl_impl::create_depthwise_conv);
}

// {batch, channels, out_channels, height, width, kernel_h, kernel_w, stride, pads, stride_h,
// group}: one output channel per input channel.
ConvGeometry depthwise(int64_t n, int64_t c, int64_t h, int64_t w, int64_t kh, int64_t kw,
                       int64_t stride, std::vector<int64_t> pads = {1, 1, 1, 1},
                       int64_t stride_h = 0) {
  return {n, c, c, h, w, kh, kw, stride, std::move(pads), stride_h, c};
}

TEST(DepthwiseConv, MatchesTheReferenceOverGeometriesPostOpsAndThreads) {
  const std::vector<ConvGeometry> geometries = {
      depthwise(1, 32, 20, 20, 3, 3, 1),                 // MobileNet's: two tiles and a tail
      depthwise(2, 24, 15, 27, 3, 3, 2),                 // a batch, a padded block, stride 2
      depthwise(1, 16, 9, 7, 3, 3, 1),                   // a narrow map: one tile of 5
      depthwise(1, 40, 11, 13, 5, 5, 1, {2, 2, 2, 2}),   // 5x5 (columns unrolled at run time)
      depthwise(1, 16, 12, 18, 5, 5, 2, {2, 2, 2, 2}),   // 5x5 of stride 2
      depthwise(1, 8, 6, 10, 1, 3, 1, {0, 1, 0, 1}),     // fewer channels than a block, 1x3
      depthwise(1, 16, 10, 6, 7, 1, 1, {3, 0, 3, 0}),    // 7x1
      depthwise(1, 16, 8, 8, 3, 3, 1, {0, 0, 0, 0}),     // no pads
      depthwise(1, 16, 4, 5, 3, 3, 1, {2, 3, 0, 1}),     // uneven pads, rows with no tap inside
      depthwise(1, 16, 3, 3, 3, 3, 1, {4, 4, 4, 4}),     // pads past the kernel: columns of none
      depthwise(1, 16, 9, 9, 3, 3, 2, {1, 1, 1, 1}, 3),  // vertical stride 3
      depthwise(1, 32, 11, 1, 3, 3, 1),                  // one column
  };
  const std::vector<std::vector<PostOp>> post_op_sets = {
      {},
      {{PostOpKind::Relu}},
      {{PostOpKind::Clip, 0.0f, 6.0f}},
      {{PostOpKind::Clip, 0.5f, 6.0f}},  // (raises zero: the padding lanes written zero still)
      {{PostOpKind::Sigmoid}},
      {{PostOpKind::Linear, 0.5f, -0.25f}, {PostOpKind::Swish}},
      {{PostOpKind::AddResidual}, {PostOpKind::Relu}},
      {{PostOpKind::Tanh}, {PostOpKind::AddResidual}},
  };
  uint32_t seed = 9100;
  for (int threads : {1, 2}) {
    for (const ConvGeometry& g : geometries) {
      for (size_t k = 0; k < post_op_sets.size(); ++k) {
        const bool bias = k % 2 == 0;
        SCOPED_TRACE(name_of(g) + (bias ? " bias" : "") + post_ops_name(post_op_sets[k]) + ", " +
                     std::to_string(threads) + " thread(s)");
        ConvCase s(g, bias, post_op_sets[k], threads, seed);
        auto op = create_loops(s);
        ASSERT_TRUE(op.ok()) << op.status();
        EXPECT_NE((*op)->describe().find(kDepthwise), std::string::npos) << (*op)->describe();
        expect_near(s.c.run(**op), s.expected);
      }
    }
  }
}

// The input, the output and the residual are each handed over in nChw16c or plain; the
// output's padding lanes are written zero.
TEST(DepthwiseConv, ReadsAndWritesNChw16cNativelyOrPlain) {
  uint32_t seed = 9300;
  for (int native = 0; native < 8; ++native) {
    const bool native_in = (native & 1) != 0, native_out = (native & 2) != 0,
               native_residual = (native & 4) != 0;
    SCOPED_TRACE(std::string(native_in ? "native in, " : "plain in, ") +
                 (native_out ? "native out, " : "plain out, ") +
                 (native_residual ? "native residual" : "plain residual"));
    // (A sigmoid makes 0.5 of a zero sum: the padding lanes must still be written zero.)
    ConvCase s(depthwise(2, 24, 9, 14, 3, 3, 2), true,
               {{PostOpKind::AddResidual}, {PostOpKind::Sigmoid}}, 1, seed);
    auto op = create_loops(s);
    ASSERT_TRUE(op.ok()) << op.status();
    expect_near(
        run_blocked16(**op, s.c.at(0), s.c.at(3), 3, 4, native_in, native_out, native_residual),
        s.expected);
  }
}

// Through CpuOp::create: a blocked depthwise Conv over rows of 10 or more pixels takes the
// loops, a narrower one too when generated code is to be avoided; others go elsewhere, still
// right.
TEST(DepthwiseConv, IsChosenForBlockedDepthwiseConvs) {
  uint32_t seed = 9500;
  ConvCase wide(depthwise(1, 32, 28, 28, 3, 3, 1), true, {{PostOpKind::Clip, 0.0f, 6.0f}}, 2, seed);
  expect_near(wide.c.run(), wide.expected);
  EXPECT_NE(wide.c.description.find(kDepthwise), std::string::npos) << wide.c.description;

  ConvCase narrow(depthwise(1, 32, 7, 7, 3, 3, 1), true, {}, 1, seed);
  narrow.c.desc.avoid_generated_code = true;
  expect_near(narrow.c.run(), narrow.expected);
  EXPECT_NE(narrow.c.description.find(kDepthwise), std::string::npos) << narrow.c.description;

  const std::vector<OtherConv> others = {
      {.why = "rows of 7 pixels (oneDNN's kernel is faster there)",
       .x = {1, 32, 7, 7},
       .w = {32, 1, 3, 3},
       .attributes = {int_attr("group", 32), ints("pads", {1, 1, 1, 1})}},
      {.why = "one group", .x = {1, 16, 32, 32}, .w = {16, 16, 3, 3}},
      {.why = "two channels a group",
       .x = {1, 32, 32, 32},
       .w = {16, 2, 3, 3},
       .attributes = {int_attr("group", 16)}},
      {.why = "two output channels a channel",
       .x = {1, 16, 32, 32},
       .w = {32, 1, 3, 3},
       .attributes = {int_attr("group", 16)}},
      {.why = "dilations",
       .x = {1, 16, 32, 32},
       .w = {16, 1, 3, 3},
       .attributes = {int_attr("group", 16), ints("dilations", {2, 2})}},
      {.why = "a horizontal stride of 3",
       .x = {1, 16, 32, 32},
       .w = {16, 1, 3, 3},
       .attributes = {int_attr("group", 16), ints("strides", {1, 3})}},
      {.why = "not among blocked Convs",
       .x = {1, 16, 32, 32},
       .w = {16, 1, 3, 3},
       .attributes = {int_attr("group", 16)},
       .layout = ActivationLayout::Preferred},
      {.why = "Gelu",
       .x = {1, 16, 32, 32},
       .w = {16, 1, 3, 3},
       .attributes = {int_attr("group", 16)},
       .post_ops = {{PostOpKind::Gelu}}},
  };
  expect_left_to_others(others, dnnl_impl::create_depthwise_conv, kDepthwise, seed);
}

// A residual of another shape than the output's is refused, naming both.
TEST(DepthwiseConv, RefusesAResidualOfAnotherShape) {
  uint32_t seed = 9700;
  ConvCase s(depthwise(1, 16, 16, 16, 3, 3, 2), false, {{PostOpKind::AddResidual}}, 1, seed);
  s.c.desc.inputs.back().sizes = {1, 16, 8, 9};
  auto op = create_loops(s);
  ASSERT_FALSE(op.ok());
  EXPECT_EQ(op.error(), runtime::Error::InvalidArgument);
  EXPECT_NE(op.status().message().find("[1, 16, 8, 9]"), std::string::npos) << op.status();
  EXPECT_NE(op.status().message().find("[1, 16, 8, 8]"), std::string::npos) << op.status();
}

}  // namespace
}  // namespace kiln::engine::cpu
