#pragma once

#include <kiln/engine/cpu/dnnl_common.h>

#include <cstdint>

namespace kiln::engine::cpu::dnnl_impl {

struct Epilogue;

/// The layout oneDNN's blocked (brgemm) matmul gives a constant B [K, N] of f32 on AVX-512
/// (format tag BA16a64b): blocks of 64 columns one after another, each of K' rows (K rounded up
/// to 16) of 64 floats, padding zero. A streaming MatMul (a decoder's token) that takes its B in
/// this layout shares the packing with a MatMul of many rows by the same weight (a prefill of
/// the same model): one copy of the weights for both.
dnnl::memory::desc blocked_b_md(int64_t k, int64_t n);

/// Writes B [K, N] (f32 in `source`'s layout: any strides, no blocks) into `to` in
/// `blocked_b_md(K, N)`'s layout, padding zero: the bytes oneDNN's reorder writes, without the
/// reorder's code generation (about 0.3 ms a shape at a load). False, writing nothing, when
/// `target` is not that layout or `source` not a plain 2-D f32 one.
bool pack_blocked_b(const dnnl::memory::desc& source, const void* data,
                    const dnnl::memory::desc& target, void* to);

/// The floats of B [K, N] in `blocked_b_md(K, N)`'s layout (K padded to 16, N to 64).
size_t blocked_floats(int64_t k, int64_t n);
/// Writes B [K, N], its element (r, j) at b[r * row_stride + j * col_stride], times `scale`,
/// into `to` (`blocked_floats(k, n)`) in `blocked_b_md(K, N)`'s layout, for the loops here
/// (pack_panels.cpp): the rows of K's padding are left as they were (never read), the columns
/// of N's padding are zero. B given transposed (row_stride 1) is transposed in 16 x 16 blocks.
void pack_blocked(const float* b, int64_t row_stride, int64_t col_stride, int64_t k, int64_t n,
                  float scale, float* to);

/// C [M, N] (row stride ldc) = post-ops(A [M, K] (row stride lda) x B + biases) for M <= 4,
/// with B in `blocked_b_md(k, n)`'s layout; the blocks of 64 columns split over `threads`
/// threads. Each block's rows are read once, in order, for all M rows of A. K must be >= 1.
void gemv_blocked(const float* a, int64_t lda, int64_t m, int64_t k, const float* b, int64_t n,
                  float* c, int64_t ldc, const Epilogue& e, int threads);

/// C [M, N] (row stride ldc) = post-ops(A [M, K] (row stride lda) x B + biases) for any M, with
/// B in `blocked_b_md(k, n)`'s layout, on `threads` threads (each a share of the blocks of 64
/// columns, or of the rows when there are few blocks): tiles of 6 rows by a block. For
/// shape-generic plans (`RuntimeMatMul`), so that they read the packing of a weight that the
/// per-shape plans of the same model read. Needs AVX-512F (`cpu_has_avx512f`); K at least 1.
/// `e.residual` has row stride ldc.
void avx512_gemm_blocked(const float* a, int64_t lda, int64_t m, int64_t k, const float* blocked,
                         int64_t n, float* c, int64_t ldc, const Epilogue& e, int threads);

}  // namespace kiln::engine::cpu::dnnl_impl
