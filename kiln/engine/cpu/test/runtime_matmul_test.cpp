// RuntimeMatMul (run-time shapes, for shape-generic plans) against the reference MatMul on
// seeded random data: one op over many shapes, with a constant B (bias, post-ops; on oneDNN,
// and on kiln's AVX2 loops as kernel selection takes them without AVX-512) and with two
// computed inputs (equal and broadcast batch dims), and its errors.

#include <kiln/engine/cpu/avx2_gemm.h>
#include <kiln/engine/cpu/runtime_matmul.h>
#include <kiln/engine/cpu/test/op_case.h>
#include <kiln/kernels/kernels.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace kiln::engine::cpu {
namespace {

using namespace test_support;  // NOLINT(google-build-using-namespace): test helpers
using runtime::Tensor;
using ::testing::HasSubstr;

// Reference: a x b (+ bias along the last dim), then the post-ops.
OwnedTensor reference(const Tensor& a, const Tensor& b, const Tensor* bias,
                      const std::vector<PostOp>& post_ops) {
  auto shape = kernels::matmul_shape(a.sizes(), b.sizes());
  EXPECT_TRUE(shape.ok()) << shape.status();
  OwnedTensor out = zeros(*shape);
  EXPECT_TRUE(kernels::matmul(a, b, out.tensor()).ok());
  if (bias != nullptr) {
    float* y = out.tensor().mutable_data_ptr<float>();
    int64_t n = bias->numel();
    for (int64_t i = 0; i < out.tensor().numel(); ++i) y[i] += bias->data_ptr<float>()[i % n];
  }
  apply_post_ops(post_ops, {}, out);
  return out;
}

// Runs `op` on `a` (and `b` when B is computed) into a fresh output of the sizes it reports.
OwnedTensor run(RuntimeMatMul& op, const Tensor& a, const Tensor* b) {
  auto sizes =
      op.output_sizes(a.sizes(), b != nullptr ? b->sizes() : runtime::Span<const int64_t>());
  EXPECT_TRUE(sizes.ok()) << sizes.status();
  OwnedTensor out = zeros(sizes.ok() ? *sizes : std::vector<int64_t>{0});
  runtime::Status status = op.run(a, b, out.tensor());
  EXPECT_TRUE(status.ok()) << status;
  return out;
}

// Rows of 1-4 (a decoder's: on AVX-512, kiln's streaming loops over oneDNN's blocked B) and more
// (its tiles); B of one block of 64 columns, cut, and of several with K over a step of the
// tiles' (128) and not a multiple of 16 (the layout's rows), large enough that one row runs on
// both threads.
TEST(RuntimeMatMul, OneOpWithConstantBMatchesReferenceOverShapesBiasAndPostOps) {
  const std::vector<std::vector<PostOp>> post_op_sets = {
      {}, {{PostOpKind::Relu}}, {{PostOpKind::Gelu}}, {{PostOpKind::Clip, -0.5f, 0.5f}}};
  uint32_t seed = 10;
  for (const auto& [k, n] : std::vector<std::pair<int64_t, int64_t>>{{24, 40}, {300, 700}}) {
    const std::vector<std::vector<int64_t>> a_shapes = {{k},       {1, k},      {3, k}, {7, k},
                                                        {2, 3, k}, {1, 130, k}, {0, k}};
    OwnedTensor b = random_tensor({k, n}, 1);
    OwnedTensor bias = random_tensor({n}, 2);
    for (bool avx2 : {false, true}) {
      if (avx2 && !dnnl_impl::cpu_has_avx2_fma()) continue;
      set_avx512_for_testing(!avx2);
      for (bool with_bias : {false, true}) {
        for (const auto& post_ops : post_op_sets) {
          for (int threads : {1, 2}) {
            Case c("MatMul", {});
            c.desc.num_threads = threads;
            c.add(random_tensor({1, k}, 3), false);  // A's sizes are ignored: known at run time
            c.add(random_tensor({k, n}, 1), true);
            if (with_bias) c.add(random_tensor({n}, 2), true);
            c.desc.post_ops = post_ops;
            c.desc.constants = {nullptr, &c.at(1)};
            if (with_bias) c.desc.constants.push_back(&c.at(2));
            auto op = RuntimeMatMul::create(c.desc);
            ASSERT_TRUE(op.ok()) << op.status();
            EXPECT_TRUE((*op)->constant_b());
            EXPECT_THAT((*op)->describe(), HasSubstr("run-time rows"));
            EXPECT_EQ((*op)->describe().find("AVX2") != std::string::npos, avx2)
                << (*op)->describe();
            EXPECT_EQ((*op)->describe().find("blocked B") != std::string::npos, !avx2)
                << (*op)->describe();
            ASSERT_TRUE((*op)->warm_up().ok());
            for (const auto& shape : a_shapes) {
              SCOPED_TRACE(runtime::shape_to_string(shape) + " x " + std::to_string(n) +
                           (with_bias ? " bias" : "") + post_ops_name(post_ops) +
                           (avx2 ? " AVX2" : "") + " threads " + std::to_string(threads));
              OwnedTensor a = random_tensor(shape, seed++);
              OwnedTensor out = run(**op, a.tensor(), nullptr);
              expect_near(out, reference(a.tensor(), b.tensor(),
                                         with_bias ? &bias.tensor() : nullptr, post_ops));
            }
          }
        }
      }
    }
  }
  set_avx512_for_testing(true);  // the binary's choice (own_loops_on.cpp)
}

TEST(RuntimeMatMul, TwoComputedInputsMatchReferenceWithEqualAndBroadcastBatches) {
  Case c("MatMul", {});
  c.add(random_tensor({1, 1}, 1), false);
  c.add(random_tensor({1, 1}, 2), false);
  auto op = RuntimeMatMul::create(c.desc);
  ASSERT_TRUE(op.ok()) << op.status();
  EXPECT_FALSE((*op)->constant_b());
  struct Shapes {
    std::vector<int64_t> a, b;
  };
  // Ranks 2 to 4 on oneDNN (one primitive each); broadcast batches, rank 1 and an empty sum
  // on the reference kernel.
  const std::vector<Shapes> shapes = {{{5, 8}, {8, 3}},
                                      {{1, 4, 17, 16}, {1, 4, 16, 17}},
                                      {{1, 4, 9, 9}, {1, 4, 9, 16}},
                                      {{2, 6, 5}, {2, 5, 7}},
                                      {{2, 6, 5}, {1, 5, 7}},
                                      {{6, 5}, {3, 5, 2}},
                                      {{5}, {5, 4}},
                                      {{3, 0}, {0, 4}}};
  uint32_t seed = 40;
  for (const Shapes& s : shapes) {
    SCOPED_TRACE(runtime::shape_to_string(s.a) + " x " + runtime::shape_to_string(s.b));
    OwnedTensor a = random_tensor(s.a, seed++);
    OwnedTensor b = random_tensor(s.b, seed++);
    OwnedTensor out = run(**op, a.tensor(), &b.tensor());
    expect_near(out, reference(a.tensor(), b.tensor(), nullptr, {}));
  }
}

// Attention's products as a shape-generic plan runs them (kiln's AVX-512 or AVX2 loops as
// kernel selection takes them, else oneDNN), on 1 and 2 threads (whole batches a thread, or one
// batch over both), over shapes with row and column tails, one batch and many, a larger B then
// a smaller one (the panel buffers are reused).
TEST(RuntimeMatMul, TwoComputedInputsOverBatchesAndThreads) {
  struct Shapes {
    std::vector<int64_t> a, b;
  };
  const std::vector<Shapes> shapes = {{{1, 4, 128, 128}, {1, 4, 128, 32}},
                                      {{1, 4, 128, 32}, {1, 4, 32, 128}},
                                      {{1, 4, 17, 40}, {1, 4, 40, 17}},
                                      {{3, 2, 7, 33}, {3, 2, 33, 19}},
                                      {{1, 200, 600}, {1, 600, 70}},
                                      {{5, 1, 3}, {5, 3, 1}},
                                      {{2, 9, 16}, {2, 16, 48}},
                                      // a decoder step's attention: few rows, B read in place
                                      {{1, 4, 1, 32}, {1, 4, 32, 129}},
                                      {{1, 4, 1, 129}, {1, 4, 129, 32}},
                                      {{3, 4, 65}, {3, 65, 70}},
                                      {{2, 5, 19}, {2, 19, 64}}};
  uint32_t seed = 70;
  // With a scale (attention's 1 / sqrt(d), a fused Linear of beta 0) on every other case.
  const std::vector<PostOp> scale = {{PostOpKind::Linear, 0.125f, 0.0f}};
  for (bool avx512 : {true, false}) {
    set_avx512_for_testing(avx512);
    for (int threads : {1, 2}) {
      const bool scaled = (threads == 2) == avx512;
      Case c("MatMul", {});
      c.desc.num_threads = threads;
      c.add(random_tensor({1, 1}, 1), false);
      c.add(random_tensor({1, 1}, 2), false);
      if (scaled) c.desc.post_ops = scale;
      auto op = RuntimeMatMul::create(c.desc);
      ASSERT_TRUE(op.ok()) << op.status();
      EXPECT_THAT((*op)->describe(), HasSubstr("run-time shapes"));
      EXPECT_EQ((*op)->describe().find("kiln AVX-512") != std::string::npos,
                avx512_own_runtime_gemm())
          << (*op)->describe();
      EXPECT_EQ((*op)->provider(), (*op)->describe().rfind("kiln", 0) == 0 ? "kiln" : "onednn");
      for (const Shapes& s : shapes) {
        SCOPED_TRACE(runtime::shape_to_string(s.a) + " x " + runtime::shape_to_string(s.b) +
                     " threads " + std::to_string(threads) + (avx512 ? " AVX-512" : " AVX2") +
                     (scaled ? " scaled" : ""));
        OwnedTensor a = random_tensor(s.a, seed++);
        OwnedTensor b = random_tensor(s.b, seed++);
        OwnedTensor out = run(**op, a.tensor(), &b.tensor());
        expect_near(out, reference(a.tensor(), b.tensor(), nullptr,
                                   scaled ? scale : std::vector<PostOp>{}));
      }
    }
  }
  set_avx512_for_testing(true);  // the binary's choice (own_loops_on.cpp)
}

// A Transpose folded into the MatMul (`OpDesc::b_transposed`): B given as B^T, as attention's
// keys are stored. A decoder step's few rows (B^T read in place), more rows (B^T packed: into
// blocks of 64 columns or panels), K and N with tails, one batch and many, broadcast batches (the
// reference kernel), on AVX-512 and AVX2 and 1 or 2 threads; a B^T of another rank than the
// Transpose's is refused.
TEST(RuntimeMatMul, ComputedBReadTransposed) {
  struct Shapes {
    std::vector<int64_t> a, bt;  // bt: B's sizes with the last two swapped
  };
  const std::vector<Shapes> shapes = {
      {{1, 4, 1, 32}, {1, 4, 129, 32}},  {{1, 4, 3, 37}, {1, 4, 70, 37}},
      {{1, 4, 4, 5}, {1, 4, 3, 5}},      {{1, 4, 128, 32}, {1, 4, 128, 32}},
      {{1, 4, 17, 40}, {1, 4, 33, 40}},  {{1, 2, 7, 16}, {1, 1, 9, 16}},
      {{1, 4, 20, 24}, {1, 4, 100, 24}},  // N of 6 panels and a cut one (AVX-512: 2 blocks)
      {{1, 2, 13, 45}, {1, 2, 64, 45}},   // one whole block of 64 columns, K not of 16
      {{1, 3, 30, 17}, {1, 3, 130, 17}}};
  uint32_t seed = 300;
  for (bool avx512 : {true, false}) {
    set_avx512_for_testing(avx512);
    for (int threads : {1, 2}) {
      Case c("MatMul", {});
      c.desc.num_threads = threads;
      c.desc.b_transposed = true;
      c.add(random_tensor({1, 1, 1, 1}, 1), false);
      c.add(random_tensor({1, 1, 1, 1}, 2), false);
      auto op = RuntimeMatMul::create(c.desc);
      if (!avx512_own_runtime_gemm() && !avx2_own_gemm()) {
        ASSERT_FALSE(op.ok());  // oneDNN's run-time matmul: the Transpose stays
        continue;
      }
      ASSERT_TRUE(op.ok()) << op.status();
      EXPECT_THAT((*op)->describe(), HasSubstr("read transposed"));
      for (const Shapes& s : shapes) {
        SCOPED_TRACE(runtime::shape_to_string(s.a) + " x T" + runtime::shape_to_string(s.bt) +
                     " threads " + std::to_string(threads) + (avx512 ? " AVX-512" : " AVX2"));
        OwnedTensor a = random_tensor(s.a, seed++);
        OwnedTensor bt = random_tensor(s.bt, seed++);
        OwnedTensor b = swap_last_two(bt.tensor());
        OwnedTensor out = run(**op, a.tensor(), &bt.tensor());
        expect_near(out, reference(a.tensor(), b.tensor(), nullptr, {}));
      }
      OwnedTensor a = random_tensor({4, 1, 32}, seed++);
      OwnedTensor rank3 = random_tensor({4, 9, 32}, seed++);
      auto sizes = (*op)->output_sizes(a.tensor().sizes(), rank3.tensor().sizes());
      ASSERT_FALSE(sizes.ok());
      EXPECT_EQ(sizes.error(), runtime::Error::InvalidArgument);
      EXPECT_THAT(sizes.status().message(), HasSubstr("expected rank 4"));
    }
  }
  set_avx512_for_testing(true);  // the binary's choice (own_loops_on.cpp)
}

TEST(RuntimeMatMul, ErrorsNameTheShapesAndWhatIsNotSupported) {
  Case c("MatMul", {});
  c.add(random_tensor({1, 8}, 1), false);
  c.add(random_tensor({8, 4}, 2), true);
  c.desc.constants = {nullptr, &c.at(1)};
  auto op = RuntimeMatMul::create(c.desc);
  ASSERT_TRUE(op.ok()) << op.status();
  OwnedTensor a = random_tensor({3, 7}, 3);
  auto sizes = (*op)->output_sizes(a.tensor().sizes());
  ASSERT_FALSE(sizes.ok());
  EXPECT_EQ(sizes.error(), runtime::Error::InvalidArgument);
  EXPECT_THAT(sizes.status().message(), HasSubstr("A has shape [3, 7] (expected [..., 8]"));
  OwnedTensor good = random_tensor({3, 8}, 4);
  OwnedTensor wrong_out = zeros({3, 5});
  runtime::Status status = (*op)->run(good.tensor(), nullptr, wrong_out.tensor());
  EXPECT_EQ(status.code(), runtime::Error::InvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("output has shape [3, 5] (expected [3, 4])"));

  Case residual("MatMul", {});
  residual.add(random_tensor({1, 8}, 1), false);
  residual.add(random_tensor({8, 4}, 2), true);
  residual.add(random_tensor({1, 4}, 3), false);  // the residual, after the op's inputs
  residual.desc.constants = {nullptr, &residual.at(1), nullptr};
  residual.desc.post_ops = {{PostOpKind::AddResidual}};
  auto refused = RuntimeMatMul::create(residual.desc);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error(), runtime::Error::NotSupported);
  EXPECT_THAT(refused.status().message(), HasSubstr("no residual post-op"));

  Case bad_bias("MatMul", {});
  bad_bias.add(random_tensor({1, 8}, 1), false);
  bad_bias.add(random_tensor({8, 4}, 2), true);
  bad_bias.add(random_tensor({5}, 3), true);
  bad_bias.desc.constants = {nullptr, &bad_bias.at(1), &bad_bias.at(2)};
  auto wrong = RuntimeMatMul::create(bad_bias.desc);
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.error(), runtime::Error::InvalidArgument);
  EXPECT_THAT(wrong.status().message(),
              HasSubstr("bias (input 2) has 5 elements (expected N = 4)"));

  for (const std::vector<PostOp>& post_ops :
       std::vector<std::vector<PostOp>>{{{PostOpKind::Relu}}, {{PostOpKind::Linear, 2.0f, 1.0f}}}) {
    Case activated("MatMul", {});
    activated.add(random_tensor({2, 3}, 1), false);
    activated.add(random_tensor({3, 2}, 2), false);
    activated.desc.post_ops = post_ops;
    auto not_taken = RuntimeMatMul::create(activated.desc);
    ASSERT_FALSE(not_taken.ok());
    EXPECT_EQ(not_taken.error(), runtime::Error::NotSupported);
    EXPECT_THAT(not_taken.status().message(), HasSubstr("no post-op but a scale"));
  }

  Case computed("MatMul", {});
  computed.add(random_tensor({2, 3}, 1), false);
  computed.add(random_tensor({3, 2}, 2), false);
  auto two = RuntimeMatMul::create(computed.desc);
  ASSERT_TRUE(two.ok()) << two.status();
  OwnedTensor x = random_tensor({2, 3}, 5);
  OwnedTensor out = zeros({2, 2});
  status = (*two)->run(x.tensor(), nullptr, out.tensor());
  EXPECT_EQ(status.code(), runtime::Error::InvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("B is missing"));
}

}  // namespace
}  // namespace kiln::engine::cpu
