// A x B over B's 16-column panels on AVX2 and FMA. oneDNN 2.6 has its blocked (brgemm) matmul
// for AVX-512 only; on AVX2 its matmul and inner product run gemm:jit, which packs B again at
// every call: GPT-large prefill's MatMuls (128 x 512 x 1536, 128 x 2048 x 512) ran at 45-55 % of
// the FMA peak there, ONNX Runtime's at about 75 %. Here B is packed once (at load), and a tile
// of 6 rows by one panel keeps its 12 vectors of sums in registers (with two of B and the
// broadcast of A: 15 of the 16 ymm) over a block of 512 of K, whose 32 KiB of the panel stay
// near (L1, L2) while every row block of the chunk passes, A's block in L2 (a chunk of up to 192
// rows; more go 96 at a time). Blocks of 256 ran the 128 x 512 x 8192 head at 76 % of the peak,
// 512 at 84 (with 256, the first block's sums came back from memory for the second); the smaller
// GPT layers ran at 88-95 % either way (`kiln_cpu_bench --benchmark_filter=BM_DnnlMatMul/.*/1`, on
// an AVX-512 CPU running these AVX2 loops). Sums start from the column bias (and a residual added
// first); those of a block after the first are added to the ones stored, and the other post-ops are
// applied after the last.

#include <kiln/engine/cpu/avx2_gemm.h>
#include <kiln/engine/cpu/loop_epilogue.h>

// GCC 12's AVX-512 header makes some of its 256-bit extracts from a variable initialized with
// itself (`__m256d __Y = __Y;`), which -Wmaybe-uninitialized reports wherever they are inlined
// (_mm512_reduce_add_ps): a false alarm, silenced for the header's lines only.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
#include <omp.h>

#include <algorithm>
#include <cstring>

namespace kiln::engine::cpu::dnnl_impl {

namespace {

constexpr int64_t kPanel = 16;       // columns per panel
constexpr int kRows = 6;             // rows per tile
constexpr int64_t kDepth = 512;      // K per block
constexpr int64_t kChunkRows = 96;   // rows per chunk (a multiple of kRows), unless
constexpr int64_t kOneChunk = 192;   // rows a thread has fit one chunk
constexpr int64_t kMinColumns = 64;  // a thread's fewest columns before rows are split too

#define KILN_TILE_ROWS(X) X(0) X(1) X(2) X(3) X(4) X(5)

// Rows [0, R) of a tile: C (row stride ldc) = (first ? `init` [16] + `res` (row stride ldc, when
// not null) : C) + A [R, kc] x the panel's block `b` [kc, 16]. kPrefetch: the next panel's block
// `next` is prefetched, a row of it per row of `b` (the chunk's first tile of a panel, whose B
// comes from memory or L3: without it, a GPT-large head's 128 x 512 x 8192 ran at 65 % of the
// peak).
template <int R, bool kPrefetch>
[[gnu::target("avx2,fma")]] inline void tile(const float* a, int64_t lda, const float* b,
                                             int64_t kc, float* c, int64_t ldc, bool first,
                                             const float* init, const float* res,
                                             const float* next) {
  static_assert(R >= 1 && R <= kRows);
  const __m256 init0 = _mm256_loadu_ps(init), init1 = _mm256_loadu_ps(init + kPanel / 2);
#define KILN_TILE_DECLARE(r)               \
  __m256 s##r##0 = init0, s##r##1 = init1; \
  [[maybe_unused]] const float* a##r = a + std::min<int64_t>((r), R - 1) * lda;
  KILN_TILE_ROWS(KILN_TILE_DECLARE)
#undef KILN_TILE_DECLARE
  if (first && res != nullptr) {
#define KILN_TILE_ADD(r)                                                           \
  if constexpr (R > (r)) {                                                         \
    s##r##0 = _mm256_add_ps(s##r##0, _mm256_loadu_ps(res + (r)*ldc));              \
    s##r##1 = _mm256_add_ps(s##r##1, _mm256_loadu_ps(res + (r)*ldc + kPanel / 2)); \
  }
    KILN_TILE_ROWS(KILN_TILE_ADD)
#undef KILN_TILE_ADD
  }
  if (!first) {
#define KILN_TILE_LOAD(r)                                \
  if constexpr (R > (r)) {                               \
    s##r##0 = _mm256_loadu_ps(c + (r)*ldc);              \
    s##r##1 = _mm256_loadu_ps(c + (r)*ldc + kPanel / 2); \
  }
    KILN_TILE_ROWS(KILN_TILE_LOAD)
#undef KILN_TILE_LOAD
  }
#pragma GCC unroll 4
  for (int64_t k = 0; k < kc; ++k) {
    const __m256 b0 = _mm256_loadu_ps(b + k * kPanel);
    const __m256 b1 = _mm256_loadu_ps(b + k * kPanel + kPanel / 2);
    if constexpr (kPrefetch)
      _mm_prefetch(reinterpret_cast<const char*>(next + k * kPanel), _MM_HINT_T0);
#define KILN_TILE_FMA(r)                            \
  if constexpr (R > (r)) {                          \
    const __m256 x = _mm256_broadcast_ss(a##r + k); \
    s##r##0 = _mm256_fmadd_ps(x, b0, s##r##0);      \
    s##r##1 = _mm256_fmadd_ps(x, b1, s##r##1);      \
  }
    KILN_TILE_ROWS(KILN_TILE_FMA)
#undef KILN_TILE_FMA
  }
#define KILN_TILE_STORE(r)                               \
  if constexpr (R > (r)) {                               \
    _mm256_storeu_ps(c + (r)*ldc, s##r##0);              \
    _mm256_storeu_ps(c + (r)*ldc + kPanel / 2, s##r##1); \
  }
  KILN_TILE_ROWS(KILN_TILE_STORE)
#undef KILN_TILE_STORE
}

// `next`: the block to prefetch, or null.
template <bool kPrefetch>
[[gnu::target("avx2,fma")]] inline void tile_rows(int rows, const float* a, int64_t lda,
                                                  const float* b, int64_t kc, float* c, int64_t ldc,
                                                  bool first, const float* init, const float* res,
                                                  const float* next) {
  switch (rows) {
    case 1:
      return tile<1, kPrefetch>(a, lda, b, kc, c, ldc, first, init, res, next);
    case 2:
      return tile<2, kPrefetch>(a, lda, b, kc, c, ldc, first, init, res, next);
    case 3:
      return tile<3, kPrefetch>(a, lda, b, kc, c, ldc, first, init, res, next);
    case 4:
      return tile<4, kPrefetch>(a, lda, b, kc, c, ldc, first, init, res, next);
    case 5:
      return tile<5, kPrefetch>(a, lda, b, kc, c, ldc, first, init, res, next);
    default:
      return tile<6, kPrefetch>(a, lda, b, kc, c, ldc, first, init, res, next);
  }
}

[[gnu::target("avx2,fma")]] inline void tile_rows(int rows, const float* a, int64_t lda,
                                                  const float* b, int64_t kc, float* c, int64_t ldc,
                                                  bool first, const float* init, const float* res,
                                                  const float* next) {
  if (next != nullptr) {
    return tile_rows<true>(rows, a, lda, b, kc, c, ldc, first, init, res, next);
  }
  tile_rows<false>(rows, a, lda, b, kc, c, ldc, first, init, res, nullptr);
}

// AVX-512 (avx512_gemm): tiles of up to 12 rows by P = 1 or 2 panels, whose 24 vectors of sums
// with two of B take 26 of the 32 zmm registers (A's values broadcast from memory into the
// FMAs), over blocks of 256 of K: a pair of panels' block is 32 KiB, which stays in L1.
constexpr int kWideRows = 12;
constexpr int64_t kWideDepth = 256;
// From this size of B up (larger than a core's L2 on recent Xeons), the first tile of each panel
// pair prefetches the next pair's block; below, B stays in L2 and the prefetches only cost (GPT
// prefill's 0.1-0.5 MB matrices ran 1-2 % slower with them).
constexpr int64_t kWidePrefetchBytes = int64_t{2} << 20;

#define KILN_WIDE_ROWS(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)

// As `tile`, for R rows by P panels: `b` is the first panel's block, `b2` the second's; `init`
// holds P x 16 starting sums.
template <int R, int P, bool kPrefetch>
[[gnu::target("avx512f")]] inline void wide_tile(const float* a, int64_t lda, const float* b,
                                                 const float* b2, int64_t kc, float* c, int64_t ldc,
                                                 bool first, const float* init, const float* res,
                                                 const float* next, const float* next2) {
  static_assert(R >= 1 && R <= kWideRows && (P == 1 || P == 2));
  const __m512 init0 = _mm512_loadu_ps(init);
  const __m512 init1 = P == 2 ? _mm512_loadu_ps(init + kPanel) : init0;
#define KILN_WIDE_DECLARE(r)                                \
  [[maybe_unused]] __m512 s##r##0 = init0, s##r##1 = init1; \
  [[maybe_unused]] const float* a##r = a + std::min<int64_t>((r), R - 1) * lda;
  KILN_WIDE_ROWS(KILN_WIDE_DECLARE)
#undef KILN_WIDE_DECLARE
  if (first && res != nullptr) {
#define KILN_WIDE_ADD(r)                                                         \
  if constexpr (R > (r)) {                                                       \
    s##r##0 = _mm512_add_ps(s##r##0, _mm512_loadu_ps(res + (r)*ldc));            \
    if constexpr (P == 2)                                                        \
      s##r##1 = _mm512_add_ps(s##r##1, _mm512_loadu_ps(res + (r)*ldc + kPanel)); \
  }
    KILN_WIDE_ROWS(KILN_WIDE_ADD)
#undef KILN_WIDE_ADD
  }
  if (!first) {
#define KILN_WIDE_LOAD(r)                                                  \
  if constexpr (R > (r)) {                                                 \
    s##r##0 = _mm512_loadu_ps(c + (r)*ldc);                                \
    if constexpr (P == 2) s##r##1 = _mm512_loadu_ps(c + (r)*ldc + kPanel); \
  }
    KILN_WIDE_ROWS(KILN_WIDE_LOAD)
#undef KILN_WIDE_LOAD
  }
#pragma GCC unroll 2
  for (int64_t k = 0; k < kc; ++k) {
    const __m512 b0 = _mm512_loadu_ps(b + k * kPanel);
    [[maybe_unused]] const __m512 b1 = P == 2 ? _mm512_loadu_ps(b2 + k * kPanel) : b0;
    if constexpr (kPrefetch) {
      _mm_prefetch(reinterpret_cast<const char*>(next + k * kPanel), _MM_HINT_T0);
      if (next2 != nullptr) {
        _mm_prefetch(reinterpret_cast<const char*>(next2 + k * kPanel), _MM_HINT_T0);
      }
    }
#define KILN_WIDE_FMA(r)                                             \
  if constexpr (R > (r)) {                                           \
    const __m512 x = _mm512_set1_ps(a##r[k]);                        \
    s##r##0 = _mm512_fmadd_ps(x, b0, s##r##0);                       \
    if constexpr (P == 2) s##r##1 = _mm512_fmadd_ps(x, b1, s##r##1); \
  }
    KILN_WIDE_ROWS(KILN_WIDE_FMA)
#undef KILN_WIDE_FMA
  }
#define KILN_WIDE_STORE(r)                                                 \
  if constexpr (R > (r)) {                                                 \
    _mm512_storeu_ps(c + (r)*ldc, s##r##0);                                \
    if constexpr (P == 2) _mm512_storeu_ps(c + (r)*ldc + kPanel, s##r##1); \
  }
  KILN_WIDE_ROWS(KILN_WIDE_STORE)
#undef KILN_WIDE_STORE
}

// `next` (and `next2`, or null): the blocks of the panels after this tile's, prefetched a row
// per row of `b` (the chunk's first tile of a panel pair, whose B comes from memory or L3:
// without it, a GPT-large head's 128 x 512 x 8192 ran at 66 % of the peak); null: none.
template <int P, bool kPrefetch>
[[gnu::target("avx512f")]] inline void wide_tile_rows(int rows, const float* a, int64_t lda,
                                                      const float* b, const float* b2, int64_t kc,
                                                      float* c, int64_t ldc, bool first,
                                                      const float* init, const float* res,
                                                      const float* next, const float* next2) {
  switch (rows) {
#define KILN_WIDE_CASE(r)                                                                      \
  case (r) + 1:                                                                                \
    return wide_tile<(r) + 1, P, kPrefetch>(a, lda, b, b2, kc, c, ldc, first, init, res, next, \
                                            next2);
    KILN_WIDE_ROWS(KILN_WIDE_CASE)
#undef KILN_WIDE_CASE
    default:
      return;
  }
}

template <int P>
[[gnu::target("avx512f")]] inline void wide_tile_rows(int rows, const float* a, int64_t lda,
                                                      const float* b, const float* b2, int64_t kc,
                                                      float* c, int64_t ldc, bool first,
                                                      const float* init, const float* res,
                                                      const float* next = nullptr,
                                                      const float* next2 = nullptr) {
  if (next != nullptr) {
    return wide_tile_rows<P, true>(rows, a, lda, b, b2, kc, c, ldc, first, init, res, next, next2);
  }
  wide_tile_rows<P, false>(rows, a, lda, b, b2, kc, c, ldc, first, init, res, nullptr, nullptr);
}

// Rows [m_begin, m_end) and panels [p_begin, p_end) of C. kWide: AVX-512's tiles (two full
// panels at a time where there are two), else AVX2's.
template <bool kWide>
[[gnu::target("avx2,fma")]] void gemm_part(const float* a, int64_t lda, int64_t m_begin,
                                           int64_t m_end, int64_t k_count, const float* panels,
                                           int64_t p_begin, int64_t p_end, int64_t n_count,
                                           float* c, int64_t ldc, const Epilogue& e) {
  constexpr int kTileRows = kWide ? kWideRows : kRows;
  constexpr int64_t kBlockDepth = kWide ? kWideDepth : kDepth;
  alignas(64) float edge[kTileRows * kPanel];
  const EpilogueSplit split = split_epilogue(e);
  const bool prefetch_wide =
      k_count * n_count * static_cast<int64_t>(sizeof(float)) >= kWidePrefetchBytes;
  for (int64_t k0 = 0; k0 < k_count; k0 += kBlockDepth) {
    const int64_t kc = std::min(kBlockDepth, k_count - k0);
    const bool first = k0 == 0, last = k0 + kc == k_count;
    const int64_t chunk = m_end - m_begin <= kOneChunk ? m_end - m_begin : kChunkRows;
    for (int64_t mc = m_begin; mc < m_end; mc += chunk) {
      const int64_t mc_end = std::min(mc + chunk, m_end);
      for (int64_t p = p_begin; p < p_end;) {
        const float* b = panels + (p * k_count + k0) * kPanel;
        const int64_t n0 = p * kPanel;
        const int64_t width = std::min(kPanel, n_count - n0);
        // Two full panels side by side (AVX-512 only).
        const bool pair = kWide && p + 1 < p_end && n0 + 2 * kPanel <= n_count;
        const int64_t span = pair ? 2 * kPanel : kPanel;
        const float* next_b = !kWide && p + 1 < p_end ? b + k_count * kPanel : nullptr;
        // AVX-512: the next pair's blocks (the panels after this tile's).
        const int64_t after = p + (pair ? 2 : 1);
        const float* next_wide = kWide && prefetch_wide && after < p_end
                                     ? panels + (after * k_count + k0) * kPanel
                                     : nullptr;
        const float* next_wide2 =
            next_wide != nullptr && after + 1 < p_end ? next_wide + k_count * kPanel : nullptr;
        float bias[2 * kPanel] = {};
        if (e.col_bias != nullptr) {
          std::memcpy(bias, e.col_bias + n0,
                      sizeof(float) * static_cast<size_t>(pair ? span : width));
        }
        for (int64_t m = mc; m < mc_end; m += kTileRows) {
          const int rows = static_cast<int>(std::min<int64_t>(kTileRows, mc_end - m));
          float* out = c + m * ldc + n0;
          const float* a_block = a + m * lda + k0;
          if (pair || width == kPanel) {
            const float* res = split.residual_first ? e.residual + m * ldc + n0 : nullptr;
            if constexpr (kWide) {
              const float* next = m == mc ? next_wide : nullptr;
              if (pair) {
                wide_tile_rows<2>(rows, a_block, lda, b, b + k_count * kPanel, kc, out, ldc, first,
                                  bias, res, next, next_wide2);
              } else {
                wide_tile_rows<1>(rows, a_block, lda, b, nullptr, kc, out, ldc, first, bias, res,
                                  next, next_wide2);
              }
            } else {
              tile_rows(rows, a_block, lda, b, kc, out, ldc, first, bias, res,
                        m == mc ? next_b : nullptr);
            }
            if (last && split.finish) finish_sums(out, ldc, rows, span, m, n0, ldc, split.rest);
            continue;
          }
          // The last panel's columns past N: sums in `edge`, then only the columns there are.
          const size_t bytes = sizeof(float) * static_cast<size_t>(width);
          if (!first) {
            for (int r = 0; r < rows; ++r) std::memcpy(edge + r * kPanel, out + r * ldc, bytes);
          }
          if constexpr (kWide) {
            wide_tile_rows<1>(rows, a_block, lda, b, nullptr, kc, edge, kPanel, first, bias,
                              nullptr);
          } else {
            tile_rows(rows, a_block, lda, b, kc, edge, kPanel, first, bias, nullptr,
                      m == mc ? next_b : nullptr);
          }
          if (last && split.finish_all) finish_sums(edge, kPanel, rows, width, m, n0, ldc, e);
          for (int r = 0; r < rows; ++r) std::memcpy(out + r * ldc, edge + r * kPanel, bytes);
        }
        p += pair ? 2 : 1;
      }
    }
  }
}

// avx2_gemm and avx512_gemm: the parts of C over `threads` threads.
template <bool kWide>
void gemm_threads(const float* a, int64_t lda, int64_t m, int64_t k, const float* panels, int64_t n,
                  float* c, int64_t ldc, const Epilogue& e, int threads) {
  constexpr int64_t kTileRows = kWide ? kWideRows : kRows;
  const int64_t num_panels = (n + kPanel - 1) / kPanel;
  // Columns first (each thread reads its own panels of B); rows too when a thread would get
  // fewer than kMinColumns columns.
  const int64_t by_columns = std::clamp<int64_t>(num_panels * kPanel / kMinColumns, 1, threads);
  const int64_t by_rows =
      std::clamp<int64_t>(threads / by_columns, 1, (m + kTileRows - 1) / kTileRows);
  const int parts = static_cast<int>(by_columns * by_rows);
  if (parts <= 1) {
    gemm_part<kWide>(a, lda, 0, m, k, panels, 0, num_panels, n, c, ldc, e);
    return;
  }
  const int64_t row_blocks = (m + kTileRows - 1) / kTileRows;
#pragma omp parallel for num_threads(parts) schedule(static)
  for (int t = 0; t < parts; ++t) {
    const int64_t i = t / by_columns, j = t % by_columns;
    const int64_t m_begin = std::min(m, row_blocks * i / by_rows * kTileRows);
    const int64_t m_end = std::min(m, row_blocks * (i + 1) / by_rows * kTileRows);
    // Column splits on pairs of panels, so that AVX-512's tiles stay whole.
    const int64_t pairs = (num_panels + 1) / 2;
    const int64_t p_begin = std::min(num_panels, pairs * j / by_columns * 2);
    const int64_t p_end = std::min(num_panels, pairs * (j + 1) / by_columns * 2);
    gemm_part<kWide>(a, lda, m_begin, m_end, k, panels, p_begin, p_end, n, c, ldc, e);
  }
}

}  // namespace

bool cpu_has_avx2_fma() {
#if defined(__GNUC__) && defined(__x86_64__)
  static const bool has = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return has;
#else
  return false;
#endif
}

bool cpu_has_avx512f() {
#if defined(__GNUC__) && defined(__x86_64__)
  static const bool has = __builtin_cpu_supports("avx512f");
  return has;
#else
  return false;
#endif
}

// Each row of C in chunks of up to 64 columns (four vectors, the last masked), over K two rows
// of B at a time into two sets of sums (eight chains of multiply-adds in flight), added at the
// end.
[[gnu::target("avx512f")]] void avx512_small_rows(const float* a, int64_t lda, int64_t m, int64_t k,
                                                  const float* b, int64_t ldb, int64_t n, float* c,
                                                  int64_t ldc) {
  constexpr int kVectors = 4;
  for (int64_t r = 0; r < m; ++r) {
    const float* row = a + r * lda;
    for (int64_t j = 0; j < n; j += kVectors * 16) {
      const int64_t width = std::min<int64_t>(kVectors * 16, n - j);
      __mmask16 mask[kVectors];
      for (int v = 0; v < kVectors; ++v) {
        const int64_t left = std::clamp<int64_t>(width - 16 * v, 0, 16);
        mask[v] = static_cast<__mmask16>((1u << left) - 1u);
      }
      __m512 even[kVectors], odd[kVectors];
      for (int v = 0; v < kVectors; ++v) even[v] = odd[v] = _mm512_setzero_ps();
      const float* col = b + j;
      int64_t p = 0;
      for (; p + 1 < k; p += 2) {
        const __m512 x0 = _mm512_set1_ps(row[p]), x1 = _mm512_set1_ps(row[p + 1]);
        const float* b0 = col + p * ldb;
        const float* b1 = b0 + ldb;
        for (int v = 0; v < kVectors; ++v) {
          even[v] = _mm512_fmadd_ps(x0, _mm512_maskz_loadu_ps(mask[v], b0 + 16 * v), even[v]);
          odd[v] = _mm512_fmadd_ps(x1, _mm512_maskz_loadu_ps(mask[v], b1 + 16 * v), odd[v]);
        }
      }
      if (p < k) {
        const __m512 x0 = _mm512_set1_ps(row[p]);
        for (int v = 0; v < kVectors; ++v) {
          even[v] =
              _mm512_fmadd_ps(x0, _mm512_maskz_loadu_ps(mask[v], col + p * ldb + 16 * v), even[v]);
        }
      }
      for (int v = 0; v < kVectors; ++v) {
        _mm512_mask_storeu_ps(c + r * ldc + j + 16 * v, mask[v], _mm512_add_ps(even[v], odd[v]));
      }
    }
  }
}

[[gnu::target("avx512f")]] void avx512_small_rows_bt(const float* a, int64_t lda, int64_t m,
                                                     int64_t k, const float* bt, int64_t ldbt,
                                                     int64_t n, float* c, int64_t ldc) {
  // Per column j of C, a dot product of each row of A with row j of B^T, K in vectors of 16
  // (the last one masked); four columns at a time share A's loads.
  constexpr int kColumns = 4;
  for (int64_t r = 0; r < m; ++r) {
    const float* row = a + r * lda;
    int64_t j = 0;
    for (; j + kColumns <= n; j += kColumns) {
      __m512 sum[kColumns];
      for (int q = 0; q < kColumns; ++q) sum[q] = _mm512_setzero_ps();
      for (int64_t p = 0; p < k; p += 16) {
        const auto mask = static_cast<__mmask16>((1u << std::min<int64_t>(16, k - p)) - 1u);
        const __m512 x = _mm512_maskz_loadu_ps(mask, row + p);
        for (int q = 0; q < kColumns; ++q) {
          sum[q] = _mm512_fmadd_ps(x, _mm512_maskz_loadu_ps(mask, bt + (j + q) * ldbt + p), sum[q]);
        }
      }
      for (int q = 0; q < kColumns; ++q) c[r * ldc + j + q] = _mm512_reduce_add_ps(sum[q]);
    }
    for (; j < n; ++j) {
      __m512 sum = _mm512_setzero_ps();
      for (int64_t p = 0; p < k; p += 16) {
        const auto mask = static_cast<__mmask16>((1u << std::min<int64_t>(16, k - p)) - 1u);
        sum = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(mask, row + p),
                              _mm512_maskz_loadu_ps(mask, bt + j * ldbt + p), sum);
      }
      c[r * ldc + j] = _mm512_reduce_add_ps(sum);
    }
  }
}

void avx2_gemm(const float* a, int64_t lda, int64_t m, int64_t k, const float* panels, int64_t n,
               float* c, int64_t ldc, const Epilogue& e, int threads) {
  gemm_threads<false>(a, lda, m, k, panels, n, c, ldc, e, threads);
}

void avx512_gemm(const float* a, int64_t lda, int64_t m, int64_t k, const float* panels, int64_t n,
                 float* c, int64_t ldc, const Epilogue& e, int threads) {
  gemm_threads<true>(a, lda, m, k, panels, n, c, ldc, e, threads);
}

}  // namespace kiln::engine::cpu::dnnl_impl
