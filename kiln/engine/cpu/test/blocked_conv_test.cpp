// Convs among blocked Convs on kiln's loops (blocked_conv.cpp, conv_loops.cpp) against the
// reference kernel on seeded random data.
// - 1x1 Convs: channel counts around the blocks of 16 and the pairs of blocks, pixel counts
//   around the tiles of 12, batches, biases, post-ops with a residual before or after an
//   activation, threads; nChw16c in, out and residual, each native or plain.
// - Convs of taps: kernel sizes, strides 1 and 2, pads of every side (columns whose taps reach
//   past the input's edges, rows with none inside), row widths around the tiles; the padded
//   input in storage shared with other ops.
// - The Convs they leave to oneDNN.
#include <kiln/engine/cpu/dnnl_common.h>
#include <kiln/engine/cpu/test/blocked16.h>
#include <kiln/engine/cpu/test/conv_case.h>
#include <kiln/kernels/kernels.h>

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace kiln::engine::cpu {
namespace {

using namespace test_support;  // NOLINT(google-build-using-namespace): test helpers
using runtime::ScalarType;
using runtime::Tensor;

constexpr const char* kPointwise = "kiln pointwise Conv";
constexpr const char* kOwnConv = "kiln Conv ";

// The loops' op for `c` (its constants bound as `Case::create` binds them), not through
// CpuOp::create, which gives Convs of little work to the small loops.
runtime::Result<std::unique_ptr<CpuOp>> create_loops(Case& c) {
  return c.create_with(dnnl_impl::create_blocked_conv);
}

struct Shape {
  int64_t batch, channels, out_channels, height, width, stride = 1;
};

// The geometry of a 1x1 Conv of `s` (no pads).
ConvGeometry pointwise(const Shape& s) {
  return ConvGeometry{s.batch, s.channels, s.out_channels, s.height,    s.width,
                      1,       1,          s.stride,       {0, 0, 0, 0}};
}

TEST(PointwiseConv, MatchesTheReferenceOverChannelsPixelsPostOpsAndThreads) {
  const std::vector<Shape> shapes = {
      {1, 16, 16, 1, 1},     // one block each way, one pixel
      {1, 24, 48, 5, 7},     // a padded input block, three output blocks (a pair and one)
      {2, 40, 50, 13, 13},   // a batch, partial blocks both ways, 14 tiles and a tail
      {1, 64, 32, 12, 1},    // one whole tile
      {1, 96, 200, 3, 9},    // many pairs of blocks: chunks of weights
      {2, 32, 40, 9, 8, 2},  // stride 2 (a downsampling projection): 5 x 4 of 9 x 8
      {1, 16, 16, 7, 7, 3},  // stride 3
      // Many input channels (a classifier's 512 -> 1000), the last block padded; stride 2:
      // sums over the input channels in parts (3 of 11 blocks, 2 of 10), partial sums waiting
      // in the output; five parts of 12 (MobileNet's 960 -> 160) over a tile and a tail.
      {1, 520, 40, 3, 5},
      {2, 300, 20, 4, 4, 2},
      {1, 960, 48, 4, 4},
  };
  const std::vector<std::vector<PostOp>> post_op_sets = {
      {},
      {{PostOpKind::Relu}},
      {{PostOpKind::Clip, 0.0f, 6.0f}},
      {{PostOpKind::Tanh}},
      {{PostOpKind::Sigmoid}},
      {{PostOpKind::Swish}},
      {{PostOpKind::Linear, 0.5f, -0.25f}},
      {{PostOpKind::AddResidual}, {PostOpKind::Relu}},
      {{PostOpKind::Relu}, {PostOpKind::AddResidual}},
  };
  uint32_t seed = 5100;
  for (int threads : {1, 2}) {
    for (const Shape& s : shapes) {
      for (bool bias : {true, false}) {
        for (const auto& post_ops : post_op_sets) {
          SCOPED_TRACE("N" + std::to_string(s.batch) + " " + std::to_string(s.channels) + "->" +
                       std::to_string(s.out_channels) + " " + std::to_string(s.height) + "x" +
                       std::to_string(s.width) + (bias ? " bias" : "") + post_ops_name(post_ops) +
                       ", " + std::to_string(threads) + " thread(s)");
          ConvCase p(pointwise(s), bias, post_ops, threads, seed);
          auto op = create_loops(p.c);
          ASSERT_TRUE(op.ok()) << op.status();
          expect_near(p.c.run(**op), p.expected);
        }
      }
    }
  }
}

// In a function of blocked Convs its neighbours hand it nChw16c: each of the input, the
// output and the residual given natively or plain.
TEST(PointwiseConv, ReadsAndWritesNChw16cNativelyOrPlain) {
  uint32_t seed = 5300;
  for (int native = 0; native < 16; ++native) {
    // Bit 3: stride 2, whose pixels are compacted from the native or the converted input.
    const Shape s = (native & 8) != 0 ? Shape{2, 40, 24, 9, 6, 2} : Shape{2, 40, 24, 5, 6};
    const bool native_in = (native & 1) != 0, native_out = (native & 2) != 0,
               native_residual = (native & 4) != 0;
    SCOPED_TRACE(std::string(native_in ? "native in " : "plain in ") +
                 (native_out ? "native out " : "plain out ") +
                 (native_residual ? "native residual" : "plain residual") + ", stride " +
                 std::to_string(s.stride));
    // (A sigmoid makes 0.5 of a zero sum: the padding lanes must still be written zero.)
    ConvCase p(pointwise(s), true, {{PostOpKind::AddResidual}, {PostOpKind::Sigmoid}}, 1, seed);
    auto op = create_loops(p.c);
    ASSERT_TRUE(op.ok()) << op.status();
    expect_near(
        run_blocked16(**op, p.c.at(0), p.c.at(3), 3, 4, native_in, native_out, native_residual),
        p.expected);
  }
}

// Through CpuOp::create: a blocked 1x1 Conv of more than little work takes the loops.
TEST(PointwiseConv, IsChosenForBlockedOneByOneConvs) {
  uint32_t seed = 5500;
  ConvCase p(pointwise({1, 64, 96, 14, 14}), true, {{PostOpKind::Clip, 0.0f, 6.0f}}, 2, seed);
  expect_near(p.c.run(), p.expected);
  EXPECT_NE(p.c.description.find(kPointwise), std::string::npos) << p.c.description;
}

TEST(PointwiseConv, LeavesOtherConvsToOneDnn) {
  const std::vector<OtherConv> others = {
      {.why = "groups",
       .x = {1, 64, 14, 14},
       .w = {64, 32, 1, 1},
       .attributes = {int_attr("group", 2)}},
      {.why = "an image of 8 channels", .x = {1, 8, 56, 56}, .w = {64, 8, 1, 1}},
      {.why = "not among blocked Convs",
       .x = {1, 64, 14, 14},
       .w = {64, 64, 1, 1},
       .layout = ActivationLayout::Preferred},
      {.why = "an output over 2 MB", .x = {1, 16, 112, 112}, .w = {96, 16, 1, 1}},
      {.why = "Gelu", .x = {1, 64, 14, 14}, .w = {64, 64, 1, 1}, .post_ops = {{PostOpKind::Gelu}}},
  };
  expect_left_to_others(others, dnnl_impl::create_blocked_conv, kPointwise, 5600);
}

TEST(BlockedConv, TapsMatchTheReferenceOverGeometriesPostOpsAndThreads) {
  const std::vector<ConvGeometry> geometries = {
      {1, 16, 16, 5, 5},                            // one block each way, all edges
      {1, 24, 48, 7, 13},                           // a padded input block, a pair and one
      {2, 40, 50, 9, 30},                           // a batch, partial blocks, 2 tiles + tail
      {1, 32, 32, 14, 14, 3, 3, 2},                 // stride 2
      {1, 16, 20, 15, 27, 3, 3, 2, {1, 1, 1, 1}},   // stride 2, odd sizes
      {1, 48, 16, 6, 8, 5, 5, 1, {2, 2, 2, 2}},     // 5x5
      {1, 16, 32, 6, 9, 1, 3, 1, {0, 1, 0, 1}},     // 1x3
      {1, 16, 32, 9, 6, 3, 1, 1, {1, 0, 1, 0}},     // 3x1
      {1, 16, 16, 8, 8, 3, 3, 1, {0, 0, 0, 0}},     // no pads
      {1, 16, 16, 4, 4, 3, 3, 1, {2, 3, 0, 1}},     // uneven pads, rows with no tap inside
      {1, 32, 16, 10, 7, 7, 7, 2, {3, 3, 3, 3}},    // a 7x7 stem of stride 2
      {1, 16, 16, 9, 9, 3, 3, 2, {1, 1, 1, 1}, 3},  // vertical stride 3
      {1, 16, 16, 3, 3, 3, 3, 1, {4, 4, 4, 4}},     // pads past the kernel: columns of none
      {1, 272, 40, 5, 5},                           // many input channels, the last padded
      {1, 16, 24, 5, 6, 1, 1, 1, {1, 1, 1, 1}},     // a 1x1 Conv with pads
  };
  const std::vector<std::vector<PostOp>> post_op_sets = {
      {},
      {{PostOpKind::Relu}},
      {{PostOpKind::Clip, 0.0f, 6.0f}},
      {{PostOpKind::Sigmoid}},
      {{PostOpKind::AddResidual}, {PostOpKind::Relu}},
  };
  uint32_t seed = 5700;
  for (int threads : {1, 2}) {
    for (const ConvGeometry& g : geometries) {
      for (bool bias : {true, false}) {
        for (const auto& post_ops : post_op_sets) {
          SCOPED_TRACE(name_of(g) + (bias ? " bias" : "") + post_ops_name(post_ops) + ", " +
                       std::to_string(threads) + " thread(s)");
          ConvCase s(g, bias, post_ops, threads, seed);
          auto op = create_loops(s.c);
          ASSERT_TRUE(op.ok()) << op.status();
          EXPECT_NE((*op)->describe().find(kOwnConv), std::string::npos) << (*op)->describe();
          expect_near(s.c.run(**op), s.expected);
        }
      }
    }
  }
}

// Its neighbours hand it nChw16c: the input and the output each given natively or plain; the
// output's padding lanes are written zero; the padded input's storage is shared.
TEST(BlockedConv, TapsReadAndWriteNChw16cNativelyOrPlain) {
  uint32_t seed = 5900;
  for (int native = 0; native < 4; ++native) {
    const bool native_in = (native & 1) != 0, native_out = (native & 2) != 0;
    SCOPED_TRACE(std::string(native_in ? "native in " : "plain in ") +
                 (native_out ? "native out" : "plain out"));
    ConvCase s({2, 40, 24, 7, 9}, true, {{PostOpKind::Sigmoid}}, 2, seed);
    auto op_or = create_loops(s.c);
    ASSERT_TRUE(op_or.ok()) << op_or.status();
    CpuOp& op = **op_or;
    const std::vector<int64_t> x_sizes = s.c.desc.inputs[0].sizes;
    ASSERT_TRUE(op.native_input_layout(0).has_value());
    EXPECT_EQ(op.native_input_layout(0)->id, dnnl_impl::layout_bytes(blocked16_md(x_sizes)));
    if (native_in) {
      ASSERT_TRUE(op.use_native_input(0).ok());
    }
    if (native_out) {
      ASSERT_TRUE(op.use_native_output(0).ok());
    }
    ASSERT_TRUE(op.finish().ok());
    std::vector<float> x_data = to_blocked16(s.c.at(0), 0.0f);
    Tensor x_native(ScalarType::Float32, x_sizes, x_data.data(), runtime::ShapeDynamism::Static,
                    x_data.size() * sizeof(float));
    std::vector<float> y_data(blocked16_md(s.out).get_size() / sizeof(float), std::nanf(""));
    Tensor y_native(ScalarType::Float32, s.out, y_data.data(), runtime::ShapeDynamism::Static,
                    y_data.size() * sizeof(float));
    OwnedTensor y_plain = zeros(s.out);
    const Tensor* inputs[] = {native_in ? &x_native : &s.c.at(0), nullptr, nullptr};
    Tensor* out = native_out ? &y_native : &y_plain.tensor();
    // The input with its side pads goes to storage shared with other ops, which may leave
    // anything there between runs.
    ASSERT_GT(op.scratchpad_bytes(), 0u);
    std::vector<float> shared(op.scratchpad_bytes() / sizeof(float) + 16);
    float* at = shared.data() + (16 - reinterpret_cast<uintptr_t>(shared.data()) / 4 % 16) % 16;
    op.use_scratchpad(at);
    for (int run = 0; run < 2; ++run) {
      std::fill(shared.begin(), shared.end(), std::nanf(""));
      ASSERT_TRUE(
          op.run(runtime::Span<const Tensor*>(inputs, 3), runtime::Span<Tensor*>(&out, 1)).ok());
    }
    if (!native_out) {
      expect_near(y_plain, s.expected);
      continue;
    }
    expect_near(from_blocked16(y_data, s.out), s.expected);
    const std::vector<float> zero_padded =
        to_blocked16(from_blocked16(y_data, s.out).tensor(), 0.0f);
    for (size_t i = 0; i < y_data.size(); ++i) {
      ASSERT_EQ(y_data[i], zero_padded[i]) << "padding element " << i;
    }
  }
}

// Through CpuOp::create: a blocked 3x3 Conv not given to Winograd's kernels takes the loops.
TEST(BlockedConv, IsChosenForBlockedConvsOfTaps) {
  uint32_t seed = 6100;
  ConvCase s({1, 32, 48, 20, 20, 3, 3, 2}, true, {{PostOpKind::Relu}}, 2, seed);
  expect_near(s.c.run(), s.expected);
  EXPECT_NE(s.c.description.find(kOwnConv), std::string::npos) << s.c.description;
}

TEST(BlockedConv, LeavesOtherConvsOfTapsToOneDnn) {
  const std::vector<OtherConv> others = {
      {.why = "given to Winograd's kernels",
       .x = {1, 64, 14, 14},
       .w = {64, 64, 3, 3},
       .attributes = {ints("pads", {1, 1, 1, 1})},
       .winograd = true},
      {.why = "dilations",
       .x = {1, 32, 14, 14},
       .w = {32, 32, 3, 3},
       .attributes = {ints("dilations", {2, 2})}},
      {.why = "groups",
       .x = {1, 64, 14, 14},
       .w = {64, 32, 3, 3},
       .attributes = {int_attr("group", 2)}},
      {.why = "a horizontal stride of 3",
       .x = {1, 32, 14, 14},
       .w = {32, 32, 3, 3},
       .attributes = {ints("strides", {1, 3})}},
      {.why = "an image of 3 channels", .x = {1, 3, 32, 32}, .w = {32, 3, 3, 3}},
      {.why = "Gelu", .x = {1, 32, 14, 14}, .w = {32, 32, 3, 3}, .post_ops = {{PostOpKind::Gelu}}},
  };
  expect_left_to_others(others, dnnl_impl::create_blocked_conv, kOwnConv, 6200);
}

}  // namespace
}  // namespace kiln::engine::cpu
