#pragma once

// Test support for the tests of kiln's Conv loops: a 2-D Conv's geometry, its case against the
// reference convolution and post-ops, and the check that one kind of loops leaves Convs it
// does not take to other kernels.

#include <kiln/engine/cpu/test/op_case.h>

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::engine::cpu::test_support {

/// A 2-D Conv of X [batch, channels, height, width] by W [out_channels, channels, kernel_h,
/// kernel_w].
struct ConvGeometry {
  int64_t batch, channels, out_channels, height, width;
  int64_t kernel_h = 3, kernel_w = 3, stride = 1;
  std::vector<int64_t> pads = {1, 1, 1, 1};  // top, left, bottom, right
  int64_t stride_h = 0;                      // 0: `stride`
  int64_t group = 1;                         // W: [out_channels, channels / group, ...]
};

inline std::string name_of(const ConvGeometry& g) {
  std::string pads;
  for (int64_t p : g.pads) pads += std::to_string(p);
  return "N" + std::to_string(g.batch) + " " + std::to_string(g.channels) + "->" +
         std::to_string(g.out_channels) + " " + std::to_string(g.height) + "x" +
         std::to_string(g.width) + " k" + std::to_string(g.kernel_h) + "x" +
         std::to_string(g.kernel_w) + " s" + std::to_string(g.stride) + " pads " + pads +
         (g.group != 1 ? " group " + std::to_string(g.group) : "");
}

/// The reference convolution's options of `g`.
inline kernels::ConvOptions conv_options(const ConvGeometry& g) {
  kernels::ConvOptions options;
  options.strides = {g.stride_h != 0 ? g.stride_h : g.stride, g.stride};
  options.pads = {g.pads[0], g.pads[1], g.pads[2], g.pads[3]};
  options.group = g.group;
  return options;
}

/// A Conv among blocked Convs with kiln's loops allowed: X, W, optionally B and a residual;
/// `expected` from the reference convolution and post-ops.
struct ConvCase {
  Case c{"Conv", {}};
  OwnedTensor expected = zeros({0});
  std::vector<int64_t> out;

  ConvCase(const ConvGeometry& g, bool bias, const std::vector<PostOp>& post_ops, int threads,
           uint32_t& seed) {
    const kernels::ConvOptions options = conv_options(g);
    const int64_t stride_h = options.strides[0];
    c.desc.attributes = {ints("strides", options.strides), ints("pads", options.pads)};
    if (g.group != 1) c.desc.attributes.push_back(int_attr("group", g.group));
    c.desc.small_ops_own_loops = true;
    c.desc.activation_layout = ActivationLayout::Blocked;
    c.desc.num_threads = threads;
    c.add(random_tensor({g.batch, g.channels, g.height, g.width}, seed++), false);
    c.add(random_tensor({g.out_channels, g.channels / g.group, g.kernel_h, g.kernel_w}, seed++,
                        -0.3, 0.3),
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

/// A Conv one kind of kiln's loops leaves to other kernels, and why.
struct OtherConv {
  std::string why;
  std::vector<int64_t> x, w;
  std::vector<ir::Attribute> attributes = {};
  std::vector<PostOp> post_ops = {};
  ActivationLayout layout = ActivationLayout::Blocked;
  bool winograd = false;
  bool avoid_generated_code = false;
};

/// Fails unless `loops` (one kind of kiln's loops' factory) refuses each of `others` as
/// NotSupported and CpuOp::create gives it to an op whose description lacks `marker`.
inline void expect_left_to_others(const std::vector<OtherConv>& others,
                                  runtime::Result<std::unique_ptr<CpuOp>> (*loops)(const OpDesc&),
                                  const std::string& marker, uint32_t seed) {
  for (const OtherConv& o : others) {
    SCOPED_TRACE(o.why);
    Case c("Conv", o.attributes);
    c.desc.small_ops_own_loops = true;
    c.desc.activation_layout = o.layout;
    c.desc.winograd = o.winograd;
    c.desc.avoid_generated_code = o.avoid_generated_code;
    c.desc.post_ops = o.post_ops;
    c.add(random_tensor(o.x, seed++), false);
    c.add(random_tensor(o.w, seed++, -0.3, 0.3), true);
    auto own = c.create_with(loops);
    ASSERT_FALSE(own.ok());
    EXPECT_EQ(own.error(), runtime::Error::NotSupported) << own.status();
    auto op = c.create();
    ASSERT_TRUE(op.ok()) << op.status();
    EXPECT_EQ((*op)->describe().find(marker), std::string::npos) << (*op)->describe();
  }
}

}  // namespace kiln::engine::cpu::test_support
