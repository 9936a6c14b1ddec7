// B packed into blocks of columns for kiln's loops: 16-column panels (dnnl_common.h:
// small_ops.cpp, avx2_gemm.cpp) or oneDNN's blocked layout of 64 columns (blocked_gemv.h:
// blocked_gemm.cpp), with zeros past N. The shape-generic MatMul (runtime_matmul.cpp) packs
// each batch's B at every call (attention's products), where an element-by-element walk took a
// fifth of the product's time. B's rows in place are copied 16 columns at a time; B given
// transposed (its columns in place: attention's keys as stored) goes through 16 x 16 blocks
// transposed in registers on AVX-512.

#include <kiln/engine/cpu/avx512_transpose.h>
#include <kiln/engine/cpu/blocked_gemv.h>
#include <kiln/engine/cpu/cpu_op.h>
#include <kiln/engine/cpu/dnnl_common.h>
#include <kiln/engine/cpu/vector_math.h>

#include <algorithm>

namespace kiln::engine::cpu::dnnl_impl {

namespace {

using vec::kLanes;
constexpr int64_t kBlock = 64;  // columns of a block of oneDNN's blocked layout (BA16a64b)

int64_t padded_rows(int64_t k) { return (k + 15) / 16 * 16; }

// Rows [0, k) of B's columns [j0, j0 + width) (width <= ld), B's element (r, j) at
// b[r * row_stride + j], into rows of `ld` floats at `to`, zeros past `width`.
KILN_VECTOR_CLONES void block_from_rows(const float* b, int64_t row_stride, int64_t j0,
                                        int64_t width, int64_t k, float scale, int64_t ld,
                                        float* to) {
  const vec::Floats s = vec::splat(scale);
  for (int64_t r = 0; r < k; ++r) {
    const float* from = b + r * row_stride + j0;
    float* row = to + r * ld;
    int64_t j = 0;
    for (; j + kLanes <= width; j += kLanes) vec::store(row + j, s * vec::load(from + j));
    for (; j < ld; ++j) row[j] = j < width ? scale * from[j] : 0.0f;
  }
}

#ifdef KILN_HAS_AVX512_TRANSPOSE
// As `block_from_rows` with B's element (r, j) at b[r + j * col_stride] (B^T's rows in place):
// 16 of B^T's rows by 16 of its columns loaded (masked at the edges, zeros past them),
// transposed in registers and stored as 16 rows of 16 columns.
[[gnu::target("avx512f")]] void block_from_columns(const float* b, int64_t col_stride, int64_t j0,
                                                   int64_t width, int64_t k, float scale,
                                                   int64_t ld, float* to) {
  const __m512 s = _mm512_set1_ps(scale);
  for (int64_t g = 0; g < ld; g += kLanes) {
    const int64_t columns = std::clamp<int64_t>(width - g, 0, kLanes);
    for (int64_t r0 = 0; r0 < k; r0 += kLanes) {
      const int64_t depth = std::min(kLanes, k - r0);
      const __mmask16 mask = static_cast<__mmask16>((1u << depth) - 1u);
      __m512 block[16];
      for (int64_t i = 0; i < kLanes; ++i) {
        block[i] = i < columns ? _mm512_maskz_loadu_ps(mask, b + (j0 + g + i) * col_stride + r0)
                               : _mm512_setzero_ps();
      }
      transpose16_avx512(block);
      for (int64_t q = 0; q < depth; ++q) {
        _mm512_storeu_ps(to + (r0 + q) * ld + g, _mm512_mul_ps(s, block[q]));
      }
    }
  }
}
#endif

// B [K, N] (element (r, j) at b[r * row_stride + j * col_stride]) times `scale`, in blocks of
// `ld` columns, `block_floats` apart, each K rows of `ld` floats.
void pack_blocks(const float* b, int64_t row_stride, int64_t col_stride, int64_t k, int64_t n,
                 float scale, int64_t ld, int64_t block_floats, float* to) {
  for (int64_t j0 = 0; j0 < n; j0 += ld) {
    const int64_t width = std::min(ld, n - j0);
    float* block = to + (j0 / ld) * block_floats;
    if (col_stride == 1) {
      block_from_rows(b, row_stride, j0, width, k, scale, ld, block);
      continue;
    }
#ifdef KILN_HAS_AVX512_TRANSPOSE
    if (row_stride == 1 && avx512_own_runtime_gemm()) {  // (tests turn it off)
      block_from_columns(b, col_stride, j0, width, k, scale, ld, block);
      continue;
    }
#endif
    for (int64_t r = 0; r < k; ++r) {
      float* row = block + r * ld;
      for (int64_t j = 0; j < ld; ++j) {
        row[j] = j < width ? scale * b[r * row_stride + (j0 + j) * col_stride] : 0.0f;
      }
    }
  }
}

}  // namespace

size_t panel_floats(int64_t k, int64_t n) {
  return static_cast<size_t>((n + kLanes - 1) / kLanes * k * kLanes);
}

void pack_panels(const float* b, int64_t row_stride, int64_t col_stride, int64_t k, int64_t n,
                 float scale, float* to) {
  pack_blocks(b, row_stride, col_stride, k, n, scale, kLanes, k * kLanes, to);
}

size_t blocked_floats(int64_t k, int64_t n) {
  return static_cast<size_t>((n + kBlock - 1) / kBlock * padded_rows(k) * kBlock);
}

void pack_blocked(const float* b, int64_t row_stride, int64_t col_stride, int64_t k, int64_t n,
                  float scale, float* to) {
  pack_blocks(b, row_stride, col_stride, k, n, scale, kBlock, padded_rows(k) * kBlock, to);
}

}  // namespace kiln::engine::cpu::dnnl_impl
