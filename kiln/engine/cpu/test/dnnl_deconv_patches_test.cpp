// ConvTranspose whose kernel equals its strides (dnnl_deconv_patches.cpp: a matmul and a
// scatter) against the reference kernel on seeded random data: plain tensors, and the source
// and result in native layouts (nhwc, nChw8c/nChw16c). Every op runs with num_threads = 1
// (the scatter on several threads: dnnl_ops_test.cpp, DnnlThreads).

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

struct Shape {
  std::vector<int64_t> x, w, strides;
  bool kernel_attr = false;  ///< Also give kernel_shape.
  bool valid = false;        ///< auto_pad VALID.
};

std::vector<ir::Attribute> attributes(const Shape& s) {
  std::vector<ir::Attribute> a = {ints("strides", s.strides)};
  if (s.kernel_attr) a.push_back(ints("kernel_shape", {s.w[2], s.w[3]}));
  if (s.valid) a.push_back(str("auto_pad", "VALID"));
  return a;
}

kernels::ConvTransposeOptions options(const Shape& s) {
  kernels::ConvTransposeOptions o;
  o.strides = s.strides;
  return o;
}

/// The reference result with `bias` (or none) and `post_ops` (Relu, Sigmoid) applied.
OwnedTensor reference(const Case& c, const Shape& s, bool bias,
                      const std::vector<PostOp>& post_ops) {
  auto shape = kernels::conv_transpose_shape(s.x, s.w, options(s));
  EXPECT_TRUE(shape.ok());
  OwnedTensor expected = zeros(*shape);
  EXPECT_TRUE(kernels::conv_transpose(c.at(0), c.at(1), bias ? &c.at(2) : nullptr, options(s),
                                      expected.tensor())
                  .ok());
  float* y = expected.tensor().mutable_data_ptr<float>();
  for (const PostOp& p : post_ops) {
    for (int64_t i = 0; i < expected.tensor().numel(); ++i) {
      if (p.kind == PostOpKind::Relu) y[i] = std::max(y[i], 0.0f);
      if (p.kind == PostOpKind::Sigmoid) y[i] = 1.0f / (1.0f + std::exp(-y[i]));
    }
  }
  return expected;
}

TEST(DnnlConvTransposePatches, MatchesReferenceOverShapesBiasAndPostOps) {
  const std::vector<Shape> shapes = {
      {{1, 8, 7, 9}, {8, 4, 2, 2}, {2, 2}},    {{2, 3, 5, 4}, {3, 5, 3, 3}, {3, 3}, true},
      {{1, 16, 6, 6}, {16, 1, 2, 2}, {2, 2}},  // the text detector's last layer
      {{1, 5, 4, 3}, {5, 2, 1, 1}, {1, 1}},    {{1, 4, 3, 3}, {4, 3, 2, 3}, {2, 3}, false, true},
      {{1, 40, 5, 7}, {40, 24, 2, 2}, {2, 2}},
  };
  const std::vector<std::vector<PostOp>> post_op_sets = {
      {}, {{PostOpKind::Relu}}, {{PostOpKind::Sigmoid}}};
  uint32_t seed = 3000;
  for (const Shape& s : shapes) {
    for (bool bias : {false, true}) {
      for (const auto& post_ops : post_op_sets) {
        SCOPED_TRACE(runtime::shape_to_string(s.x) + " * " + runtime::shape_to_string(s.w) +
                     (bias ? " bias" : "") + post_ops_name(post_ops));
        Case c("ConvTranspose", attributes(s));
        c.add(random_tensor(s.x, seed++), false);
        c.add(random_tensor(s.w, seed++), true);
        if (bias) c.add(random_tensor({s.w[1]}, seed++), true);
        c.desc.post_ops = post_ops;
        OwnedTensor expected = reference(c, s, bias, post_ops);
        expect_near(c.run(), expected);
        EXPECT_NE(c.description.find("as patches"), std::string::npos) << c.description;
      }
    }
  }
}

TEST(DnnlConvTransposePatches, OtherConvTransposesUseTheDeconvolution) {
  struct Other {
    std::string what;
    std::vector<ir::Attribute> attributes;
    std::vector<int64_t> w;
    int bias;  // 0 none, 1 constant, 2 run-time
  };
  const std::vector<Other> others = {
      {"kernel over strides", {ints("strides", {1, 1})}, {4, 2, 2, 2}, 0},
      {"pads", {ints("strides", {2, 2}), ints("pads", {1, 0, 0, 0})}, {4, 2, 2, 2}, 0},
      {"groups", {ints("strides", {2, 2}), int_attr("group", 2)}, {4, 1, 2, 2}, 0},
      {"dilations", {ints("strides", {2, 2}), ints("dilations", {2, 2})}, {4, 2, 2, 2}, 0},
      {"output_padding",
       {ints("strides", {2, 2}), ints("output_padding", {1, 1})},
       {4, 2, 2, 2},
       0},
      {"run-time bias", {ints("strides", {2, 2})}, {4, 2, 2, 2}, 2},
  };
  uint32_t seed = 3500;
  for (const Other& o : others) {
    SCOPED_TRACE(o.what);
    Case c("ConvTranspose", o.attributes);
    c.add(random_tensor({1, 4, 5, 5}, seed++), false);
    c.add(random_tensor(o.w, seed++), true);
    if (o.bias != 0)
      c.add(random_tensor({o.w[1] * (o.what == "groups" ? 2 : 1)}, seed++), o.bias == 1);
    c.run();
    EXPECT_EQ(c.description.find("as patches"), std::string::npos) << c.description;
  }
}

TEST(DnnlConvTransposePatches, ReadsAndWritesNativeLayouts) {
  using tag = dnnl::memory::format_tag;
  struct Layout {
    int64_t channels;
    tag format;
  };
  const std::vector<Layout> layouts = {
      {8, tag::nhwc}, {16, tag::nChw16c}, {8, tag::nChw16c}, {8, tag::nChw8c}};
  uint32_t seed = 3700;
  for (const Layout& l : layouts) {
    SCOPED_TRACE(std::to_string(l.channels) + " channels, format " +
                 std::to_string(static_cast<int>(l.format)));
    const Shape s{{2, l.channels, 5, 6}, {l.channels, 3, 2, 2}, {2, 2}};
    Case c("ConvTranspose", attributes(s));
    c.add(random_tensor(s.x, seed++), false);
    c.add(random_tensor(s.w, seed++), true);
    c.add(random_tensor({3}, seed++), true);
    OwnedTensor expected = reference(c, s, true, {});
    const dnnl::memory::desc x_md({2, l.channels, 5, 6}, dnnl::memory::data_type::f32, l.format);
    c.desc.input_layouts = {dnnl_impl::layout_bytes(x_md), "", ""};
    auto op = c.create();
    ASSERT_TRUE(op.ok()) << op.status();
    ASSERT_NE((*op)->describe().find("as patches"), std::string::npos) << (*op)->describe();
    ASSERT_TRUE((*op)->native_input_layout(0).has_value());
    EXPECT_EQ((*op)->native_input_layout(0)->id, dnnl_impl::layout_bytes(x_md));
    // Plain in (converted into the hinted layout), plain out.
    expect_near(c.run(**op), expected);
    {
      // The conversion's buffer and the patches placed in shared scratch memory hold nothing
      // between runs.
      auto placed_op = c.create();
      ASSERT_TRUE(placed_op.ok()) << placed_op.status();
      uint64_t placed = 0;
      expect_near(c.run_in_spoiled_scratch(**placed_op, placed), expected);
      EXPECT_GE(placed, x_md.get_size());
    }

    // Native in and out.
    auto out_layout = (*op)->native_output_layout(0);
    ASSERT_TRUE(out_layout.has_value());
    const std::vector<int64_t> y_sizes(expected.tensor().sizes().begin(),
                                       expected.tensor().sizes().end());
    const dnnl::memory::desc y_md(dnnl::memory::dims(y_sizes.begin(), y_sizes.end()),
                                  dnnl::memory::data_type::f32, tag::nhwc);
    EXPECT_EQ(out_layout->id, dnnl_impl::layout_bytes(y_md));
    ASSERT_TRUE((*op)->use_native_input(0).ok());
    ASSERT_TRUE((*op)->use_native_output(0).ok());
    std::vector<float> x_native = to_layout(c.at(0), x_md);
    Tensor x_tensor(ScalarType::Float32, s.x, x_native.data(), runtime::ShapeDynamism::Static,
                    x_native.size() * sizeof(float));
    std::vector<float> y_native(static_cast<size_t>(expected.tensor().numel()), 0.0f);
    Tensor y_tensor(ScalarType::Float32, y_sizes, y_native.data());
    const Tensor* in[] = {&x_tensor, nullptr, nullptr};
    Tensor* out = &y_tensor;
    ASSERT_TRUE(
        (*op)->run(runtime::Span<const Tensor*>(in, 3), runtime::Span<Tensor*>(&out, 1)).ok());
    std::vector<float> expected_nhwc = to_layout(expected.tensor(), y_md);
    int failures = 0;
    for (size_t i = 0; i < y_native.size() && failures < 5; ++i) {
      if (std::fabs(y_native[i] - expected_nhwc[i]) > 1e-5 + 1e-4 * std::fabs(expected_nhwc[i])) {
        ADD_FAILURE() << "nhwc element " << i << ": " << y_native[i] << " (expected "
                      << expected_nhwc[i] << ")";
        ++failures;
      }
    }
  }
}

}  // namespace
}  // namespace kiln::engine::cpu
