// A few rows of A by a constant B in oneDNN's blocked layout (blocked_gemv.h). A block of 64
// columns is K' rows of 64 floats, stored in order, so a block is one sequential read: each of
// its rows gives four vectors, multiplied by A's value of that row for each of A's rows. For
// one row of A, two rows of B at a time keep eight chains of sums going (as many as two FMA
// units of 4-cycle latency need); the read of B from memory is the bound either way.

#include <kiln/engine/cpu/blocked_gemv.h>
#include <kiln/engine/cpu/loop_epilogue.h>

#include <omp.h>

#include <algorithm>
#include <cstring>

namespace kiln::engine::cpu::dnnl_impl {

namespace {

using vec::Floats;
using vec::kLanes;
using vec::load;

constexpr int64_t kBlock = 64;  // columns per block
constexpr int64_t kRowBlock = 16;

int64_t padded_rows(int64_t k) { return (k + kRowBlock - 1) / kRowBlock * kRowBlock; }

// Rows [0, R) of A by one block `b` (k rows of 64 floats) into columns [n0, n0 + 64) of C.
template <int R>
[[gnu::always_inline]] inline void block_rows(const float* a, int64_t lda, int64_t k_count,
                                              const float* b, int64_t n0, int64_t n_count, float* c,
                                              int64_t ldc, const Epilogue& e) {
  static_assert(R >= 1 && R <= 4);
  // Named sums, not arrays: GCC at -O2 keeps an array of vectors in memory. s<r><v>: row r of
  // A, vector v of the block; u<v>: row 0's second chain.
#define KILN_SUMS(r) Floats s##r##0 {}, s##r##1 {}, s##r##2 {}, s##r##3 {};
  KILN_SUMS(0)
  KILN_SUMS(1)
  KILN_SUMS(2) KILN_SUMS(3)
#undef KILN_SUMS
      Floats u0{},
      u1{}, u2{}, u3{};
  const float* a0 = a;
  [[maybe_unused]] const float* a1 = a + std::min(1, R - 1) * lda;
  [[maybe_unused]] const float* a2 = a + std::min(2, R - 1) * lda;
  [[maybe_unused]] const float* a3 = a + std::min(3, R - 1) * lda;
  int64_t k = 0;
  if constexpr (R == 1) {
    for (; k + 1 < k_count; k += 2) {
      const float* q = b + k * kBlock;
      const float x = a0[k], y = a0[k + 1];
      s00 += x * load(q), s01 += x * load(q + kLanes);
      s02 += x * load(q + 2 * kLanes), s03 += x * load(q + 3 * kLanes);
      u0 += y * load(q + kBlock), u1 += y * load(q + kBlock + kLanes);
      u2 += y * load(q + kBlock + 2 * kLanes), u3 += y * load(q + kBlock + 3 * kLanes);
    }
  }
  for (; k < k_count; ++k) {
    const float* q = b + k * kBlock;
    const Floats b0 = load(q), b1 = load(q + kLanes), b2 = load(q + 2 * kLanes),
                 b3 = load(q + 3 * kLanes);
#define KILN_FMA(r)                                                             \
  if constexpr (R > (r)) {                                                      \
    const float x = a##r[k];                                                    \
    s##r##0 += x * b0, s##r##1 += x * b1, s##r##2 += x * b2, s##r##3 += x * b3; \
  }
    KILN_FMA(0) KILN_FMA(1) KILN_FMA(2) KILN_FMA(3)
#undef KILN_FMA
  }
  s00 += u0, s01 += u1, s02 += u2, s03 += u3;
  // One vector of columns for every row: write_sums' order (rows of one 16-column group).
  const Floats v0[4] = {s00, s10, s20, s30};
  const Floats v1[4] = {s01, s11, s21, s31};
  const Floats v2[4] = {s02, s12, s22, s32};
  const Floats v3[4] = {s03, s13, s23, s33};
  const Floats* groups[4] = {v0, v1, v2, v3};
  for (int g = 0; g < 4 && n0 + g * kLanes < n_count; ++g) {
    write_sums(groups[g], R, 0, n0 + g * kLanes, n_count, c, ldc, e);
  }
}

// Blocks [first, last) of B, every row of A (m <= 4).
KILN_VECTOR_CLONES void gemv_blocks(const float* a, int64_t lda, int64_t m, int64_t k_count,
                                    const float* b, int64_t n_count, float* c, int64_t ldc,
                                    const Epilogue& e, int64_t first, int64_t last) {
  const int64_t block_floats = padded_rows(k_count) * kBlock;
  for (int64_t j = first; j < last; ++j) {
    const float* block = b + j * block_floats;
    const int64_t n0 = j * kBlock;
    switch (m) {
      case 1:
        block_rows<1>(a, lda, k_count, block, n0, n_count, c, ldc, e);
        break;
      case 2:
        block_rows<2>(a, lda, k_count, block, n0, n_count, c, ldc, e);
        break;
      case 3:
        block_rows<3>(a, lda, k_count, block, n0, n_count, c, ldc, e);
        break;
      default:
        block_rows<4>(a, lda, k_count, block, n0, n_count, c, ldc, e);
        break;
    }
  }
}

}  // namespace

dnnl::memory::desc blocked_b_md(int64_t k, int64_t n) {
  return dnnl::memory::desc({k, n}, dnnl::memory::data_type::f32,
                            dnnl::memory::format_tag::BA16a64b);
}

bool pack_blocked_b(const dnnl::memory::desc& source, const void* data,
                    const dnnl::memory::desc& target, void* to) {
  const dnnl::memory::dims dims = source.dims();
  if (dims.size() != 2 || dims[0] <= 0 || dims[1] <= 0 ||
      source.data_type() != dnnl::memory::data_type::f32 ||
      target != blocked_b_md(dims[0], dims[1])) {
    return false;
  }
  const dnnl_memory_desc_t& md = source.data;
  if (md.format_kind != dnnl_blocked || md.format_desc.blocking.inner_nblks != 0 ||
      md.offset0 != 0) {
    return false;
  }
  const int64_t k = dims[0], n = dims[1];
  const int64_t row_stride = md.format_desc.blocking.strides[0];
  const int64_t col_stride = md.format_desc.blocking.strides[1];
  const auto* b = static_cast<const float*>(data);
  auto* out = static_cast<float*>(to);
  std::memset(out, 0, target.get_size());
  const int64_t block_floats = padded_rows(k) * kBlock;
  for (int64_t j = 0; j * kBlock < n; ++j) {
    const int64_t n0 = j * kBlock, width = std::min(kBlock, n - n0);
    float* block = out + j * block_floats;
    if (col_stride == 1) {
      for (int64_t r = 0; r < k; ++r) {
        std::memcpy(block + r * kBlock, b + r * row_stride + n0,
                    sizeof(float) * static_cast<size_t>(width));
      }
      continue;
    }
    // B stored by columns (a Gemm's transB): each column read in order.
    for (int64_t c = 0; c < width; ++c) {
      const float* column = b + (n0 + c) * col_stride;
      for (int64_t r = 0; r < k; ++r) block[r * kBlock + c] = column[r * row_stride];
    }
  }
  return true;
}

void gemv_blocked(const float* a, int64_t lda, int64_t m, int64_t k, const float* b, int64_t n,
                  float* c, int64_t ldc, const Epilogue& e, int threads) {
  if (m <= 0 || n <= 0) return;
  const int64_t blocks = (n + kBlock - 1) / kBlock;
  const int parts = static_cast<int>(std::clamp<int64_t>(threads, 1, blocks));
  if (parts == 1) {
    gemv_blocks(a, lda, m, k, b, n, c, ldc, e, 0, blocks);
    return;
  }
#pragma omp parallel for num_threads(parts) schedule(static)
  for (int t = 0; t < parts; ++t) {
    gemv_blocks(a, lda, m, k, b, n, c, ldc, e, blocks * t / parts, blocks * (t + 1) / parts);
  }
}

}  // namespace kiln::engine::cpu::dnnl_impl
