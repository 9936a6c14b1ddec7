// ConvTranspose of few values per input pixel (narrow_deconv.cpp) on kiln's loops against the
// reference kernel on seeded random data: output channels, kernels (kW 2 interleaved, others
// written value by value), channel counts around the 16-channel transposes, rows of whole tiles
// and tails, batches, biases, post-ops and threads; plain NCHW input and the producer's pixel
// rows (nhwc, one-block nChw16c) read natively; what it leaves to the patches op.

#include <kiln/engine/cpu/dnnl_common.h>
#include <kiln/engine/cpu/test/dnnl_layouts.h>
#include <kiln/engine/cpu/test/op_case.h>
#include <kiln/kernels/kernels.h>

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

namespace kiln::engine::cpu {
namespace {

using namespace test_support;  // NOLINT(google-build-using-namespace): test helpers
using runtime::ScalarType;
using runtime::Tensor;

constexpr const char* kNarrow = "kiln narrow ConvTranspose";

struct Shape {
  std::vector<int64_t> x, w;
};

Case make_case(const Shape& s, bool bias, const std::vector<PostOp>& post_ops, int threads,
               uint32_t& seed) {
  Case c("ConvTranspose", {ints("strides", {s.w[2], s.w[3]})});
  c.desc.num_threads = threads;
  c.desc.post_ops = post_ops;
  c.add(random_tensor(s.x, seed++), false);
  c.add(random_tensor(s.w, seed++, -0.5, 0.5), true);
  if (bias) c.add(random_tensor({s.w[1]}, seed++), true);
  return c;
}

/// The reference result with the bias (when the case has one) and `post_ops` applied.
OwnedTensor reference(const Case& c, const Shape& s, const std::vector<PostOp>& post_ops) {
  kernels::ConvTransposeOptions o;
  o.strides = {s.w[2], s.w[3]};
  auto shape = kernels::conv_transpose_shape(s.x, s.w, o);
  EXPECT_TRUE(shape.ok());
  OwnedTensor expected = zeros(*shape);
  const bool bias = c.desc.inputs.size() == 3;
  EXPECT_TRUE(
      kernels::conv_transpose(c.at(0), c.at(1), bias ? &c.at(2) : nullptr, o, expected.tensor())
          .ok());
  float* y = expected.tensor().mutable_data_ptr<float>();
  for (const PostOp& p : post_ops) {
    for (int64_t i = 0; i < expected.tensor().numel(); ++i) {
      if (p.kind == PostOpKind::Relu) y[i] = std::max(y[i], 0.0f);
      if (p.kind == PostOpKind::Sigmoid) y[i] = 1.0f / (1.0f + std::exp(-y[i]));
      if (p.kind == PostOpKind::Tanh) y[i] = std::tanh(y[i]);
    }
  }
  return expected;
}

TEST(NarrowDeconv, MatchesTheReferenceOverShapesBiasPostOpsAndThreads) {
  const std::vector<Shape> shapes = {
      {{1, 16, 96, 96}, {16, 1, 2, 2}},   // the text detector's head: whole tiles
      {{2, 5, 65, 67}, {5, 3, 2, 2}},     // a batch, few channels, row tails, 12 values
      {{1, 40, 20, 35}, {40, 4, 2, 2}},   // 16 values: four groups; channels 16 + 16 + 8
      {{1, 24, 40, 47}, {24, 1, 3, 3}},   // 9 values, kW 3: written value by value
      {{1, 64, 30, 20}, {64, 2, 1, 4}},   // kH 1, kW 4
      {{1, 17, 64, 16}, {17, 16, 1, 1}},  // 1x1: 16 output channels
  };
  const std::vector<std::vector<PostOp>> post_op_sets = {
      {}, {{PostOpKind::Sigmoid}}, {{PostOpKind::Relu}}, {{PostOpKind::Tanh}}};
  uint32_t seed = 5100;
  for (int threads : {1, 2}) {
    for (const Shape& s : shapes) {
      for (bool bias : {true, false}) {
        for (const auto& post_ops : post_op_sets) {
          SCOPED_TRACE(runtime::shape_to_string(s.x) + " * " + runtime::shape_to_string(s.w) +
                       (bias ? " bias" : "") + post_ops_name(post_ops) + ", " +
                       std::to_string(threads) + " thread(s)");
          Case c = make_case(s, bias, post_ops, threads, seed);
          OwnedTensor expected = reference(c, s, post_ops);
          expect_near(c.run(), expected);
          EXPECT_NE(c.description.find(kNarrow), std::string::npos) << c.description;
        }
      }
    }
  }
}

TEST(NarrowDeconv, ReadsTheProducersPixelRowsNatively) {
  using tag = dnnl::memory::format_tag;
  struct Layout {
    int64_t channels;
    tag format;
  };
  // nhwc rows of whole and partial 16-channel chunks; nChw16c of one block, padded or not.
  const std::vector<Layout> layouts = {
      {16, tag::nhwc}, {24, tag::nhwc}, {7, tag::nhwc}, {16, tag::nChw16c}, {12, tag::nChw16c}};
  uint32_t seed = 5300;
  for (int threads : {1, 2}) {
    for (const Layout& l : layouts) {
      SCOPED_TRACE(std::to_string(l.channels) + " channels, format " +
                   std::to_string(static_cast<int>(l.format)) + ", " + std::to_string(threads) +
                   " thread(s)");
      const Shape s{{2, l.channels, 45, 53}, {l.channels, 2, 2, 2}};
      Case c = make_case(s, true, {{PostOpKind::Sigmoid}}, threads, seed);
      OwnedTensor expected = reference(c, s, {{PostOpKind::Sigmoid}});
      const dnnl::memory::desc x_md(dnnl::memory::dims(s.x.begin(), s.x.end()),
                                    dnnl::memory::data_type::f32, l.format);
      c.desc.input_layouts = {dnnl_impl::layout_bytes(x_md), "", ""};
      auto op = c.create();
      ASSERT_TRUE(op.ok()) << op.status();
      ASSERT_NE((*op)->describe().find(kNarrow), std::string::npos) << (*op)->describe();
      ASSERT_TRUE((*op)->native_input_layout(0).has_value());
      EXPECT_EQ((*op)->native_input_layout(0)->id, dnnl_impl::layout_bytes(x_md));
      // Not handed over: the plain tensor.
      expect_near(c.run(**op), expected);
      // Handed over: the producer's bytes.
      ASSERT_TRUE((*op)->use_native_input(0).ok());
      EXPECT_NE((*op)->describe().find("pixel rows"), std::string::npos) << (*op)->describe();
      std::vector<float> x_native = to_layout(c.at(0), x_md);
      Tensor x_tensor(ScalarType::Float32, s.x, x_native.data(), runtime::ShapeDynamism::Static,
                      x_native.size() * sizeof(float));
      OwnedTensor y = zeros(
          std::vector<int64_t>(expected.tensor().sizes().begin(), expected.tensor().sizes().end()));
      const Tensor* in[] = {&x_tensor, nullptr, nullptr};
      Tensor* out = &y.tensor();
      ASSERT_TRUE(
          (*op)->run(runtime::Span<const Tensor*>(in, 3), runtime::Span<Tensor*>(&out, 1)).ok());
      expect_near(y, expected);
    }
  }
}

TEST(NarrowDeconv, LeavesOtherConvTransposesToThePatchesOp) {
  const std::vector<std::pair<std::string, Shape>> others = {
      {"17 values a pixel", {{1, 16, 40, 40}, {16, 17, 1, 1}}},
      {"300 channels", {{1, 300, 20, 20}, {300, 1, 2, 2}}},
      {"little work", {{1, 16, 6, 6}, {16, 1, 2, 2}}},
  };
  uint32_t seed = 5500;
  for (const auto& [what, s] : others) {
    SCOPED_TRACE(what);
    Case c = make_case(s, false, {}, 1, seed);
    auto op = c.create();
    ASSERT_TRUE(op.ok()) << op.status();
    EXPECT_EQ((*op)->describe().find(kNarrow), std::string::npos) << (*op)->describe();
    EXPECT_NE((*op)->describe().find("as patches"), std::string::npos) << (*op)->describe();
  }
  // A kernel other than its strides: the deconvolution.
  Case c("ConvTranspose", {ints("strides", {1, 1})});
  c.add(random_tensor({1, 16, 40, 40}, seed++), false);
  c.add(random_tensor({16, 1, 2, 2}, seed++), true);
  auto op = c.create();
  ASSERT_TRUE(op.ok()) << op.status();
  EXPECT_EQ((*op)->describe().find(kNarrow), std::string::npos) << (*op)->describe();
}

}  // namespace
}  // namespace kiln::engine::cpu
