// Ops of little work (small_ops.cpp, CpuOp::create's routing): small Convs, MatMuls and Gemms
// on kiln's own loops against the reference kernels on seeded random data, and tiny
// element-wise ops left to the reference kernels, while larger ones keep oneDNN.

#include <kiln/engine/cpu/packed_constants.h>
#include <kiln/engine/cpu/test/op_case.h>
#include <kiln/kernels/kernels.h>

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

namespace kiln::engine::cpu {
namespace {

using namespace test_support;  // NOLINT(google-build-using-namespace): test helpers

constexpr const char* kOwnLoops = "kiln small";

Case small_case(std::string op, std::vector<ir::Attribute> attributes) {
  Case c(std::move(op), std::move(attributes));
  c.desc.small_ops_own_loops = true;
  return c;
}

TEST(SmallOps, ConvsMatchReferenceOverGeometryBiasAndPostOps) {
  struct Geometry {
    std::vector<int64_t> x, w, strides, dilations, pads;
  };
  const std::vector<Geometry> geometries = {
      {{1, 65, 9}, {64, 65, 3}, {1}, {1}, {1, 1}},                 // the VAD's encoder
      {{1, 64, 9}, {64, 64, 3}, {2}, {1}, {1, 1}},                 // stride 2
      {{1, 1, 512}, {65, 1, 128}, {64}, {1}, {64, 64}},            // a long 1-D kernel
      {{2, 3, 7}, {5, 3, 2}, {1}, {2}, {0, 1}},                    // dilation, uneven pads
      {{1, 1, 8, 8}, {8, 1, 3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}},  // digits' first Conv
      {{1, 8, 4, 4}, {16, 8, 3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}},
      {{2, 3, 9, 7}, {4, 3, 3, 2}, {2, 1}, {1, 2}, {1, 0, 2, 1}},  // everything uneven
      {{1, 17, 5, 5}, {33, 17, 1, 1}, {1, 1}, {1, 1}, {0, 0, 0, 0}},
      // Output rows wider than a panel of 16 pixels, at stride 1 and strided and dilated.
      {{1, 2, 3, 37}, {4, 2, 3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}},
      {{1, 2, 5, 41}, {4, 2, 3, 3}, {2, 2}, {1, 2}, {1, 2, 0, 1}}};
  const std::vector<std::vector<PostOp>> post_op_sets = {{},
                                                         {{PostOpKind::Relu}},
                                                         {{PostOpKind::Clip, -0.5f, 0.5f}},
                                                         {{PostOpKind::Sigmoid}},
                                                         {{PostOpKind::Swish}},
                                                         {{PostOpKind::Tanh}, {PostOpKind::Relu}}};
  uint32_t seed = 900;
  std::set<std::string> orientations;
  for (const Geometry& g : geometries) {
    for (bool bias : {true, false}) {
      for (const auto& post_ops : post_op_sets) {
        SCOPED_TRACE(runtime::shape_to_string(g.x) + " * " + runtime::shape_to_string(g.w) +
                     (bias ? " bias" : "") + post_ops_name(post_ops));
        kernels::ConvOptions options;
        options.strides = g.strides;
        options.dilations = g.dilations;
        options.pads = g.pads;
        Case c = small_case("Conv", {ints("strides", g.strides), ints("dilations", g.dilations),
                                     ints("pads", g.pads)});
        c.add(random_tensor(g.x, seed++), false);
        c.add(random_tensor(g.w, seed++, -0.5, 0.5), true);
        if (bias) c.add(random_tensor({g.w[0]}, seed++), true);
        expect_conv_like_reference(c, options, bias, post_ops, seed);
        EXPECT_NE(c.description.find(kOwnLoops), std::string::npos) << c.description;
        orientations.insert(c.description.substr(c.description.rfind(' ') + 1));
      }
    }
  }
  // Few pixels (the VAD's) run by output channels, the rest by pixels.
  EXPECT_EQ(orientations, (std::set<std::string>{"channels", "pixels"}));
}

TEST(SmallOps, MatMulsAndGemmsMatchReference) {
  uint32_t seed = 950;
  // MatMul: A of rank 2 and 3 (rows of every batch at once), N across panel boundaries.
  for (const auto& [a, n] : std::vector<std::pair<std::vector<int64_t>, int64_t>>{
           {{1, 64}, 256}, {{3, 5, 7}, 17}, {{9, 33}, 16}, {{2, 1}, 1}}) {
    SCOPED_TRACE("MatMul " + runtime::shape_to_string(a) + " x N " + std::to_string(n));
    Case c = small_case("MatMul", {});
    c.add(random_tensor(a, seed++), false);
    c.add(random_tensor({a.back(), n}, seed++), true);
    std::vector<int64_t> out(a.begin(), a.end() - 1);
    out.push_back(n);
    OwnedTensor expected = zeros(out);
    ASSERT_TRUE(kernels::matmul(c.at(0), c.at(1), expected.tensor()).ok());
    expect_near(c.run(), expected);
    EXPECT_NE(c.description.find(kOwnLoops), std::string::npos) << c.description;
  }
  // Gemm: transB, alpha, beta, C per column or one value; fused Relu.
  for (bool trans_b : {false, true}) {
    for (const std::vector<int64_t>& c_shape :
         std::vector<std::vector<int64_t>>{{10}, {1, 10}, {1}}) {
      SCOPED_TRACE(std::string(trans_b ? "transB" : "") + " C " +
                   runtime::shape_to_string(c_shape));
      kernels::GemmOptions options;
      options.alpha = 0.5;
      options.beta = 2.0;
      options.trans_b = trans_b;
      Case c = small_case("Gemm", {int_attr("transB", trans_b ? 1 : 0), float_attr("alpha", 0.5),
                                   float_attr("beta", 2.0)});
      c.add(random_tensor({6, 20}, seed++), false);
      c.add(random_tensor(trans_b ? std::vector<int64_t>{10, 20} : std::vector<int64_t>{20, 10},
                          seed++),
            true);
      c.add(random_tensor(c_shape, seed++), true);
      OwnedTensor expected = zeros({6, 10});
      ASSERT_TRUE(kernels::gemm(c.at(0), c.at(1), &c.at(2), expected.tensor(), options).ok());
      apply_post_ops({{PostOpKind::Relu}}, {}, expected);
      c.desc.post_ops = {{PostOpKind::Relu}};
      expect_near(c.run(), expected);
      EXPECT_NE(c.description.find(kOwnLoops), std::string::npos) << c.description;
    }
  }
}

// A few rows (a decoder's token) by a large constant B: the streaming loops at any size, with
// bias, Gelu (erf and tanh), a residual, and on one or two threads (columns split); B in
// oneDNN's blocked layout (as kernel selection takes it with AVX-512), or, planned as for an
// AVX2 CPU, on kiln's AVX2 MatMul.
// K = 300 and N = 1000 leave partial blocks of rows and of columns.
TEST(SmallOps, MatMulsOfFewRowsStreamAtAnySize) {
  uint32_t seed = 970;
  const std::vector<std::vector<PostOp>> post_op_sets = {
      {},
      {{PostOpKind::Gelu}},
      {{PostOpKind::Gelu, 1.0f}},
      {{PostOpKind::AddResidual}},
      {{PostOpKind::AddResidual}, {PostOpKind::Relu}}};
  for (bool avx512 : {true, false}) {
    set_avx512_for_testing(avx512);
    for (int64_t rows : {1, 2, 3, 4}) {
      for (bool bias : {false, true}) {
        for (const auto& post_ops : post_op_sets) {
          for (int threads : {1, 2}) {
            SCOPED_TRACE("rows " + std::to_string(rows) + (bias ? " bias" : "") +
                         post_ops_name(post_ops) + " threads " + std::to_string(threads) +
                         (avx512 ? " blocked B" : " panels"));
            const int64_t k = 300, n = 1000;  // 300,000 multiply-adds a row: past the small bound
            Case c = small_case("MatMul", {});
            c.desc.num_threads = threads;
            c.add(random_tensor({1, rows, k}, seed++), false);
            c.add(random_tensor({k, n}, seed++, -0.2, 0.2), true);
            if (bias) c.add(random_tensor({n}, seed++), true);
            OwnedTensor expected = zeros({1, rows, n});
            ASSERT_TRUE(kernels::matmul(c.at(0), c.at(1), expected.tensor()).ok());
            if (bias) {
              float* y = expected.tensor().mutable_data_ptr<float>();
              for (int64_t i = 0; i < rows * n; ++i) y[i] += c.at(2).data_ptr<float>()[i % n];
            }
            std::vector<const runtime::Tensor*> residuals;
            if (!post_ops.empty() && post_ops.front().kind == PostOpKind::AddResidual) {
              c.add(random_tensor({1, rows, n}, seed++), false);
              residuals.push_back(&c.at(bias ? 3 : 2));
            }
            apply_post_ops(post_ops, residuals, expected);
            c.desc.post_ops = post_ops;
            expect_near(c.run(), expected);
            const auto has = [&](const char* what) {
              return c.description.find(what) != std::string::npos;
            };
            if (avx512) {
              EXPECT_TRUE(has("B streamed") && has("blocked B (BA16a64b)")) << c.description;
            } else {  // kiln's AVX2 MatMul takes every MatMul by a constant B then
              EXPECT_TRUE(has("kiln AVX2 MatMul") || (has("B streamed") && !has("blocked B")))
                  << c.description;
            }
          }
        }
      }
    }
  }
  set_avx512_for_testing(true);  // the binary's choice (own_loops_on.cpp)
}

// With AVX-512, a streaming MatMul takes its B packed as oneDNN's blocked MatMul of many rows
// packs the same weight: in one store, the second of the two ops (either order) packs nothing,
// and both give the reference's results. A streaming Gemm (transB, alpha 1) shares likewise.
TEST(SmallOps, StreamingAndBlockedMatMulsShareOnePackingOfB) {
  if (!cpu_has_avx512()) GTEST_SKIP() << "oneDNN packs B in its blocked layout on AVX-512 only";
  uint32_t seed = 1200;
  for (bool gemm : {false, true}) {
    for (bool streaming_first : {true, false}) {
      SCOPED_TRACE(std::string(gemm ? "Gemm" : "MatMul") +
                   (streaming_first ? ", streaming first" : ", many rows first"));
      const int64_t k = 320, n = 1024;
      OwnedTensor b = gemm ? random_tensor({n, k}, seed++, -0.2, 0.2)
                           : random_tensor({k, n}, seed++, -0.2, 0.2);
      PackedConstants store;
      auto op_of = [&](int64_t rows, uint32_t a_seed) {
        Case c = gemm ? small_case("Gemm", {int_attr("transB", 1)}) : small_case("MatMul", {});
        c.add(random_tensor({rows, k}, a_seed), false);
        c.add(OwnedTensor::of(
                  std::vector<int64_t>(b.tensor().sizes().begin(), b.tensor().sizes().end()),
                  b.values<float>()),
              true);
        c.desc.packed = &store;
        return c;
      };
      Case few = op_of(1, seed++), many = op_of(128, seed++);
      Case* order[2] = {streaming_first ? &few : &many, streaming_first ? &many : &few};
      for (int i = 0; i < 2; ++i) {
        Case& c = *order[i];
        auto op = c.create();
        ASSERT_TRUE(op.ok()) << op.status();
        EXPECT_EQ(store.num_packed(), 1u) << (*op)->describe();
        OwnedTensor expected = zeros((*op)->outputs()[0].sizes);
        kernels::GemmOptions options;
        options.trans_b = gemm;
        ASSERT_TRUE(gemm ? kernels::gemm(c.at(0), c.at(1), nullptr, expected.tensor(), options).ok()
                         : kernels::matmul(c.at(0), c.at(1), expected.tensor()).ok());
        expect_near(c.run(**op), expected);
      }
      EXPECT_NE(few.description.find("blocked B"), std::string::npos) << few.description;
      EXPECT_EQ(many.description.find(kOwnLoops), std::string::npos) << many.description;
    }
  }
}

// A classifier's Gemm (transB, alpha, beta) of one row by a large B streams too, on 2 threads.
TEST(SmallOps, GemmsOfOneRowStreamWithTransBAlphaAndBeta) {
  uint32_t seed = 985;
  kernels::GemmOptions options;
  options.alpha = 0.5;
  options.beta = 2.0;
  options.trans_b = true;
  Case c = small_case("Gemm",
                      {int_attr("transB", 1), float_attr("alpha", 0.5), float_attr("beta", 2.0)});
  c.desc.num_threads = 2;
  c.add(random_tensor({1, 512}, seed++), false);
  c.add(random_tensor({1000, 512}, seed++, -0.1, 0.1), true);
  c.add(random_tensor({1000}, seed++), true);
  OwnedTensor expected = zeros({1, 1000});
  ASSERT_TRUE(kernels::gemm(c.at(0), c.at(1), &c.at(2), expected.tensor(), options).ok());
  expect_near(c.run(), expected);
  EXPECT_NE(c.description.find("B streamed for 1 row(s)"), std::string::npos) << c.description;
}

TEST(SmallOps, WhatTheLoopsLackOrLargerWorkStaysOnOneDnn) {
  uint32_t seed = 990;
  auto described = [](Case& c) {
    auto op = c.create();
    EXPECT_TRUE(op.ok()) << op.status();
    return op.ok() ? (*op)->describe() : std::string();
  };
  {  // More than 2^18 multiply-adds.
    Case c = small_case("MatMul", {});
    c.add(random_tensor({64, 128}, seed++), false);
    c.add(random_tensor({128, 128}, seed++), true);
    EXPECT_EQ(described(c).find(kOwnLoops), std::string::npos);
  }
  {  // Gelu on a B that stays in cache: oneDNN's kernels, unless B is read in oneDNN's blocked
     // layout (AVX-512), which the streaming loops read too (one packing for every plan).
    Case c = small_case("MatMul", {});
    c.add(random_tensor({1, 64}, seed++), false);
    c.add(random_tensor({64, 64}, seed++), true);
    c.desc.post_ops = {{PostOpKind::Gelu}};
    const std::string description = described(c);
    EXPECT_EQ(description.find(kOwnLoops) != std::string::npos, streaming_b_blocked())
        << description;
  }
  {  // More rows than a streaming MatMul's, by a large B.
    Case c = small_case("MatMul", {});
    c.add(random_tensor({8, 512}, seed++), false);
    c.add(random_tensor({512, 1024}, seed++), true);
    EXPECT_EQ(described(c).find(kOwnLoops), std::string::npos);
  }
  {  // A run-time B.
    Case c = small_case("MatMul", {});
    c.add(random_tensor({4, 8}, seed++), false);
    c.add(random_tensor({8, 4}, seed++), false);
    EXPECT_EQ(described(c).find(kOwnLoops), std::string::npos);
  }
  {  // Little work, but an image too large to copy padded (a 1x1 Conv of stride 4).
    Case c = small_case("Conv", {ints("strides", {4, 4})});
    c.add(random_tensor({1, 1, 1024, 1024}, seed++), false);
    c.add(random_tensor({1, 1, 1, 1}, seed++), true);
    EXPECT_EQ(described(c).find(kOwnLoops), std::string::npos);
  }
  {  // Groups.
    Case c = small_case("Conv", {int_attr("group", 2)});
    c.add(random_tensor({1, 4, 6, 6}, seed++), false);
    c.add(random_tensor({4, 2, 3, 3}, seed++), true);
    EXPECT_EQ(described(c).find(kOwnLoops), std::string::npos);
  }
  {  // A residual post-op.
    Case c = small_case("Conv", {});
    c.add(random_tensor({1, 4, 6, 6}, seed++), false);
    c.add(random_tensor({4, 4, 3, 3}, seed++), true);
    c.add(random_tensor({1, 4, 4, 4}, seed++), false);
    c.desc.post_ops = {{PostOpKind::AddResidual}};
    EXPECT_EQ(described(c).find(kOwnLoops), std::string::npos);
  }
}

// Without AVX-512 (kiln's loops off) a tiny softmax is left to the reference kernel too.
TEST(SmallOps, TinyElementwiseWorkIsLeftToTheReferenceKernel) {
  uint32_t seed = 1010;
  for (const std::string& op : std::vector<std::string>{"Relu", "Softmax", "Add"}) {
    SCOPED_TRACE(op);
    Case tiny = small_case(op, {});
    tiny.add(random_tensor({1, 65, 9}, seed++), false);
    if (op == "Add") tiny.add(random_tensor({1, 65, 9}, seed++), false);
    auto declined = tiny.create();
    if (op == "Softmax" && own_vector_loops()) {
      // Rows of little work run on kiln's row loops (no code generated) instead.
      ASSERT_TRUE(declined.ok()) << declined.status();
      EXPECT_EQ((*declined)->provider(), "kiln");
      EXPECT_NE((*declined)->describe().find("softmax"), std::string::npos);
    } else {
      ASSERT_FALSE(declined.ok());
      EXPECT_EQ(declined.status().code(), runtime::Error::NotSupported);
      EXPECT_NE(declined.status().message().find("little work"), std::string::npos)
          << declined.status();
    }
    Case large = small_case(op, {});
    large.add(random_tensor({1, 64, 56, 56}, seed++), false);
    if (op == "Add") large.add(random_tensor({1, 64, 56, 56}, seed++), false);
    EXPECT_TRUE(large.create().ok()) << "a large " << op << " stays on oneDNN";
  }
}

}  // namespace
}  // namespace kiln::engine::cpu
