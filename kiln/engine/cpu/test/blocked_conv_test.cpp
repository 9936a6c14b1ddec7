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
#include <kiln/engine/cpu/test/op_case.h>
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
  c.desc.constants.clear();
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    c.desc.constants.push_back(c.constant_flags[i] && c.inputs[i] ? &c.inputs[i]->tensor()
                                                                  : nullptr);
  }
  return dnnl_impl::create_blocked_conv(c.desc);
}

struct Shape {
  int64_t batch, channels, out_channels, height, width, stride = 1;
};

// A 1x1 Conv case: X, W, optionally B, optionally a residual (for AddResidual post-ops);
// `expected` from the reference convolution and post-ops.
struct PointwiseCase {
  Case c{"Conv", {}};
  OwnedTensor expected = zeros({0});
  std::vector<int64_t> out;

  PointwiseCase(const Shape& s, bool bias, const std::vector<PostOp>& post_ops, int threads,
                uint32_t& seed) {
    kernels::ConvOptions options;
    if (s.stride != 1) {
      options.strides = {s.stride, s.stride};
      c.desc.attributes = {ints("strides", options.strides)};
    }
    c.desc.small_ops_own_loops = true;
    c.desc.activation_layout = ActivationLayout::Blocked;
    c.desc.num_threads = threads;
    c.add(random_tensor({s.batch, s.channels, s.height, s.width}, seed++), false);
    c.add(random_tensor({s.out_channels, s.channels, 1, 1}, seed++, -0.3, 0.3), true);
    if (bias) c.add(random_tensor({s.out_channels}, seed++), true);
    out = {s.batch, s.out_channels, (s.height - 1) / s.stride + 1, (s.width - 1) / s.stride + 1};
    expected = zeros(out);
    EXPECT_TRUE(
        kernels::conv(c.at(0), c.at(1), bias ? &c.at(2) : nullptr, options, expected.tensor())
            .ok());
    add_post_ops(c, post_ops, out, seed, expected);
  }
};

TEST(PointwiseConv, MatchesTheReferenceOverChannelsPixelsPostOpsAndThreads) {
  const std::vector<Shape> shapes = {
      {1, 16, 16, 1, 1},     // one block each way, one pixel
      {1, 24, 48, 5, 7},     // a padded input block, three output blocks (a pair and one)
      {2, 40, 50, 13, 13},   // a batch, partial blocks both ways, 14 tiles and a tail
      {1, 64, 32, 12, 1},    // one whole tile
      {1, 96, 200, 3, 9},    // many pairs of blocks: chunks of weights
      {2, 32, 40, 9, 8, 2},  // stride 2 (a downsampling projection): 5 x 4 of 9 x 8
      {1, 16, 16, 7, 7, 3},  // stride 3
      // Many input channels (a classifier's 512 -> 1000), the last block padded; stride 2.
      {1, 520, 40, 3, 5},
      {2, 300, 20, 4, 4, 2},
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
          PointwiseCase p(s, bias, post_ops, threads, seed);
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
    PointwiseCase p(s, true, {{PostOpKind::AddResidual}, {PostOpKind::Sigmoid}}, 1, seed);
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
  PointwiseCase p({1, 64, 96, 14, 14}, true, {{PostOpKind::Clip, 0.0f, 6.0f}}, 2, seed);
  expect_near(p.c.run(), p.expected);
  EXPECT_NE(p.c.description.find(kPointwise), std::string::npos) << p.c.description;
}

TEST(PointwiseConv, LeavesOtherConvsToOneDnn) {
  struct Other {
    std::string why;
    std::vector<int64_t> x, w;
    std::vector<ir::Attribute> attributes;
    ActivationLayout layout = ActivationLayout::Blocked;
    std::vector<PostOp> post_ops;
  };
  const std::vector<Other> others = {
      {"groups",
       {1, 64, 14, 14},
       {64, 32, 1, 1},
       {int_attr("group", 2)},
       ActivationLayout::Blocked,
       {}},
      {"an image of 8 channels", {1, 8, 56, 56}, {64, 8, 1, 1}, {}, ActivationLayout::Blocked, {}},
      {"not among blocked Convs",
       {1, 64, 14, 14},
       {64, 64, 1, 1},
       {},
       ActivationLayout::Preferred,
       {}},
      {"an output over 2 MB", {1, 16, 112, 112}, {96, 16, 1, 1}, {}, ActivationLayout::Blocked, {}},
      {"Gelu",
       {1, 64, 14, 14},
       {64, 64, 1, 1},
       {},
       ActivationLayout::Blocked,
       {{PostOpKind::Gelu}}},
  };
  uint32_t seed = 5600;
  for (const Other& o : others) {
    SCOPED_TRACE(o.why);
    Case c("Conv", o.attributes);
    c.desc.small_ops_own_loops = true;
    c.desc.activation_layout = o.layout;
    c.desc.post_ops = o.post_ops;
    c.add(random_tensor(o.x, seed++), false);
    c.add(random_tensor(o.w, seed++, -0.3, 0.3), true);
    auto op = c.create();
    ASSERT_TRUE(op.ok()) << op.status();
    EXPECT_EQ((*op)->describe().find(kPointwise), std::string::npos) << (*op)->describe();
  }
}

struct Geometry {
  int64_t batch, channels, out_channels, height, width;
  int64_t kernel_h = 3, kernel_w = 3, stride = 1;
  std::vector<int64_t> pads = {1, 1, 1, 1};  // top, left, bottom, right
  int64_t stride_h = 0;                      // 0: `stride`
};

std::string name_of(const Geometry& g) {
  std::string pads;
  for (int64_t p : g.pads) pads += std::to_string(p);
  return "N" + std::to_string(g.batch) + " " + std::to_string(g.channels) + "->" +
         std::to_string(g.out_channels) + " " + std::to_string(g.height) + "x" +
         std::to_string(g.width) + " k" + std::to_string(g.kernel_h) + "x" +
         std::to_string(g.kernel_w) + " s" + std::to_string(g.stride) + " pads " + pads;
}

// A Conv of taps: X, W, optionally B and a residual; `expected` from the reference convolution
// and post-ops.
struct SpatialCase {
  Case c{"Conv", {}};
  OwnedTensor expected = zeros({0});
  std::vector<int64_t> out;

  SpatialCase(const Geometry& g, bool bias, const std::vector<PostOp>& post_ops, int threads,
              uint32_t& seed) {
    kernels::ConvOptions options;
    const int64_t stride_h = g.stride_h != 0 ? g.stride_h : g.stride;
    options.strides = {stride_h, g.stride};
    options.pads = {g.pads[0], g.pads[1], g.pads[2], g.pads[3]};
    c.desc.attributes = {ints("strides", options.strides), ints("pads", options.pads)};
    c.desc.small_ops_own_loops = true;
    c.desc.activation_layout = ActivationLayout::Blocked;
    c.desc.num_threads = threads;
    c.add(random_tensor({g.batch, g.channels, g.height, g.width}, seed++), false);
    c.add(random_tensor({g.out_channels, g.channels, g.kernel_h, g.kernel_w}, seed++, -0.3, 0.3),
          true);
    if (bias) c.add(random_tensor({g.out_channels}, seed++), true);
    out = {g.batch, g.out_channels, (g.height + g.pads[0] + g.pads[2] - g.kernel_h) / stride_h + 1,
           (g.width + g.pads[1] + g.pads[3] - g.kernel_w) / g.stride + 1};
    expected = zeros(out);
    EXPECT_TRUE(
        kernels::conv(c.at(0), c.at(1), bias ? &c.at(2) : nullptr, options, expected.tensor())
            .ok());
    add_post_ops(c, post_ops, out, seed, expected);
  }
};

TEST(BlockedConv, TapsMatchTheReferenceOverGeometriesPostOpsAndThreads) {
  const std::vector<Geometry> geometries = {
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
    for (const Geometry& g : geometries) {
      for (bool bias : {true, false}) {
        for (const auto& post_ops : post_op_sets) {
          SCOPED_TRACE(name_of(g) + (bias ? " bias" : "") + post_ops_name(post_ops) + ", " +
                       std::to_string(threads) + " thread(s)");
          SpatialCase s(g, bias, post_ops, threads, seed);
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
    SpatialCase s({2, 40, 24, 7, 9}, true, {{PostOpKind::Sigmoid}}, 2, seed);
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
  SpatialCase s({1, 32, 48, 20, 20, 3, 3, 2}, true, {{PostOpKind::Relu}}, 2, seed);
  expect_near(s.c.run(), s.expected);
  EXPECT_NE(s.c.description.find(kOwnConv), std::string::npos) << s.c.description;
}

TEST(BlockedConv, LeavesOtherConvsOfTapsToOneDnn) {
  struct Other {
    std::string why;
    std::vector<int64_t> x, w;
    std::vector<ir::Attribute> attributes;
    bool winograd = false;
    std::vector<PostOp> post_ops;
  };
  const std::vector<Other> others = {
      {"given to Winograd's kernels",
       {1, 64, 14, 14},
       {64, 64, 3, 3},
       {ints("pads", {1, 1, 1, 1})},
       true,
       {}},
      {"dilations", {1, 32, 14, 14}, {32, 32, 3, 3}, {ints("dilations", {2, 2})}, false, {}},
      {"groups", {1, 64, 14, 14}, {64, 32, 3, 3}, {int_attr("group", 2)}, false, {}},
      {"a horizontal stride of 3",
       {1, 32, 14, 14},
       {32, 32, 3, 3},
       {ints("strides", {1, 3})},
       false,
       {}},
      {"an image of 3 channels", {1, 3, 32, 32}, {32, 3, 3, 3}, {}, false, {}},
      {"Gelu", {1, 32, 14, 14}, {32, 32, 3, 3}, {}, false, {{PostOpKind::Gelu}}},
  };
  uint32_t seed = 6200;
  for (const Other& o : others) {
    SCOPED_TRACE(o.why);
    Case c("Conv", o.attributes);
    c.desc.small_ops_own_loops = true;
    c.desc.activation_layout = ActivationLayout::Blocked;
    c.desc.winograd = o.winograd;
    c.desc.post_ops = o.post_ops;
    c.add(random_tensor(o.x, seed++), false);
    c.add(random_tensor(o.w, seed++, -0.3, 0.3), true);
    auto loops = create_loops(c);
    ASSERT_FALSE(loops.ok());
    EXPECT_EQ(loops.error(), runtime::Error::NotSupported) << loops.status();
    auto op = c.create();
    ASSERT_TRUE(op.ok()) << op.status();
    EXPECT_EQ((*op)->describe().find(kOwnConv), std::string::npos) << (*op)->describe();
  }
}

}  // namespace
}  // namespace kiln::engine::cpu
