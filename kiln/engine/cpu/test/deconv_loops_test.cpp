// ConvTranspose whose kernel equals its strides on kiln's 1x1 loops (deconv_loops.cpp) against
// the reference kernel on seeded random data: input channels around the blocks of 16, patch
// values (M x kH x kW) in whole and partial blocks, kernels, batches, biases, post-ops and
// threads; the producer's nChw16c read natively or the plain tensor, the output nhwc natively
// or NCHW, the patches in scratch memory others spoil; the choice through CpuOp::create (only
// for ops avoiding generated code) and what the loops leave to others.

#include <kiln/engine/cpu/dnnl_common.h>
#include <kiln/engine/cpu/test/blocked16.h>
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

constexpr const char* kLoops = "kiln ConvTranspose as patches";

struct Shape {
  std::vector<int64_t> x, w;
};

std::string name_of(const Shape& s) {
  return runtime::shape_to_string(s.x) + " * " + runtime::shape_to_string(s.w);
}

// X (from a producer computing nChw16c), W, optionally B; `expected` from the reference
// kernel and post-ops.
struct DeconvCase {
  Case c{"ConvTranspose", {}};
  OwnedTensor expected = zeros({0});
  std::vector<int64_t> out;

  DeconvCase(const Shape& s, bool bias, const std::vector<PostOp>& post_ops, int threads,
             uint32_t& seed) {
    c.desc.attributes = {ints("strides", {s.w[2], s.w[3]})};
    c.desc.num_threads = threads;
    c.desc.small_ops_own_loops = true;
    c.desc.avoid_generated_code = true;
    c.add(random_tensor(s.x, seed++), false);
    c.add(random_tensor(s.w, seed++, -0.5, 0.5), true);
    if (bias) c.add(random_tensor({s.w[1]}, seed++), true);
    c.desc.input_layouts = {dnnl_impl::layout_bytes(blocked16_md(s.x))};
    kernels::ConvTransposeOptions o;
    o.strides = {s.w[2], s.w[3]};
    out = {s.x[0], s.w[1], s.x[2] * s.w[2], s.x[3] * s.w[3]};
    expected = zeros(out);
    EXPECT_TRUE(
        kernels::conv_transpose(c.at(0), c.at(1), bias ? &c.at(2) : nullptr, o, expected.tensor())
            .ok());
    c.desc.post_ops = post_ops;
    float* y = expected.tensor().mutable_data_ptr<float>();
    for (const PostOp& p : post_ops) {
      for (int64_t i = 0; i < expected.tensor().numel(); ++i) {
        if (p.kind == PostOpKind::Relu) y[i] = std::max(y[i], 0.0f);
        if (p.kind == PostOpKind::Sigmoid) y[i] = 1.0f / (1.0f + std::exp(-y[i]));
        if (p.kind == PostOpKind::Clip) y[i] = std::min(std::max(y[i], p.alpha), p.beta);
      }
    }
  }

  runtime::Result<std::unique_ptr<CpuOp>> create() {
    c.desc.constants.clear();
    for (size_t i = 0; i < c.inputs.size(); ++i) {
      c.desc.constants.push_back(c.constant_flags[i] && c.inputs[i] ? &c.inputs[i]->tensor()
                                                                    : nullptr);
    }
    return dnnl_impl::create_deconv_loops(c.desc);
  }
};

// The nhwc values of [N, C, H, W] `plain`.
std::vector<float> to_nhwc(const Tensor& plain) {
  const std::vector<int64_t> s(plain.sizes().begin(), plain.sizes().end());
  std::vector<float> out(static_cast<size_t>(plain.numel()));
  const float* v = plain.data_ptr<float>();
  for (int64_t n = 0; n < s[0]; ++n) {
    for (int64_t c = 0; c < s[1]; ++c) {
      for (int64_t p = 0; p < s[2] * s[3]; ++p) {
        out[static_cast<size_t>((n * s[2] * s[3] + p) * s[1] + c)] =
            v[(n * s[1] + c) * s[2] * s[3] + p];
      }
    }
  }
  return out;
}

TEST(DeconvLoops, MatchTheReferenceOverShapesBiasPostOpsAndThreads) {
  const std::vector<Shape> shapes = {
      {{1, 16, 20, 20}, {16, 16, 2, 2}},  // the text detector's upsampling: 4 blocks of 16
      {{2, 20, 7, 9}, {20, 5, 2, 2}},     // a batch, a padded input block, 20 values
      {{1, 40, 5, 13}, {40, 24, 2, 2}},   // 96 values, three input blocks
      {{1, 16, 6, 6}, {16, 3, 3, 3}},     // kernel 3: 27 values
      {{1, 32, 4, 25}, {32, 8, 1, 2}},    // kH 1
  };
  const std::vector<std::vector<PostOp>> post_op_sets = {
      {}, {{PostOpKind::Relu}}, {{PostOpKind::Sigmoid}}, {{PostOpKind::Clip, 0.5f, 2.0f}}};
  uint32_t seed = 9100;
  for (int threads : {1, 2}) {
    for (const Shape& s : shapes) {
      for (size_t k = 0; k < post_op_sets.size(); ++k) {
        const bool bias = k % 2 == 0;
        SCOPED_TRACE(name_of(s) + (bias ? " bias" : "") + post_ops_name(post_op_sets[k]) + ", " +
                     std::to_string(threads) + " thread(s)");
        DeconvCase d(s, bias, post_op_sets[k], threads, seed);
        auto op = d.create();
        ASSERT_TRUE(op.ok()) << op.status();
        EXPECT_NE((*op)->describe().find(kLoops), std::string::npos) << (*op)->describe();
        expect_near(d.c.run(**op), d.expected);
      }
    }
  }
}

// The producer's nChw16c read natively or the plain tensor; the output written nhwc natively
// or NCHW; the patches in scratch memory others write between runs.
TEST(DeconvLoops, ReadNChw16cAndWriteNhwcNativelyOrPlain) {
  uint32_t seed = 9300;
  for (int native = 0; native < 4; ++native) {
    const bool native_in = (native & 1) != 0, native_out = (native & 2) != 0;
    SCOPED_TRACE(std::string(native_in ? "native in, " : "plain in, ") +
                 (native_out ? "native out" : "plain out"));
    const Shape s{{2, 24, 9, 11}, {24, 16, 2, 2}};
    DeconvCase d(s, true, {{PostOpKind::Relu}}, 2, seed);
    auto op_or = d.create();
    ASSERT_TRUE(op_or.ok()) << op_or.status();
    CpuOp& op = **op_or;
    ASSERT_TRUE(op.native_input_layout(0).has_value());
    EXPECT_EQ(op.native_input_layout(0)->id, d.c.desc.input_layouts[0]);
    const dnnl::memory::desc nhwc(dnnl_impl::to_dims(d.out), dnnl::memory::data_type::f32,
                                  dnnl::memory::format_tag::nhwc);
    ASSERT_TRUE(op.native_output_layout(0).has_value());
    EXPECT_EQ(op.native_output_layout(0)->id, dnnl_impl::layout_bytes(nhwc));
    if (native_in) {
      ASSERT_TRUE(op.use_native_input(0).ok());
    }
    if (native_out) {
      ASSERT_TRUE(op.use_native_output(0).ok());
    }
    ASSERT_TRUE(op.finish().ok());
    ASSERT_GT(op.scratchpad_bytes(), 0u);
    std::vector<float> shared(op.scratchpad_bytes() / sizeof(float) + 16);
    float* at = shared.data() + (16 - reinterpret_cast<uintptr_t>(shared.data()) / 4 % 16) % 16;
    op.use_scratchpad(at);
    std::vector<float> x_data = to_blocked16(d.c.at(0), 0.0f);
    Tensor x_native(ScalarType::Float32, s.x, x_data.data(), runtime::ShapeDynamism::Static,
                    x_data.size() * sizeof(float));
    OwnedTensor y = zeros(d.out);
    const Tensor* inputs[] = {native_in ? &x_native : &d.c.at(0), nullptr, nullptr};
    Tensor* out = &y.tensor();
    for (int run = 0; run < 2; ++run) {
      std::fill(shared.begin(), shared.end(), std::nanf(""));
      ASSERT_TRUE(
          op.run(runtime::Span<const Tensor*>(inputs, 3), runtime::Span<Tensor*>(&out, 1)).ok());
    }
    const std::vector<float> expected =
        native_out ? to_nhwc(d.expected.tensor()) : d.expected.values<float>();
    const std::vector<float> actual = y.values<float>();
    ASSERT_EQ(actual.size(), expected.size());
    for (size_t i = 0; i < actual.size(); ++i) {
      ASSERT_NEAR(actual[i], expected[i], 1e-5 + 1e-4 * std::fabs(expected[i])) << "element " << i;
    }
  }
}

// Through CpuOp::create: taken only by ops avoiding generated code; others go elsewhere.
TEST(DeconvLoops, AreChosenOnlyWhenAvoidingGeneratedCode) {
  uint32_t seed = 9500;
  for (bool avoid : {false, true}) {
    SCOPED_TRACE(avoid ? "avoiding generated code" : "default");
    DeconvCase d({{1, 16, 40, 40}, {16, 16, 2, 2}}, true, {{PostOpKind::Relu}}, 1, seed);
    d.c.desc.avoid_generated_code = avoid;
    expect_near(d.c.run(), d.expected);
    EXPECT_EQ(d.c.description.find(kLoops) != std::string::npos, avoid) << d.c.description;
  }
  struct Other {
    std::string why;
    Shape s;
    std::vector<ir::Attribute> attributes;
    std::string layout;  // the producer's; empty: plain
  };
  const std::string blocked = dnnl_impl::layout_bytes(blocked16_md({1, 16, 8, 8}));
  const std::vector<Other> others = {
      {"a plain producer", {{1, 16, 8, 8}, {16, 16, 2, 2}}, {ints("strides", {2, 2})}, ""},
      {"kernel not its strides",
       {{1, 16, 8, 8}, {16, 16, 3, 3}},
       {ints("strides", {2, 2})},
       blocked},
      {"pads",
       {{1, 16, 8, 8}, {16, 16, 2, 2}},
       {ints("strides", {2, 2}), ints("pads", {1, 1, 0, 0})},
       blocked},
  };
  for (const Other& o : others) {
    SCOPED_TRACE(o.why);
    Case c("ConvTranspose", o.attributes);
    c.desc.small_ops_own_loops = true;
    c.desc.avoid_generated_code = true;
    c.add(random_tensor(o.s.x, seed++), false);
    c.add(random_tensor(o.s.w, seed++, -0.5, 0.5), true);
    if (!o.layout.empty()) c.desc.input_layouts = {o.layout, ""};
    c.desc.constants = {nullptr, &c.at(1)};
    auto loops = dnnl_impl::create_deconv_loops(c.desc);
    ASSERT_FALSE(loops.ok());
    EXPECT_EQ(loops.error(), runtime::Error::NotSupported) << loops.status();
    auto op = c.create();
    ASSERT_TRUE(op.ok()) << op.status();
    EXPECT_EQ((*op)->describe().find(kLoops), std::string::npos) << (*op)->describe();
  }
}

}  // namespace
}  // namespace kiln::engine::cpu
