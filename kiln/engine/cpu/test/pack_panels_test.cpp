// The packings of B for kiln's loops (pack_panels.cpp) against an element-by-element walk of
// their layouts: 16-column panels and oneDNN's blocked layout of 64 columns, B's rows in place
// and B given transposed (AVX-512's 16 x 16 register transposes, and the plain loops), K and N
// with and without tails, a scale.

#include <kiln/engine/cpu/avx2_gemm.h>
#include <kiln/engine/cpu/blocked_gemv.h>
#include <kiln/engine/cpu/cpu_op.h>
#include <kiln/engine/cpu/dnnl_common.h>

#include <gtest/gtest.h>

#include <random>
#include <vector>

namespace kiln::engine::cpu::dnnl_impl {
namespace {

// Element (r, j) of B [k, n] in blocks of `width` columns, `rows` rows a block (K padded).
std::vector<float> walk(const std::vector<float>& b, bool transposed, int64_t k, int64_t n,
                        float scale, int64_t width, int64_t rows, float fill) {
  const int64_t blocks = (n + width - 1) / width;
  std::vector<float> out(static_cast<size_t>(blocks * rows * width), fill);
  for (int64_t j = 0; j < blocks * width; ++j) {
    for (int64_t r = 0; r < k; ++r) {
      const float v = j < n ? scale * b[transposed ? j * k + r : r * n + j] : 0.0f;
      out[(j / width) * rows * width + r * width + j % width] = v;
    }
  }
  return out;
}

TEST(PackPanels, PanelsAndBlocksMatchAnElementWalk) {
  std::mt19937 generator(7);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  for (bool avx512 : {true, false}) {
    set_avx512_for_testing(avx512);
    for (const auto& [k, n] : std::vector<std::pair<int64_t, int64_t>>{
             {1, 1}, {16, 16}, {32, 128}, {17, 33}, {45, 64}, {3, 130}, {128, 32}}) {
      std::vector<float> b(static_cast<size_t>(k * n));
      for (float& v : b) v = d(generator);
      for (bool transposed : {false, true}) {
        SCOPED_TRACE(std::to_string(k) + " x " + std::to_string(n) +
                     (transposed ? " transposed" : "") + (avx512 ? "" : " (AVX-512 off)"));
        const int64_t row_stride = transposed ? 1 : n, col_stride = transposed ? k : 1;
        std::vector<float> panels(panel_floats(k, n), -7.0f);
        pack_panels(b.data(), row_stride, col_stride, k, n, 0.5f, panels.data());
        EXPECT_EQ(panels, walk(b, transposed, k, n, 0.5f, 16, k, 0.0f));
        // The blocked layout's padding rows of K are left as they were.
        std::vector<float> blocked(blocked_floats(k, n), -7.0f);
        pack_blocked(b.data(), row_stride, col_stride, k, n, 2.0f, blocked.data());
        EXPECT_EQ(blocked, walk(b, transposed, k, n, 2.0f, 64, (k + 15) / 16 * 16, -7.0f));
      }
    }
  }
  set_avx512_for_testing(std::nullopt);
}

}  // namespace
}  // namespace kiln::engine::cpu::dnnl_impl
