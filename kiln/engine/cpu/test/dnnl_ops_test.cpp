// The oneDNN op implementations against the reference kernels (kiln/kernels) on seeded random
// data over each op's options. Every op runs with num_threads = 1.

#include <kiln/engine/cpu/test/op_case.h>
#include <kiln/kernels/kernels.h>

#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

namespace kiln::engine::cpu {
namespace {

using namespace test_support;  // NOLINT(google-build-using-namespace): test helpers
using runtime::Error;
using runtime::ScalarType;
using runtime::Tensor;

// ---- MatMul, Gemm ----------------------------------------------------------------------------

TEST(DnnlMatMul, MatchesReferenceOverShapesBiasAndPostOps) {
  struct Shapes {
    std::vector<int64_t> a, b;
  };
  const std::vector<Shapes> shapes = {{{4, 8}, {8, 5}},
                                      {{1, 64}, {64, 33}},
                                      {{3, 4, 8}, {8, 5}},
                                      {{2, 1, 4, 8}, {3, 8, 5}},
                                      {{3, 4, 8}, {3, 8, 5}},
                                      {{8}, {8, 5}},
                                      // Weights without batch dims: one 2-D product of all rows.
                                      {{1, 1, 64}, {64, 33}},
                                      {{2, 3, 4, 8}, {1, 8, 5}}};
  const std::vector<std::vector<PostOp>> post_op_sets = {
      {},
      {{PostOpKind::Relu}},
      {{PostOpKind::Gelu}},
      {{PostOpKind::Sigmoid}},
      {{PostOpKind::Tanh}},
      {{PostOpKind::Swish}},
      {{PostOpKind::AddResidual}, {PostOpKind::Relu}}};
  uint32_t seed = 1;
  for (const Shapes& s : shapes) {
    for (bool constant_b : {true, false}) {
      for (bool bias : {false, true}) {
        for (const auto& post_ops : post_op_sets) {
          SCOPED_TRACE(runtime::shape_to_string(s.a) + " x " + runtime::shape_to_string(s.b) +
                       (constant_b ? " const B" : "") + (bias ? " bias" : "") +
                       post_ops_name(post_ops));
          Case c("MatMul", {});
          c.add(random_tensor(s.a, seed++), false);
          c.add(random_tensor(s.b, seed++), constant_b);
          int64_t n = s.b.back();
          if (bias) c.add(random_tensor({n}, seed++), true);
          auto out_shape = kernels::matmul_shape(s.a, s.b);
          ASSERT_TRUE(out_shape.ok());
          OwnedTensor expected = zeros(*out_shape);
          ASSERT_TRUE(kernels::matmul(c.at(0), c.at(1), expected.tensor()).ok());
          if (bias) {
            float* y = expected.tensor().mutable_data_ptr<float>();
            const float* b = c.at(2).data_ptr<float>();
            for (int64_t i = 0; i < expected.tensor().numel(); ++i) y[i] += b[i % n];
          }
          std::vector<const Tensor*> residuals;
          OwnedTensor residual = random_tensor(*out_shape, seed++);
          if (!post_ops.empty() && post_ops[0].kind == PostOpKind::AddResidual) {
            c.add(std::move(residual), false);
            residuals.push_back(&c.inputs.back()->tensor());
          }
          apply_post_ops(post_ops, residuals, expected);
          c.desc.post_ops = post_ops;
          expect_near(c.run(), expected);
        }
      }
    }
  }
}

TEST(DnnlGemm, MatchesReferenceOverTransposesAlphaBetaAndC) {
  const int64_t m = 6, k = 10, n = 7;
  const std::vector<std::vector<int64_t>> c_shapes = {{}, {n}, {1, n}, {m, 1}, {m, n}, {1}};
  uint32_t seed = 100;
  for (int64_t trans_a : {0, 1}) {
    for (int64_t trans_b : {0, 1}) {
      for (double alpha : {1.0, 0.5}) {
        for (double beta : {1.0, 2.0, 0.0}) {
          for (const auto& c_shape : c_shapes) {
            for (bool constant_c : {true, false}) {
              SCOPED_TRACE("transA " + std::to_string(trans_a) + " transB " +
                           std::to_string(trans_b) + " alpha " + std::to_string(alpha) + " beta " +
                           std::to_string(beta) + " C " + runtime::shape_to_string(c_shape) +
                           (constant_c ? " const" : ""));
              Case c("Gemm", {int_attr("transA", trans_a), int_attr("transB", trans_b),
                              float_attr("alpha", alpha), float_attr("beta", beta)});
              c.add(random_tensor(trans_a ? std::vector<int64_t>{k, m} : std::vector<int64_t>{m, k},
                                  seed++),
                    false);
              c.add(random_tensor(trans_b ? std::vector<int64_t>{n, k} : std::vector<int64_t>{k, n},
                                  seed++),
                    true);
              if (!c_shape.empty()) c.add(random_tensor(c_shape, seed++), constant_c);
              OwnedTensor expected = zeros({m, n});
              ASSERT_TRUE(
                  kernels::gemm(c.at(0), c.at(1), c_shape.empty() ? nullptr : &c.at(2),
                                expected.tensor(),
                                kernels::GemmOptions{alpha, beta, trans_a != 0, trans_b != 0})
                      .ok());
              expect_near(c.run(), expected);
            }
          }
        }
      }
    }
  }
}

// ---- Pooling ---------------------------------------------------------------------------------

TEST(DnnlPool, MatchesReferenceOverWindowsPadsAndModes) {
  struct PoolParams {
    int64_t k, stride, pad, dilation, ceil, include_pad;
  };
  const std::vector<PoolParams> params = {
      {2, 2, 0, 1, 0, 0}, {3, 2, 1, 1, 0, 0}, {3, 2, 1, 1, 0, 1}, {3, 1, 1, 1, 0, 1},
      {3, 2, 0, 1, 1, 0}, {2, 1, 0, 2, 0, 0}, {3, 3, 1, 1, 1, 0}};
  uint32_t seed = 500;
  for (std::string op : {"MaxPool", "AveragePool"}) {
    for (const PoolParams& p : params) {
      if (op == "AveragePool" && p.dilation != 1) continue;  // AveragePool-19 only.
      SCOPED_TRACE(op + " k" + std::to_string(p.k) + " s" + std::to_string(p.stride) + " p" +
                   std::to_string(p.pad) + " d" + std::to_string(p.dilation) + " ceil" +
                   std::to_string(p.ceil) + " include_pad" + std::to_string(p.include_pad));
      std::vector<ir::Attribute> attributes = {
          ints("kernel_shape", {p.k, p.k}), ints("strides", {p.stride, p.stride}),
          ints("pads", {p.pad, p.pad, p.pad, p.pad}), int_attr("ceil_mode", p.ceil)};
      if (op == "MaxPool") attributes.push_back(ints("dilations", {p.dilation, p.dilation}));
      if (op == "AveragePool") attributes.push_back(int_attr("count_include_pad", p.include_pad));
      Case c(op, attributes);
      c.add(random_tensor({2, 5, 11, 10}, seed++), false);
      kernels::PoolOptions options;
      options.kernel_shape = {p.k, p.k};
      options.strides = {p.stride, p.stride};
      options.pads = {p.pad, p.pad, p.pad, p.pad};
      if (op == "MaxPool") options.dilations = {p.dilation, p.dilation};
      options.ceil_mode = p.ceil != 0;
      options.count_include_pad = op == "AveragePool" && p.include_pad != 0;
      auto shape = kernels::pool_shape(c.desc.inputs[0].sizes, options);
      ASSERT_TRUE(shape.ok());
      OwnedTensor expected = zeros(*shape);
      ASSERT_TRUE((op == "MaxPool" ? kernels::max_pool(c.at(0), options, expected.tensor(), nullptr)
                                   : kernels::average_pool(c.at(0), options, expected.tensor()))
                      .ok());
      expect_near(c.run(), expected);
    }
  }
}

TEST(DnnlPool, GlobalAveragePoolMatchesReference) {
  Case c("GlobalAveragePool", {});
  c.add(random_tensor({2, 7, 9, 5}, 600), false);
  OwnedTensor expected = zeros({2, 7, 1, 1});
  ASSERT_TRUE(kernels::global_average_pool(c.at(0), expected.tensor()).ok());
  expect_near(c.run(), expected);
}

// A Conv computing in its own layout (nhwc or blocked) feeding GlobalAveragePool, as in a
// classifier's head: the pool reads that layout, given plain (converted by the op) or native.
TEST(DnnlPool, GlobalAveragePoolReadsItsProducersLayout) {
  struct Shape {
    int64_t batch, channels, height, width;
  };
  const Shape shapes[] = {{1, 16, 13, 13}, {2, 7, 9, 5}, {1, 40, 3, 4}, {2, 24, 1, 1}};
  uint32_t seed = 650;
  for (const Shape& s : shapes) {
    SCOPED_TRACE("N" + std::to_string(s.batch) + " C" + std::to_string(s.channels) + " " +
                 std::to_string(s.height) + "x" + std::to_string(s.width));
    Case conv("Conv", {ints("pads", {1, 1, 1, 1})});
    conv.add(random_tensor({s.batch, 8, s.height, s.width}, seed++), false);
    conv.add(random_tensor({s.channels, 8, 3, 3}, seed++), true);
    const std::vector<int64_t> conv_sizes = {s.batch, s.channels, s.height, s.width};
    OwnedTensor plain = conv.run();  // The Conv's result, plain.
    OwnedTensor expected = zeros({s.batch, s.channels, 1, 1});
    ASSERT_TRUE(kernels::global_average_pool(plain.tensor(), expected.tensor()).ok());

    conv.desc.constants = {nullptr, &conv.at(1)};
    auto conv_op = CpuOp::create(conv.desc);
    ASSERT_TRUE(conv_op.ok()) << conv_op.status();
    auto layout = (*conv_op)->native_output_layout(0);
    if (!layout) continue;  // oneDNN computes plain NCHW on this machine: nothing to hand over.
    OpDesc pool;
    pool.small_ops_own_loops = false;  // tests the oneDNN op at small sizes
    pool.op = "GlobalAveragePool";
    pool.num_threads = 1;
    pool.inputs = {TensorDesc{ScalarType::Float32, conv_sizes}};
    pool.input_layouts = {layout->id};
    auto pool_op = CpuOp::create(pool);
    ASSERT_TRUE(pool_op.ok()) << pool_op.status();
    ASSERT_TRUE((*pool_op)->native_input_layout(0).has_value()) << (*pool_op)->describe();
    EXPECT_EQ((*pool_op)->native_input_layout(0)->id, layout->id);

    // Plain input: the op converts it.
    OwnedTensor from_plain = zeros({s.batch, s.channels, 1, 1});
    const Tensor* in = &plain.tensor();
    Tensor* out = &from_plain.tensor();
    ASSERT_TRUE((*pool_op)
                    ->run(runtime::Span<const Tensor*>(&in, 1), runtime::Span<Tensor*>(&out, 1))
                    .ok());
    expect_near(from_plain, expected);

    // Native input: the Conv's bytes in its layout, read as they are.
    ASSERT_TRUE((*conv_op)->use_native_output(0).ok());
    ASSERT_TRUE((*pool_op)->use_native_input(0).ok());
    std::vector<float> native(layout->bytes / sizeof(float) + 1, 0.0f);
    Tensor native_tensor(ScalarType::Float32, conv_sizes, native.data(),
                         runtime::ShapeDynamism::Static, layout->bytes);
    const Tensor* conv_in = &conv.at(0);
    Tensor* conv_out = &native_tensor;
    const Tensor* conv_inputs[] = {conv_in, nullptr};
    ASSERT_TRUE((*conv_op)
                    ->run(runtime::Span<const Tensor*>(conv_inputs, 2),
                          runtime::Span<Tensor*>(&conv_out, 1))
                    .ok());
    OwnedTensor from_native = zeros({s.batch, s.channels, 1, 1});
    const Tensor* pool_in = &native_tensor;
    Tensor* pool_out = &from_native.tensor();
    ASSERT_TRUE(
        (*pool_op)
            ->run(runtime::Span<const Tensor*>(&pool_in, 1), runtime::Span<Tensor*>(&pool_out, 1))
            .ok());
    expect_near(from_native, expected);

    // The engine's order: hand-overs before any run, then finish (which makes only the
    // conversions left), then runs.
    auto conv2 = CpuOp::create(conv.desc);
    auto pool2 = CpuOp::create(pool);
    ASSERT_TRUE(conv2.ok() && pool2.ok());
    ASSERT_TRUE((*conv2)->use_native_output(0).ok());
    ASSERT_TRUE((*pool2)->use_native_input(0).ok());
    ASSERT_TRUE((*conv2)->finish().ok());
    ASSERT_TRUE((*pool2)->finish().ok());
    ASSERT_TRUE((*conv2)->finish().ok());  // once made, later calls do nothing
    std::fill(native.begin(), native.end(), 0.0f);
    ASSERT_TRUE((*conv2)
                    ->run(runtime::Span<const Tensor*>(conv_inputs, 2),
                          runtime::Span<Tensor*>(&conv_out, 1))
                    .ok());
    OwnedTensor finished = zeros({s.batch, s.channels, 1, 1});
    pool_out = &finished.tensor();
    ASSERT_TRUE(
        (*pool2)
            ->run(runtime::Span<const Tensor*>(&pool_in, 1), runtime::Span<Tensor*>(&pool_out, 1))
            .ok());
    expect_near(finished, expected);
  }
}

// ---- Softmax, normalizations -----------------------------------------------------------------

TEST(DnnlSoftmax, MatchesReferenceOverAxes) {
  uint32_t seed = 700;
  for (std::string op : {"Softmax", "LogSoftmax"}) {
    for (int64_t axis : {-1, 0, 1, 2}) {
      SCOPED_TRACE(op + " axis " + std::to_string(axis));
      Case c(op, {int_attr("axis", axis)});
      c.add(random_tensor({3, 5, 17}, seed++, -4.0, 4.0), false);
      OwnedTensor expected = zeros({3, 5, 17});
      ASSERT_TRUE((op == "Softmax" ? kernels::softmax(c.at(0), axis, expected.tensor())
                                   : kernels::log_softmax(c.at(0), axis, expected.tensor()))
                      .ok());
      expect_near(c.run(), expected);
    }
  }
}

TEST(DnnlLayerNorm, MatchesReferenceOverAxesAndBias) {
  uint32_t seed = 800;
  const std::vector<int64_t> x = {2, 3, 4, 24};
  for (int64_t axis : {-1, 2, 1}) {
    for (bool bias : {true, false}) {
      for (bool constant : {true, false}) {
        SCOPED_TRACE("axis " + std::to_string(axis) + (bias ? " bias" : "") +
                     (constant ? " const" : ""));
        Case c("LayerNormalization", {int_attr("axis", axis), float_attr("epsilon", 1e-3)});
        c.add(random_tensor(x, seed++, -3.0, 3.0), false);
        std::vector<int64_t> params(x.begin() + (axis < 0 ? axis + 4 : axis), x.end());
        c.add(random_tensor(params, seed++), constant);
        if (bias) c.add(random_tensor(params, seed++), constant);
        OwnedTensor expected = zeros(x);
        kernels::LayerNormOptions options{axis, 1e-3};
        ASSERT_TRUE(kernels::layer_norm(c.at(0), c.at(1), bias ? &c.at(2) : nullptr, options,
                                        expected.tensor(), nullptr, nullptr)
                        .ok());
        expect_near(c.run(), expected);
      }
    }
  }
}

TEST(DnnlBatchNorm, MatchesReferenceForInference) {
  uint32_t seed = 900;
  for (const std::vector<int64_t>& x :
       {std::vector<int64_t>{2, 6, 5, 7}, std::vector<int64_t>{3, 6}}) {
    SCOPED_TRACE(runtime::shape_to_string(x));
    Case c("BatchNormalization", {float_attr("epsilon", 1e-4)});
    c.add(random_tensor(x, seed++, -2.0, 2.0), false);
    for (int i = 0; i < 3; ++i) c.add(random_tensor({6}, seed++), true);
    c.add(random_tensor({6}, seed++, 0.1, 2.0), true);  // variance
    OwnedTensor expected = zeros(x);
    kernels::BatchNormOptions options;
    options.epsilon = 1e-4;
    ASSERT_TRUE(kernels::batch_norm(c.at(0), c.at(1), c.at(2), c.at(3), c.at(4), options,
                                    expected.tensor(), nullptr, nullptr)
                    .ok());
    expect_near(c.run(), expected);
  }
}

// ---- Element-wise ----------------------------------------------------------------------------

TEST(DnnlUnary, MatchesReference) {
  using Reference = std::function<runtime::Status(const Tensor&, Tensor&)>;
  const std::vector<std::pair<std::string, Reference>> ops = {
      {"Relu", [](const Tensor& x, Tensor& y) { return kernels::relu(x, y); }},
      {"Sigmoid", [](const Tensor& x, Tensor& y) { return kernels::sigmoid(x, y); }},
      {"Tanh", [](const Tensor& x, Tensor& y) { return kernels::tanh(x, y); }},
      {"Exp", [](const Tensor& x, Tensor& y) { return kernels::exp(x, y); }},
      {"Abs", [](const Tensor& x, Tensor& y) { return kernels::abs(x, y); }},
      {"Neg", [](const Tensor& x, Tensor& y) { return kernels::neg(x, y); }},
      {"Gelu", [](const Tensor& x,
                  Tensor& y) { return kernels::gelu(x, kernels::GeluApproximation::None, y); }},
  };
  uint32_t seed = 1000;
  for (const auto& [op, reference] : ops) {
    SCOPED_TRACE(op);
    Case c(op, {});
    c.add(random_tensor({3, 7, 11}, seed++, -3.0, 3.0), false);
    OwnedTensor expected = zeros({3, 7, 11});
    ASSERT_TRUE(reference(c.at(0), expected.tensor()).ok());
    expect_near(c.run(), expected);
  }
}

TEST(DnnlUnary, ClipTakesBoundsFromConstantInputsOrAttributes) {
  Case inputs("Clip", {});
  inputs.add(random_tensor({40}, 1100, -3.0, 3.0), false);
  inputs.add(OwnedTensor::of<float>({}, {-0.5f}), true);
  inputs.add(OwnedTensor::of<float>({}, {1.5f}), true);
  OwnedTensor expected = zeros({40});
  ASSERT_TRUE(kernels::clip(inputs.at(0), &inputs.at(1), &inputs.at(2), expected.tensor()).ok());
  expect_near(inputs.run(), expected);

  Case attributes("Clip", {float_attr("min", -0.5), float_attr("max", 1.5)});
  attributes.add(random_tensor({40}, 1100, -3.0, 3.0), false);
  expect_near(attributes.run(), expected);
}

TEST(DnnlBinary, MatchesReferenceWithBroadcast) {
  struct Shapes {
    std::vector<int64_t> a, b;
  };
  const std::vector<Shapes> shapes = {{{4, 5}, {4, 5}},    {{2, 3, 4}, {4}},       {{4}, {2, 3, 4}},
                                      {{2, 3, 4}, {3, 1}}, {{1, 3, 1}, {2, 3, 4}}, {{2, 3}, {}}};
  uint32_t seed = 1200;
  for (std::string op : {"Add", "Mul"}) {
    for (const Shapes& s : shapes) {
      for (bool constant_b : {false, true}) {
        SCOPED_TRACE(op + " " + runtime::shape_to_string(s.a) + " " +
                     runtime::shape_to_string(s.b));
        Case c(op, {});
        c.add(random_tensor(s.a, seed++), false);
        c.add(random_tensor(s.b, seed++), constant_b);
        auto shape = kernels::broadcast_shape(s.a, s.b);
        ASSERT_TRUE(shape.ok());
        OwnedTensor expected = zeros(*shape);
        ASSERT_TRUE((op == "Add" ? kernels::add(c.at(0), c.at(1), expected.tensor())
                                 : kernels::mul(c.at(0), c.at(1), expected.tensor()))
                        .ok());
        expect_near(c.run(), expected);
      }
    }
  }
}

// ---- Errors ----------------------------------------------------------------------------------

TEST(DnnlErrors, UnsupportedRequestsNameTheCulprit) {
  Case unknown("Einsum", {});
  unknown.add(random_tensor({2}, 1), false);
  auto op = CpuOp::create(unknown.desc);
  ASSERT_FALSE(op.ok());
  EXPECT_EQ(op.error(), Error::NotSupported);
  EXPECT_NE(op.status().message().find("'Einsum'"), std::string::npos);

  Case conv("Conv", {});
  conv.add(random_tensor({1, 2, 4, 4}, 2), false);
  conv.add(random_tensor({2, 2, 3, 3}, 3), false);
  conv.desc.constants = {nullptr, nullptr};
  op = CpuOp::create(conv.desc);
  ASSERT_FALSE(op.ok());
  EXPECT_EQ(op.error(), Error::NotSupported);
  EXPECT_NE(op.status().message().find("input 1 (W) is not constant"), std::string::npos);

  Case both("Add", {});
  both.add(random_tensor({3, 1}, 4), false);
  both.add(random_tensor({1, 4}, 5), false);
  op = CpuOp::create(both.desc);
  ASSERT_FALSE(op.ok());
  EXPECT_NE(op.status().message().find("both inputs broadcast"), std::string::npos);

  Case f64("Relu", {});
  f64.desc.inputs = {TensorDesc{ScalarType::Float64, {4}}};
  op = CpuOp::create(f64.desc);
  ASSERT_FALSE(op.ok());
  EXPECT_EQ(op.error(), Error::NotSupported);
  EXPECT_NE(op.status().message().find("expected f32"), std::string::npos);
}

// ---- Threads ---------------------------------------------------------------------------------

size_t count_threads() {
  size_t count = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator("/proc/self/task"))
    ++count;
  return count;
}

// OpenMP starts its worker threads at the first parallel region with more than one thread and
// keeps them; every other test here runs with num_threads = 1, so none exist yet unless oneDNN
// ignored that setting.
TEST(DnnlThreads, OneThreadStartsNoWorkersAndRestoresTheCallersSetting) {
  omp_set_num_threads(4);
  size_t before = count_threads();
  Case c("Conv", {ints("pads", {1, 1, 1, 1})});
  c.add(random_tensor({1, 32, 28, 28}, 1300), false);
  c.add(random_tensor({32, 32, 3, 3}, 1301), true);
  c.run();
  EXPECT_EQ(count_threads(), before);
  EXPECT_EQ(omp_get_max_threads(), 4);

  // Small ops asked for 3 threads run on one (op_threads): no workers, and still correct.
  {
    Case matmul("MatMul", {});
    matmul.desc.num_threads = 3;
    matmul.add(random_tensor({1, 128}, 1302), false);
    matmul.add(random_tensor({128, 256}, 1303), true);
    OwnedTensor expected = zeros({1, 256});
    ASSERT_TRUE(kernels::matmul(matmul.at(0), matmul.at(1), expected.tensor()).ok());
    expect_near(matmul.run(), expected);
    Case relu("Relu", {});
    relu.desc.num_threads = 3;
    relu.add(random_tensor({4, 1000}, 1304), false);
    OwnedTensor relu_expected = zeros({4, 1000});
    ASSERT_TRUE(kernels::relu(relu.at(0), relu_expected.tensor()).ok());
    expect_near(relu.run(), relu_expected);
    Case conv("Conv", {ints("pads", {1, 1, 1, 1})});
    conv.desc.num_threads = 3;
    conv.add(random_tensor({1, 8, 8, 8}, 1305), false);
    conv.add(random_tensor({8, 8, 3, 3}, 1306), true);
    conv.run();
    EXPECT_EQ(count_threads(), before);
  }

  // The check can fail: with 3 threads OpenMP starts workers for a large op.
  c.desc.num_threads = 3;
  c.run();
  EXPECT_GE(count_threads(), before + 2);
  EXPECT_EQ(omp_get_max_threads(), 4);

  // A ConvTranspose large enough for its scatter (dnnl_deconv_patches.cpp) to split rows.
  Case deconv("ConvTranspose", {ints("strides", {2, 2})});
  deconv.desc.num_threads = 3;
  deconv.add(random_tensor({1, 16, 40, 40}, 1307), false);
  deconv.add(random_tensor({16, 16, 2, 2}, 1308), true);
  kernels::ConvTransposeOptions options;
  options.strides = {2, 2};
  OwnedTensor expected = zeros({1, 16, 80, 80});
  ASSERT_TRUE(
      kernels::conv_transpose(deconv.at(0), deconv.at(1), nullptr, options, expected.tensor())
          .ok());
  expect_near(deconv.run(), expected);
  EXPECT_NE(deconv.description.find("as patches"), std::string::npos) << deconv.description;
}

}  // namespace
}  // namespace kiln::engine::cpu
