// A x B with B in oneDNN's blocked layout (BA16a64b), on AVX-512: the packing oneDNN's blocked
// matmul and `gemv_blocked` read, so that a shape-generic plan's MatMuls share one copy of a
// weight with the model's per-shape plans. A block of 64 columns is K' rows of 64 floats, so a
// tile of 6 rows by the block's four vectors (24 vectors of sums, four of B and a broadcast of
// A: 29 of the 32 zmm registers) reads each row of B whole. Over K in steps of kDepth (512),
// a block's 128 KiB stay in L2 while every tile of the chunk's rows passes, and a tile's sums
// stay in registers over the whole step. Steps of 128 (the block in L1) ran GPT-large's layers
// at 0.90-0.96 x oneDNN's blocked matmul, 512 at 0.95-1.0 (`kiln_cpu_bench
// --benchmark_filter=BM_DnnlMatMul/.*/[02]/`, the two in one process).
// Sums start from the column bias (and a residual added first); those of a step after the first
// are added to the ones stored, and the other post-ops are applied after the last.

#include <kiln/engine/cpu/blocked_gemv.h>
#include <kiln/engine/cpu/loop_epilogue.h>

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cstring>

namespace kiln::engine::cpu::dnnl_impl {

namespace {

constexpr int64_t kBlock = 64;       // columns per block
constexpr int64_t kLanes = 16;       // floats per vector
constexpr int kRows = 6;             // rows per tile
constexpr int64_t kDepth = 512;      // K per step
constexpr int64_t kChunkRows = 96;   // rows per chunk (a multiple of kRows), unless
constexpr int64_t kOneChunk = 192;   // rows a thread has fit one chunk
constexpr int64_t kMinColumns = 64;  // a thread's fewest columns before rows are split too
// From this size of B up (more than a core's L2), a chunk's first tile of a block prefetches
// the next block's rows of this step.
constexpr int64_t kPrefetchBytes = int64_t{2} << 20;

int64_t padded_rows(int64_t k) { return (k + 15) / 16 * 16; }

#define KILN_BLOCK_ROWS(X) X(0) X(1) X(2) X(3) X(4) X(5)

// The sums a tile starts from at `at`: added to `sum` (the first step's residual) or taken as
// they are (a later step's stored sums).
[[gnu::target("avx512f")]] inline __m512 take(__m512 sum, const float* at, bool add) {
  const __m512 x = _mm512_loadu_ps(at);
  return add ? _mm512_add_ps(sum, x) : x;
}

// Rows [0, R) of a tile: C (row stride ldc) = (first ? `init` [64] + `res` (row stride ldc, when
// not null) : C) + A [R, kc] x the block's rows `b` [kc, 64]. kPrefetch: the rows of `next` (the
// next block's) are prefetched, one per row of `b`.
template <int R, bool kPrefetch>
[[gnu::target("avx512f")]] inline void tile(const float* a, int64_t lda, const float* b, int64_t kc,
                                            float* c, int64_t ldc, bool first, const float* init,
                                            const float* res, const float* next) {
  static_assert(R >= 1 && R <= kRows);
  const __m512 i0 = _mm512_loadu_ps(init), i1 = _mm512_loadu_ps(init + kLanes),
               i2 = _mm512_loadu_ps(init + 2 * kLanes), i3 = _mm512_loadu_ps(init + 3 * kLanes);
#define KILN_DECLARE(r)                                                           \
  [[maybe_unused]] __m512 s##r##0 = i0, s##r##1 = i1, s##r##2 = i2, s##r##3 = i3; \
  [[maybe_unused]] const float* a##r = a + std::min<int64_t>((r), R - 1) * lda;
  KILN_BLOCK_ROWS(KILN_DECLARE)
#undef KILN_DECLARE
  // A later step starts from the sums stored; the first, from `init` plus the residual when
  // there is one.
  const float* from = first ? res : c;
  if (from != nullptr) {
#define KILN_FROM(r)                                                                   \
  if constexpr (R > (r)) {                                                             \
    const float* row = from + (r)*ldc;                                                 \
    s##r##0 = take(s##r##0, row, first), s##r##1 = take(s##r##1, row + kLanes, first); \
    s##r##2 = take(s##r##2, row + 2 * kLanes, first),                                  \
    s##r##3 = take(s##r##3, row + 3 * kLanes, first);                                  \
  }
    KILN_BLOCK_ROWS(KILN_FROM)
#undef KILN_FROM
  }
  for (int64_t k = 0; k < kc; ++k) {
    const float* q = b + k * kBlock;
    const __m512 b0 = _mm512_loadu_ps(q), b1 = _mm512_loadu_ps(q + kLanes),
                 b2 = _mm512_loadu_ps(q + 2 * kLanes), b3 = _mm512_loadu_ps(q + 3 * kLanes);
    if constexpr (kPrefetch) {
      const char* ahead = reinterpret_cast<const char*>(next + k * kBlock);
      _mm_prefetch(ahead, _MM_HINT_T1);
      _mm_prefetch(ahead + 64, _MM_HINT_T1);
      _mm_prefetch(ahead + 128, _MM_HINT_T1);
      _mm_prefetch(ahead + 192, _MM_HINT_T1);
    }
#define KILN_FMA(r)                            \
  if constexpr (R > (r)) {                     \
    const __m512 x = _mm512_set1_ps(a##r[k]);  \
    s##r##0 = _mm512_fmadd_ps(x, b0, s##r##0); \
    s##r##1 = _mm512_fmadd_ps(x, b1, s##r##1); \
    s##r##2 = _mm512_fmadd_ps(x, b2, s##r##2); \
    s##r##3 = _mm512_fmadd_ps(x, b3, s##r##3); \
  }
    KILN_BLOCK_ROWS(KILN_FMA)
#undef KILN_FMA
  }
#define KILN_STORE(r)                            \
  if constexpr (R > (r)) {                       \
    float* row = c + (r)*ldc;                    \
    _mm512_storeu_ps(row, s##r##0);              \
    _mm512_storeu_ps(row + kLanes, s##r##1);     \
    _mm512_storeu_ps(row + 2 * kLanes, s##r##2); \
    _mm512_storeu_ps(row + 3 * kLanes, s##r##3); \
  }
  KILN_BLOCK_ROWS(KILN_STORE)
#undef KILN_STORE
}

template <bool kPrefetch>
[[gnu::target("avx512f")]] void tile_rows(int rows, const float* a, int64_t lda, const float* b,
                                          int64_t kc, float* c, int64_t ldc, bool first,
                                          const float* init, const float* res, const float* next) {
  switch (rows) {
#define KILN_CASE(r) \
  case (r) + 1:      \
    return tile<(r) + 1, kPrefetch>(a, lda, b, kc, c, ldc, first, init, res, next);
    KILN_BLOCK_ROWS(KILN_CASE)
#undef KILN_CASE
    default:
      return;
  }
}

// Rows [m_begin, m_end) and blocks [j_begin, j_end) of C.
[[gnu::target("avx512f")]] void gemm_part(const float* a, int64_t lda, int64_t m_begin,
                                          int64_t m_end, int64_t k_count, const float* blocked,
                                          int64_t j_begin, int64_t j_end, int64_t n_count, float* c,
                                          int64_t ldc, const Epilogue& e) {
  alignas(64) float edge[kRows * kBlock];
  const int64_t block_floats = padded_rows(k_count) * kBlock;
  const EpilogueSplit split = split_epilogue(e);
  const bool prefetch = k_count * n_count * static_cast<int64_t>(sizeof(float)) >= kPrefetchBytes;
  for (int64_t k0 = 0; k0 < k_count; k0 += kDepth) {
    const int64_t kc = std::min(kDepth, k_count - k0);
    const bool first = k0 == 0, last = k0 + kc == k_count;
    const int64_t chunk = m_end - m_begin <= kOneChunk ? m_end - m_begin : kChunkRows;
    for (int64_t mc = m_begin; mc < m_end; mc += chunk) {
      const int64_t mc_end = std::min(mc + chunk, m_end);
      for (int64_t j = j_begin; j < j_end; ++j) {
        const float* b = blocked + j * block_floats + k0 * kBlock;
        const float* next = prefetch && j + 1 < j_end ? b + block_floats : nullptr;
        const int64_t n0 = j * kBlock;
        const int64_t width = std::min(kBlock, n_count - n0);
        alignas(64) float bias[kBlock] = {};
        if (e.col_bias != nullptr) {
          std::memcpy(bias, e.col_bias + n0, sizeof(float) * static_cast<size_t>(width));
        }
        for (int64_t m = mc; m < mc_end; m += kRows) {
          const int rows = static_cast<int>(std::min<int64_t>(kRows, mc_end - m));
          const float* a_block = a + m * lda + k0;
          const float* ahead = m == mc ? next : nullptr;
          float* out = c + m * ldc + n0;
          if (width == kBlock) {
            const float* res = split.residual_first ? e.residual + m * ldc + n0 : nullptr;
            if (ahead != nullptr) {
              tile_rows<true>(rows, a_block, lda, b, kc, out, ldc, first, bias, res, ahead);
            } else {
              tile_rows<false>(rows, a_block, lda, b, kc, out, ldc, first, bias, res, nullptr);
            }
            if (last && split.finish) finish_sums(out, ldc, rows, kBlock, m, n0, ldc, split.rest);
            continue;
          }
          // The last block's columns past N: sums in `edge`, then only the columns there are.
          const size_t bytes = sizeof(float) * static_cast<size_t>(width);
          if (!first) {
            for (int r = 0; r < rows; ++r) std::memcpy(edge + r * kBlock, out + r * ldc, bytes);
          }
          tile_rows<false>(rows, a_block, lda, b, kc, edge, kBlock, first, bias, nullptr, nullptr);
          if (last && split.finish_all) finish_sums(edge, kBlock, rows, width, m, n0, ldc, e);
          for (int r = 0; r < rows; ++r) std::memcpy(out + r * ldc, edge + r * kBlock, bytes);
        }
      }
    }
  }
}

}  // namespace

void avx512_gemm_blocked(const float* a, int64_t lda, int64_t m, int64_t k, const float* blocked,
                         int64_t n, float* c, int64_t ldc, const Epilogue& e, int threads) {
  if (m <= 0 || n <= 0) return;
  const int64_t blocks = (n + kBlock - 1) / kBlock;
  // Columns first (each thread reads its own blocks of B); rows too when a thread would get
  // fewer than kMinColumns columns.
  const int64_t by_columns = std::clamp<int64_t>(blocks * kBlock / kMinColumns, 1, threads);
  const int64_t by_rows = std::clamp<int64_t>(threads / by_columns, 1, (m + kRows - 1) / kRows);
  const int parts = static_cast<int>(by_columns * by_rows);
  if (parts <= 1) {
    gemm_part(a, lda, 0, m, k, blocked, 0, blocks, n, c, ldc, e);
    return;
  }
  const int64_t row_tiles = (m + kRows - 1) / kRows;
#pragma omp parallel for num_threads(parts) schedule(static)
  for (int t = 0; t < parts; ++t) {
    const int64_t i = t / by_columns, j = t % by_columns;
    const int64_t m_begin = std::min(m, row_tiles * i / by_rows * kRows);
    const int64_t m_end = std::min(m, row_tiles * (i + 1) / by_rows * kRows);
    gemm_part(a, lda, m_begin, m_end, k, blocked, blocks * j / by_columns,
              blocks * (j + 1) / by_columns, n, c, ldc, e);
  }
}

}  // namespace kiln::engine::cpu::dnnl_impl
