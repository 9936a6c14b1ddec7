// oneDNN Conv against the reference kernel on seeded random data: geometry, groups, post-ops,
// layouts, auto_pad, 1-D and 3-D. Every op runs with num_threads = 1.

#include <kiln/engine/cpu/test/op_case.h>
#include <kiln/kernels/kernels.h>
#include <kiln/runtime/core/aligned_buffer.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

namespace kiln::engine::cpu {
namespace {

using namespace test_support;  // NOLINT(google-build-using-namespace): test helpers
using runtime::Tensor;

// ---- Conv ------------------------------------------------------------------------------------

struct ConvParams {
  int64_t n, c, m, h, w, kh, kw, stride, dilation, pad, group;
};

std::string conv_name(const ConvParams& p) {
  return "N" + std::to_string(p.n) + " C" + std::to_string(p.c) + " M" + std::to_string(p.m) + " " +
         std::to_string(p.h) + "x" + std::to_string(p.w) + " k" + std::to_string(p.kh) + "x" +
         std::to_string(p.kw) + " s" + std::to_string(p.stride) + " d" +
         std::to_string(p.dilation) + " p" + std::to_string(p.pad) + " g" + std::to_string(p.group);
}

TEST(DnnlConv, MatchesReferenceOverGeometryGroupsPostOpsAndLayouts) {
  const std::vector<ConvParams> params = {
      {1, 3, 8, 9, 9, 3, 3, 1, 1, 1, 1},    {2, 16, 16, 8, 8, 3, 3, 1, 1, 1, 1},
      {1, 16, 32, 10, 7, 3, 3, 2, 1, 1, 1}, {1, 8, 8, 9, 9, 3, 3, 1, 2, 2, 1},
      {1, 32, 32, 8, 8, 3, 3, 1, 1, 1, 32}, {1, 32, 32, 9, 9, 3, 3, 2, 1, 1, 32},
      {1, 16, 32, 6, 6, 3, 3, 1, 1, 0, 4},  {1, 16, 24, 7, 7, 1, 1, 1, 1, 0, 1},
      {1, 4, 6, 7, 8, 2, 3, 2, 1, 0, 2}};
  const std::vector<std::vector<PostOp>> post_op_sets = {
      {},
      {{PostOpKind::Relu}},
      {{PostOpKind::Clip, 0.0f, 6.0f}},
      {{PostOpKind::Sigmoid}},
      {{PostOpKind::Swish}},
      {{PostOpKind::AddResidual}, {PostOpKind::Relu}}};
  uint32_t seed = 200;
  for (const ConvParams& p : params) {
    for (ActivationLayout layout : {ActivationLayout::Preferred, ActivationLayout::Plain}) {
      for (bool bias : {true, false}) {
        for (const auto& post_ops : post_op_sets) {
          SCOPED_TRACE(conv_name(p) +
                       (layout == ActivationLayout::Plain ? " plain" : " preferred") +
                       (bias ? " bias" : "") + post_ops_name(post_ops));
          std::vector<ir::Attribute> attributes = {
              ints("strides", {p.stride, p.stride}), ints("dilations", {p.dilation, p.dilation}),
              ints("pads", {p.pad, p.pad, p.pad, p.pad}), int_attr("group", p.group)};
          Case c("Conv", attributes);
          c.desc.activation_layout = layout;
          c.add(random_tensor({p.n, p.c, p.h, p.w}, seed++), false);
          c.add(random_tensor({p.m, p.c / p.group, p.kh, p.kw}, seed++, -0.5, 0.5), true);
          if (bias) c.add(random_tensor({p.m}, seed++), true);
          kernels::ConvOptions options;
          options.strides = {p.stride, p.stride};
          options.dilations = {p.dilation, p.dilation};
          options.pads = {p.pad, p.pad, p.pad, p.pad};
          options.group = p.group;
          expect_conv_like_reference(c, options, bias, post_ops, seed);
        }
      }
    }
  }
}

TEST(DnnlConv, AutoPadSameMatchesReference) {
  for (std::string auto_pad : {"SAME_UPPER", "SAME_LOWER", "VALID"}) {
    SCOPED_TRACE(auto_pad);
    Case c("Conv", {ir::Attribute{"auto_pad", auto_pad}, ints("strides", {2, 2})});
    c.add(random_tensor({1, 4, 8, 7}, 300), false);
    c.add(random_tensor({5, 4, 3, 3}, 301), true);
    kernels::ConvOptions options;
    options.strides = {2, 2};
    options.auto_pad = *kernels::parse_auto_pad("Conv", auto_pad);
    auto shape = kernels::conv_shape(c.desc.inputs[0].sizes, c.desc.inputs[1].sizes, options);
    ASSERT_TRUE(shape.ok());
    OwnedTensor expected = zeros(*shape);
    ASSERT_TRUE(kernels::conv(c.at(0), c.at(1), nullptr, options, expected.tensor()).ok());
    expect_near(c.run(), expected);
  }
}

// 1-D (audio front ends: [N, C, T]) and 3-D convs take the same primitive.
TEST(DnnlConv, OneAndThreeDimensionalConvsMatchReference) {
  struct Geometry {
    std::vector<int64_t> x, w;
    int64_t stride, pad, group;
  };
  const std::vector<Geometry> geometries = {{{1, 1, 64}, {8, 1, 5}, 2, 2, 1},
                                            {{2, 8, 17}, {8, 1, 3}, 1, 1, 8},
                                            {{1, 6, 20}, {4, 3, 4}, 3, 0, 2},
                                            {{1, 3, 5, 6, 7}, {4, 3, 3, 3, 3}, 1, 1, 1},
                                            {{1, 4, 6, 5, 4}, {4, 2, 1, 2, 3}, 2, 0, 2}};
  uint32_t seed = 600;
  for (const Geometry& g : geometries) {
    size_t spatial = g.x.size() - 2;
    for (ActivationLayout layout : {ActivationLayout::Preferred, ActivationLayout::Plain}) {
      for (const auto& post_ops : std::vector<std::vector<PostOp>>{{}, {{PostOpKind::Relu}}}) {
        SCOPED_TRACE(runtime::shape_to_string(g.x) + " * " + runtime::shape_to_string(g.w) +
                     (layout == ActivationLayout::Plain ? " plain" : " preferred") +
                     post_ops_name(post_ops));
        kernels::ConvOptions options;
        options.strides.assign(spatial, g.stride);
        options.pads.assign(2 * spatial, g.pad);
        options.group = g.group;
        Case c("Conv", {ints("strides", options.strides), ints("pads", options.pads),
                        int_attr("group", g.group)});
        c.desc.activation_layout = layout;
        c.add(random_tensor(g.x, seed++), false);
        c.add(random_tensor(g.w, seed++, -0.5, 0.5), true);
        c.add(random_tensor({g.w[0]}, seed++), true);
        auto shape = kernels::conv_shape(g.x, g.w, options);
        ASSERT_TRUE(shape.ok()) << shape.status();
        OwnedTensor expected = zeros(*shape);
        ASSERT_TRUE(kernels::conv(c.at(0), c.at(1), &c.at(2), options, expected.tensor()).ok());
        apply_post_ops(post_ops, {}, expected);
        c.desc.post_ops = post_ops;
        expect_near(c.run(), expected);
      }
    }
  }
}

// 1-D Convs of few channels and long kernels run as gathered windows times W (an audio front
// end's framing); with a residual, or in Plain layout, the general convolution takes them.
TEST(DnnlConv, FewChannelLongKernelConvsRunAsWindowsTimesWeights) {
  struct Geometry {
    std::vector<int64_t> x, w, pads;
    int64_t stride;
  };
  const std::vector<Geometry> geometries = {{{1, 1, 512}, {65, 1, 128}, {64, 64}, 64},
                                            {{2, 2, 100}, {8, 2, 16}, {5, 2}, 3},
                                            {{1, 4, 40}, {6, 4, 20}, {0, 0}, 1},
                                            {{1, 1, 30}, {4, 1, 32}, {16, 16}, 4}};
  const std::vector<std::vector<PostOp>> post_op_sets = {
      {}, {{PostOpKind::Relu}}, {{PostOpKind::Clip, 0.0f, 6.0f}}, {{PostOpKind::AddResidual}}};
  uint32_t seed = 650;
  for (const Geometry& g : geometries) {
    for (ActivationLayout layout : {ActivationLayout::Preferred, ActivationLayout::Plain}) {
      for (bool bias : {true, false}) {
        for (const auto& post_ops : post_op_sets) {
          SCOPED_TRACE(runtime::shape_to_string(g.x) + " * " + runtime::shape_to_string(g.w) +
                       (layout == ActivationLayout::Plain ? " plain" : " preferred") +
                       (bias ? " bias" : "") + post_ops_name(post_ops));
          kernels::ConvOptions options;
          options.strides = {g.stride};
          options.pads = g.pads;
          Case c("Conv", {ints("strides", options.strides), ints("pads", options.pads)});
          c.desc.activation_layout = layout;
          c.add(random_tensor(g.x, seed++), false);
          c.add(random_tensor(g.w, seed++, -0.5, 0.5), true);
          if (bias) c.add(random_tensor({g.w[0]}, seed++), true);
          expect_conv_like_reference(c, options, bias, post_ops, seed);
          const bool windows = layout == ActivationLayout::Preferred &&
                               (post_ops.empty() || post_ops[0].kind != PostOpKind::AddResidual);
          EXPECT_EQ(c.description.find("windows x weights") != std::string::npos, windows)
              << c.description;
        }
      }
    }
  }
  // The result handed over in nwc: the same values, transposed.
  Case c("Conv", {ints("strides", {64}), ints("pads", {64, 64})});
  c.add(random_tensor({1, 1, 512}, seed++), false);
  c.add(random_tensor({65, 1, 128}, seed++, -0.5, 0.5), true);
  kernels::ConvOptions options;
  options.strides = {64};
  options.pads = {64, 64};
  OwnedTensor expected = zeros({1, 65, 9});
  ASSERT_TRUE(kernels::conv(c.at(0), c.at(1), nullptr, options, expected.tensor()).ok());
  auto op = c.create();
  ASSERT_TRUE(op.ok()) << op.status();
  auto layout = (*op)->native_output_layout(0);
  ASSERT_TRUE(layout.has_value());
  ASSERT_TRUE((*op)->use_native_output(0).ok());
  ASSERT_TRUE((*op)->finish().ok());
  OwnedTensor nwc = zeros({1, 65, 9});
  const Tensor* in[] = {&c.at(0), nullptr};
  Tensor* out = &nwc.tensor();
  ASSERT_TRUE(
      (*op)->run(runtime::Span<const Tensor*>(in, 2), runtime::Span<Tensor*>(&out, 1)).ok());
  const float* got = nwc.tensor().data_ptr<float>();
  const float* want = expected.tensor().data_ptr<float>();
  for (int64_t m = 0; m < 65; ++m) {
    for (int64_t o = 0; o < 9; ++o) {
      ASSERT_NEAR(got[o * 65 + m], want[m * 9 + o], 1e-4f + 1e-4f * std::abs(want[m * 9 + o]))
          << "channel " << m << " position " << o;
    }
  }
}

TEST(DnnlConv, PreferredLayoutIsReported) {
  Case c("Conv", {ints("pads", {1, 1, 1, 1})});
  c.add(random_tensor({1, 64, 14, 14}, 400), false);
  c.add(random_tensor({64, 64, 3, 3}, 401), true);
  c.run();
  EXPECT_NE(c.description.find("src:"), std::string::npos) << c.description;
  std::cout << "Conv 64x14x14 3x3: " << c.description << "\n";
}

// The plan's output sizes (`OpDesc::output_sizes`) against those the attributes give: Convs,
// ConvTransposes and pools whose attributes give another shape (a package's attribute their
// library reads otherwise than the reference kernel) decline, naming both, before making a
// primitive; the same op with the plan's sizes right is made.
TEST(DnnlConv, OpsWhoseAttributesGiveAnotherOutputThanThePlansDecline) {
  struct Op {
    std::string op;
    std::vector<ir::Attribute> attributes;
    std::vector<int64_t> w, right;
  };
  const std::vector<Op> ops = {
      {"Conv", {ints("pads", {1, 1, 1, 4194305})}, {4, 2, 3, 3}, {1, 4, 6, 4194310}},
      {"ConvTranspose", {ints("strides", {2, 2})}, {2, 4, 3, 3}, {1, 4, 13, 13}},
      {"MaxPool", {ints("kernel_shape", {2, 2}), ints("strides", {2, 2})}, {}, {1, 2, 3, 3}},
      {"AveragePool", {ints("kernel_shape", {3, 3})}, {}, {1, 2, 4, 4}},
      {"GlobalAveragePool", {}, {}, {1, 2, 1, 1}}};
  for (const Op& o : ops) {
    SCOPED_TRACE(o.op);
    for (bool right : {false, true}) {
      Case c(o.op, o.attributes);
      c.add(random_tensor({1, 2, 6, 6}, 500), false);
      if (!o.w.empty()) c.add(random_tensor(o.w, 501, -0.5, 0.5), true);
      c.desc.output_sizes = {right ? o.right : std::vector<int64_t>{1, 4, 6, 6}};
      if (right && o.right[3] > 1000) continue;  // (not made: 400 MB of output)
      auto op = c.create();
      if (right) {
        EXPECT_TRUE(op.ok()) << op.status();
        continue;
      }
      ASSERT_FALSE(op.ok());
      EXPECT_EQ(op.error(), runtime::Error::NotSupported) << op.status();
      EXPECT_NE(op.status().message().find("the shape " + runtime::shape_to_string(o.right) +
                                           ", not the plan's [1, 4, 6, 6]"),
                std::string::npos)
          << op.status();
    }
  }
}

// ---- Shared scratchpad ------------------------------------------------------------------------

// Two ops given one scratch buffer (as a compiled function's steps are) and run in turn give
// what each gives with its own.
TEST(DnnlScratchpad, OpsSharingOneBufferGiveTheResultsOfTheirOwn) {
  auto conv_case = [] {
    Case c("Conv", {ints("pads", {1, 1, 1, 1}), ints("kernel_shape", {3, 3})});
    c.add(random_tensor({1, 16, 12, 12}, 1), false);
    c.add(random_tensor({32, 16, 3, 3}, 2, -0.2, 0.2), true);
    c.add(random_tensor({32}, 3), true);
    return c;
  };
  auto matmul_case = [] {
    Case c("MatMul", {});
    c.add(random_tensor({64, 128}, 4), false);
    c.add(random_tensor({128, 96}, 5, -0.2, 0.2), true);
    return c;
  };
  Case conv = conv_case(), matmul = matmul_case();
  OwnedTensor conv_own = conv.run(), matmul_own = matmul.run();

  Case conv2 = conv_case(), matmul2 = matmul_case();
  auto a = conv2.create();
  auto b = matmul2.create();
  ASSERT_TRUE(a.ok() && b.ok());
  // Finished, their scratch includes the buffers of the conversions they kept (the Conv's
  // plain source and result, where oneDNN computes in a blocked layout).
  ASSERT_TRUE((*a)->finish().ok());
  ASSERT_TRUE((*b)->finish().ok());
  uint64_t bytes = std::max((*a)->scratchpad_bytes(), (*b)->scratchpad_bytes());
  if (bytes == 0) GTEST_SKIP() << "oneDNN needs no scratch memory for these ops on this CPU";
  auto shared = runtime::allocate_bulk(bytes);
  ASSERT_TRUE(shared.ok());
  for (auto* op : {a->get(), b->get()}) {
    if (op->scratchpad_bytes() > 0) op->use_scratchpad(shared->get());
  }
  // Nothing may be kept there between runs, nor read before it is written (blocked layouts'
  // zero padding included): fill it with NaNs before each run.
  auto spoil = [&] { std::memset(shared->get(), 0xff, bytes); };
  spoil();
  expect_near(conv2.run(**a), conv_own);
  spoil();
  expect_near(matmul2.run(**b), matmul_own);
  spoil();
  expect_near(conv2.run(**a), conv_own);
}

}  // namespace
}  // namespace kiln::engine::cpu
