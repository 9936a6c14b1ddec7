// kiln's MatMul loops (avx2_gemm.cpp, blocked_gemm.cpp) against the reference kernels on seeded
// random data: tiles of every height at the rows' end, panels cut at N's end, blocks of K after the
// first, the threads' splits by columns and by rows, biases, every post-op and a residual; and
// where kernel selection takes them (AVX2's tiles on a CPU without AVX-512, AVX-512's with it).

#include <kiln/engine/cpu/avx2_gemm.h>
#include <kiln/engine/cpu/blocked_gemv.h>
#include <kiln/engine/cpu/dnnl_common.h>
#include <kiln/engine/cpu/loop_epilogue.h>
#include <kiln/engine/cpu/test/op_case.h>
#include <kiln/kernels/kernels.h>

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include <string>
#include <vector>

namespace kiln::engine::cpu {
namespace {

using namespace test_support;  // NOLINT(google-build-using-namespace): test helpers

// Kernel selection as on an AVX2 CPU, restored to the binary's forced choice afterwards.
struct AsOnAvx2 {
  AsOnAvx2() { set_avx512_for_testing(false); }
  ~AsOnAvx2() { set_avx512_for_testing(true); }
};

constexpr const char* kAvx2 = "kiln AVX2 MatMul";

// MatMul [rows, k] x [k, n] (+ bias) with `post_ops`; a first AddResidual adds a residual input.
Case matmul_case(int64_t rows, int64_t k, int64_t n, bool bias, const std::vector<PostOp>& post_ops,
                 int threads, uint32_t& seed, OwnedTensor& expected) {
  Case c("MatMul", {});
  c.desc.small_ops_own_loops = true;
  c.desc.num_threads = threads;
  c.add(random_tensor({rows, k}, seed++), false);
  c.add(random_tensor({k, n}, seed++, -0.2, 0.2), true);
  if (bias) c.add(random_tensor({n}, seed++), true);
  expected = zeros({rows, n});
  EXPECT_TRUE(kernels::matmul(c.at(0), c.at(1), expected.tensor()).ok());
  float* y = expected.tensor().mutable_data_ptr<float>();
  if (bias) {
    for (int64_t i = 0; i < rows * n; ++i) y[i] += c.at(2).data_ptr<float>()[i % n];
  }
  std::vector<const runtime::Tensor*> residuals;
  if (!post_ops.empty() && post_ops.front().kind == PostOpKind::AddResidual) {
    c.add(random_tensor({rows, n}, seed++), false);
    residuals.push_back(&c.inputs.back()->tensor());
  }
  apply_post_ops(post_ops, residuals, expected);
  c.desc.post_ops = post_ops;
  return c;
}

struct Shape {
  int64_t rows, k, n;
};

// The loops' post-op sets: none, each activation kind (Gelu's two forms), a residual alone
// and before a Clip, and a Linear after a Sigmoid.
std::vector<std::vector<PostOp>> every_post_op_set() {
  return {{},
          {{PostOpKind::Relu}},
          {{PostOpKind::Gelu}},
          {{PostOpKind::Gelu, 1.0f}},
          {{PostOpKind::AddResidual}},
          {{PostOpKind::AddResidual}, {PostOpKind::Clip, -0.5f, 0.5f}},
          {{PostOpKind::Sigmoid}, {PostOpKind::Linear, 2.0f, 0.5f}},
          {{PostOpKind::Tanh}},
          {{PostOpKind::Swish}}};
}

// Calls `check(case, expected, shape)` for every shape, 1-3 threads and every post-op set, a
// bias on every other one, seeds from `seed`.
template <typename Check>
void for_each_case(const std::vector<Shape>& shapes,
                   const std::vector<std::vector<PostOp>>& post_op_sets, uint32_t seed,
                   Check check) {
  for (const Shape& s : shapes) {
    for (int threads : {1, 2, 3}) {
      for (size_t p = 0; p < post_op_sets.size(); ++p) {
        const bool bias = (p + static_cast<size_t>(threads)) % 2 == 0;
        SCOPED_TRACE(std::to_string(s.rows) + " x " + std::to_string(s.k) + " x " +
                     std::to_string(s.n) + (bias ? " bias" : "") + post_ops_name(post_op_sets[p]) +
                     " threads " + std::to_string(threads));
        OwnedTensor expected = zeros({0});
        Case c = matmul_case(s.rows, s.k, s.n, bias, post_op_sets[p], threads, seed, expected);
        check(c, expected, s);
      }
    }
  }
}

TEST(Avx2Gemm, MatchesReferenceOverShapesThreadsBiasAndPostOps) {
  if (!dnnl_impl::cpu_has_avx2_fma()) GTEST_SKIP() << "the CPU lacks AVX2 or FMA";
  AsOnAvx2 avx2;
  // Rows: a decoder's 1-4, every tile height at the end, a chunk of 96 and past it; K: one
  // block, a block and one, several; N: under a panel, a panel, a panel and one, many.
  const std::vector<Shape> shapes = {{1, 300, 40},  {3, 513, 17},  {4, 64, 512},   {5, 1, 1},
                                     {6, 7, 16},    {7, 256, 17},  {11, 257, 33},  {13, 600, 15},
                                     {96, 64, 100}, {97, 300, 48}, {200, 513, 70}, {128, 40, 700}};
  const std::vector<std::vector<PostOp>> post_op_sets = every_post_op_set();
  for_each_case(shapes, post_op_sets, 9400, [](Case& c, const OwnedTensor& expected, const Shape&) {
    expect_near(c.run(), expected);
    EXPECT_NE(c.description.find(kAvx2), std::string::npos) << c.description;
  });
}

// B [k, n] in oneDNN's blocked layout (`blocked_b_md`), packed by oneDNN's own reorder.
// `source` (B [k, n] in that layout) in oneDNN's blocked layout, by oneDNN's reorder; the
// bytes are filled with NaN first, so that padding it left unwritten would show.
std::vector<float> oneDNN_blocked(const dnnl::memory::desc& source, const float* b) {
  const dnnl::memory::dims dims = source.dims();
  const dnnl::memory::desc target = dnnl_impl::blocked_b_md(dims[0], dims[1]);
  std::vector<float> blocked(target.get_size() / sizeof(float), std::nanf(""));
  dnnl::memory from = dnnl_impl::wrap(source, b);
  dnnl::memory to(target, dnnl_impl::cpu_engine(), blocked.data());
  dnnl::reorder(from, to).execute(dnnl_impl::cpu_stream(), from, to);
  dnnl_impl::cpu_stream().wait();
  return blocked;
}

std::vector<float> oneDNN_blocked(const float* b, int64_t k, int64_t n) {
  return oneDNN_blocked(dnnl_impl::plain_md(std::vector<int64_t>{k, n}), b);
}

// kiln's packing into oneDNN's blocked layout writes the bytes oneDNN's reorder writes (the two
// share a packing's key), from B stored by rows and by columns (a Gemm's transB), K and N cut
// anywhere in their blocks; other layouts are left to the reorder.
TEST(Avx2Gemm, PackingIntoOneDnnsBlockedLayoutMatchesItsReorder) {
  uint32_t seed = 9600;
  for (const auto& [k, n] : std::vector<std::pair<int64_t, int64_t>>{
           {1, 1}, {16, 64}, {17, 63}, {33, 130}, {300, 700}}) {
    for (bool by_columns : {false, true}) {
      SCOPED_TRACE(std::to_string(k) + " x " + std::to_string(n) + (by_columns ? " transB" : ""));
      OwnedTensor b = random_tensor({k, n}, seed++);
      const dnnl::memory::desc source(
          {k, n}, dnnl::memory::data_type::f32,
          by_columns ? dnnl::memory::dims{1, k} : dnnl::memory::dims{n, 1});
      const float* data = b.tensor().data_ptr<float>();
      const std::vector<float> expected = oneDNN_blocked(source, data);
      std::vector<float> got(expected.size(), -1.0f);
      ASSERT_TRUE(
          dnnl_impl::pack_blocked_b(source, data, dnnl_impl::blocked_b_md(k, n), got.data()));
      ASSERT_EQ(std::memcmp(got.data(), expected.data(), sizeof(float) * got.size()), 0);
    }
  }
  std::vector<float> b(64 * 64, 1.0f), to(64 * 64, -1.0f);
  const dnnl::memory::desc plain = dnnl_impl::plain_md(std::vector<int64_t>{64, 64});
  EXPECT_FALSE(dnnl_impl::pack_blocked_b(plain, b.data(), plain, to.data()));
  EXPECT_FALSE(dnnl_impl::pack_blocked_b(dnnl_impl::plain_md(std::vector<int64_t>{1, 64, 64}),
                                         b.data(), dnnl_impl::blocked_b_md(64, 64), to.data()));
  EXPECT_EQ(to[0], -1.0f);  // nothing written
}

// kiln's AVX-512 MatMul (avx512_gemm), called directly on B's panels, and on oneDNN's blocked
// layout (avx512_gemm_blocked): tiles of every height to 12, pairs of panels and a last single
// or cut one, blocks of K after the first, the threads' splits, biases, post-ops and a
// residual, against the reference. The last two B are over 2 MiB, where the first tile of each
// pair prefetches the next pair's block (one ends on a single panel, the other on a cut one).
TEST(Avx2Gemm, Avx512TilesMatchReference) {
  if (!dnnl_impl::cpu_has_avx512f()) GTEST_SKIP() << "the CPU lacks AVX-512";
  const std::vector<Shape> shapes = {
      {1, 300, 40},   {3, 257, 17},    {12, 64, 512},  {13, 1, 1},    {11, 7, 48},
      {24, 256, 33},  {25, 513, 64},   {96, 64, 100},  {97, 300, 80}, {200, 600, 70},
      {128, 40, 700}, {25, 600, 1040}, {30, 512, 1050}};
  const std::vector<std::vector<PostOp>> post_op_sets = {
      {},
      {{PostOpKind::Relu}},
      {{PostOpKind::Gelu}},
      {{PostOpKind::AddResidual}},
      {{PostOpKind::AddResidual}, {PostOpKind::Clip, -0.5f, 0.5f}}};
  for (bool blocked : {false, true}) {
    SCOPED_TRACE(blocked ? "oneDNN's blocked layout" : "kiln's panels");
    for_each_case(
        shapes, post_op_sets, 9700, [&](Case& c, const OwnedTensor& expected, const Shape& s) {
          const float* b = c.at(1).data_ptr<float>();
          std::vector<float> panels;
          if (blocked) {
            panels = oneDNN_blocked(b, s.k, s.n);
          } else {
            panels.resize(dnnl_impl::panel_floats(s.k, s.n));
            dnnl_impl::pack_panels(b, s.n, 1, s.k, s.n, 1.0f, panels.data());
          }
          dnnl_impl::Epilogue e;
          e.col_bias =
              c.inputs.size() > 2 && c.constant_flags[2] ? c.at(2).data_ptr<float>() : nullptr;
          e.ops = c.desc.post_ops.data();
          e.num_ops = c.desc.post_ops.size();
          if (!c.desc.post_ops.empty() && c.desc.post_ops[0].kind == PostOpKind::AddResidual) {
            e.residual = c.inputs.back()->tensor().data_ptr<float>();
          }
          OwnedTensor out = zeros({s.rows, s.n});
          float* y = out.tensor().mutable_data_ptr<float>();
          const float* a = c.at(0).data_ptr<float>();
          if (blocked) {
            dnnl_impl::avx512_gemm_blocked(a, s.k, s.rows, s.k, panels.data(), s.n, y, s.n, e,
                                           c.desc.num_threads);
          } else {
            dnnl_impl::avx512_gemm(a, s.k, s.rows, s.k, panels.data(), s.n, y, s.n, e,
                                   c.desc.num_threads);
          }
          expect_near(out, expected);
        });
  }
}

// B read in place with row strides wider than N (a column slice of a larger matrix), C too:
// every row count up to kSmallRows, K odd and even, N cut anywhere in its 64-column chunks.
TEST(Avx2Gemm, Avx512SmallRowsMatchReference) {
  if (!dnnl_impl::cpu_has_avx512f()) GTEST_SKIP() << "the CPU lacks AVX-512";
  uint32_t seed = 9900;
  for (int64_t m = 1; m <= dnnl_impl::kSmallRows; ++m) {
    for (int64_t k : {1, 2, 3, 32, 129}) {
      for (int64_t n : {1, 15, 16, 17, 32, 64, 65, 129}) {
        SCOPED_TRACE("m " + std::to_string(m) + ", k " + std::to_string(k) + ", n " +
                     std::to_string(n));
        const int64_t ldb = n + 3, ldc = n + 5;
        OwnedTensor a = random_tensor({m, k}, seed++);
        OwnedTensor wide_b = random_tensor({k, ldb}, seed++);
        OwnedTensor b = zeros({k, n});
        for (int64_t p = 0; p < k; ++p) {
          for (int64_t j = 0; j < n; ++j) {
            b.tensor().mutable_data_ptr<float>()[p * n + j] =
                wide_b.tensor().data_ptr<float>()[p * ldb + j];
          }
        }
        OwnedTensor expected = zeros({m, n});
        ASSERT_TRUE(kernels::matmul(a.tensor(), b.tensor(), expected.tensor()).ok());
        std::vector<float> c(static_cast<size_t>(m * ldc), -7.0f);
        dnnl_impl::avx512_small_rows(a.tensor().data_ptr<float>(), k, m, k,
                                     wide_b.tensor().data_ptr<float>(), ldb, n, c.data(), ldc);
        OwnedTensor got = zeros({m, n});
        for (int64_t r = 0; r < m; ++r) {
          for (int64_t j = 0; j < ldc; ++j) {
            const float value = c[static_cast<size_t>(r * ldc + j)];
            if (j < n) {
              got.tensor().mutable_data_ptr<float>()[r * n + j] = value;
            } else {
              EXPECT_EQ(value, -7.0f) << "row " << r << ", column " << j << " written";
            }
          }
        }
        expect_near(got, expected);
      }
    }
  }
}

TEST(Avx2Gemm, GemmsWithTransBAlphaAndBeta) {
  if (!dnnl_impl::cpu_has_avx2_fma()) GTEST_SKIP() << "the CPU lacks AVX2 or FMA";
  AsOnAvx2 avx2;
  uint32_t seed = 9500;
  for (bool trans_b : {false, true}) {
    SCOPED_TRACE(trans_b ? "transB" : "B");
    kernels::GemmOptions options;
    options.alpha = 0.5;
    options.beta = 2.0;
    options.trans_b = trans_b;
    Case c("Gemm", {int_attr("transB", trans_b ? 1 : 0), float_attr("alpha", 0.5),
                    float_attr("beta", 2.0)});
    c.desc.small_ops_own_loops = true;
    c.desc.num_threads = 2;
    c.add(random_tensor({40, 300}, seed++), false);
    c.add(random_tensor(trans_b ? std::vector<int64_t>{90, 300} : std::vector<int64_t>{300, 90},
                        seed++, -0.2, 0.2),
          true);
    c.add(random_tensor({90}, seed++), true);
    OwnedTensor expected = zeros({40, 90});
    ASSERT_TRUE(kernels::gemm(c.at(0), c.at(1), &c.at(2), expected.tensor(), options).ok());
    expect_near(c.run(), expected);
    EXPECT_NE(c.description.find(kAvx2), std::string::npos) << c.description;
  }
}

constexpr const char* kAvx512 = "kiln AVX-512 MatMul";

// On AVX-512, a MatMul or Gemm by a constant B past the small loops' work runs on kiln's tiles
// over oneDNN's blocked layout (create_avx512_matmul), generating no code: every tile height and
// a column block cut at N's end, the threads' splits, biases, every post-op and a residual.
TEST(Avx2Gemm, Avx512MatMulOpsMatchReference) {
  if (!avx512_own_runtime_gemm()) GTEST_SKIP() << "the CPU lacks AVX-512";
  const std::vector<Shape> shapes = {{5, 300, 200}, {7, 257, 170},  {24, 256, 64},  {25, 513, 65},
                                     {97, 300, 80}, {128, 40, 700}, {30, 512, 1050}};
  for_each_case(shapes, every_post_op_set(), 9800,
                [](Case& c, const OwnedTensor& expected, const Shape&) {
                  expect_near(c.run(), expected);
                  EXPECT_NE(c.description.find(kAvx512), std::string::npos) << c.description;
                });
  // A Gemm by B given transposed, beta scaling its bias, on the same tiles; alpha other than 1
  // on oneDNN's kernels (the tiles scale nothing).
  uint32_t seed = 9900;
  for (double alpha : {1.0, 0.5}) {
    SCOPED_TRACE("alpha " + std::to_string(alpha));
    kernels::GemmOptions options;
    options.alpha = static_cast<float>(alpha);
    options.beta = 2.0;
    options.trans_b = true;
    Case c("Gemm", {int_attr("transB", 1), float_attr("alpha", alpha), float_attr("beta", 2.0)});
    c.desc.small_ops_own_loops = true;
    c.desc.num_threads = 2;
    c.add(random_tensor({40, 300}, seed++), false);
    c.add(random_tensor({90, 300}, seed++, -0.2, 0.2), true);
    c.add(random_tensor({90}, seed++), true);
    OwnedTensor expected = zeros({40, 90});
    ASSERT_TRUE(kernels::gemm(c.at(0), c.at(1), &c.at(2), expected.tensor(), options).ok());
    expect_near(c.run(), expected);
    EXPECT_EQ(c.description.find(kAvx512) != std::string::npos, alpha == 1.0) << c.description;
  }
}

// Batched A ([2, 3, K]: six rows at once) and a decoder's single row run here too; a B computed
// at run time, transA, and oneDNN asked for explicitly stay on oneDNN; with AVX-512, oneDNN.
TEST(Avx2Gemm, KernelSelection) {
  if (!dnnl_impl::cpu_has_avx2_fma()) GTEST_SKIP() << "the CPU lacks AVX2 or FMA";
  uint32_t seed = 9600;
  auto provider = [](Case& c) {
    auto op = c.create();
    EXPECT_TRUE(op.ok()) << op.status();
    return op.ok() ? (*op)->describe() : std::string();
  };
  {
    AsOnAvx2 avx2;
    Case batched("MatMul", {});
    batched.desc.small_ops_own_loops = true;
    batched.add(random_tensor({2, 3, 64}, seed++), false);
    batched.add(random_tensor({64, 40}, seed++), true);
    OwnedTensor expected = zeros({2, 3, 40});
    ASSERT_TRUE(kernels::matmul(batched.at(0), batched.at(1), expected.tensor()).ok());
    expect_near(batched.run(), expected);
    EXPECT_NE(batched.description.find(kAvx2), std::string::npos) << batched.description;

    OwnedTensor one_expected = zeros({0});
    Case one_row = matmul_case(1, 512, 1536, true, {}, 1, seed, one_expected);
    one_row.desc.small_ops_own_loops = true;
    expect_near(one_row.run(), one_expected);
    EXPECT_NE(one_row.description.find(kAvx2), std::string::npos) << one_row.description;

    OwnedTensor unused = zeros({0});
    Case asked = matmul_case(64, 64, 64, false, {}, 1, seed, unused);
    asked.desc.small_ops_own_loops = false;
    EXPECT_EQ(provider(asked).find(kAvx2), std::string::npos);
    Case computed("MatMul", {});
    computed.desc.small_ops_own_loops = true;
    computed.add(random_tensor({64, 32}, seed++), false);
    computed.add(random_tensor({32, 48}, seed++), false);
    EXPECT_EQ(provider(computed).find(kAvx2), std::string::npos);
    Case trans_a("Gemm", {int_attr("transA", 1)});
    trans_a.desc.small_ops_own_loops = true;
    trans_a.add(random_tensor({32, 64}, seed++), false);
    trans_a.add(random_tensor({32, 48}, seed++), true);
    EXPECT_EQ(provider(trans_a).find(kAvx2), std::string::npos);
  }
  Case large = [&] {
    OwnedTensor unused = zeros({0});
    return matmul_case(128, 512, 512, true, {}, 1, seed, unused);
  }();
  EXPECT_EQ(provider(large).find(kAvx2), std::string::npos);  // as on AVX-512 (the binary's)
  if (avx512_own_runtime_gemm()) {
    EXPECT_NE(provider(large).find(kAvx512), std::string::npos);
    // Asked for oneDNN's kernels, and a B computed at run time: oneDNN's.
    large.desc.small_ops_own_loops = false;
    EXPECT_EQ(provider(large).find("kiln"), std::string::npos);
    Case computed("MatMul", {});
    computed.desc.small_ops_own_loops = true;
    computed.add(random_tensor({128, 512}, seed++), false);
    computed.add(random_tensor({512, 64}, seed++), false);
    EXPECT_EQ(provider(computed).find("kiln"), std::string::npos);
  }
}

}  // namespace
}  // namespace kiln::engine::cpu
