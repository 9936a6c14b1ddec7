#pragma once

#include <cstdint>

namespace kiln::engine::cpu::dnnl_impl {

struct Epilogue;

/// Whether this CPU has AVX2 and FMA, which `avx2_gemm` needs.
bool cpu_has_avx2_fma();

/// C [M, N] (row stride ldc) = post-ops(A [M, K] (row stride lda) x B + biases), with B in
/// 16-column panels (`pack_panels`' layout: ceil(N / 16) panels of K x 16 floats, the last
/// zero-padded), on `threads` threads (each a share of the columns, or of the rows when there are
/// few columns). Written for AVX2 and FMA (`cpu_has_avx2_fma` must hold), where oneDNN 2.6's
/// matmul and inner product have only gemm:jit, which repacks B at every call: tiles of 6 rows
/// by 16 columns over blocks of 512 of K, A read in place. `e.residual` has row stride ldc.
/// K must be at least 1.
void avx2_gemm(const float* a, int64_t lda, int64_t m, int64_t k, const float* panels, int64_t n,
               float* c, int64_t ldc, const Epilogue& e, int threads);

/// Whether this CPU has AVX-512F, which `avx512_gemm` needs.
bool cpu_has_avx512f();

/// `avx2_gemm` on AVX-512 (`cpu_has_avx512f` must hold): the same panels, arguments and
/// results, in tiles of 12 rows by two panels over blocks of 256 of K. For shape-generic plans
/// (`RuntimeMatMul`), whose oneDNN matmul of run-time rows (gemm:jit) generates its kernel set
/// at a process's first call: 30-50 ms of a load.
void avx512_gemm(const float* a, int64_t lda, int64_t m, int64_t k, const float* panels, int64_t n,
                 float* c, int64_t ldc, const Epilogue& e, int threads);

/// C [M, N] (row stride ldc) = A [M, K] (row stride lda) x B [K, N] (row stride ldb), B read
/// in place, on one thread, for a few rows (`kSmallRows` at most): a decoder step's attention
/// (one row of A a head, B the past keys or values computed at run time), where packing B into
/// panels for `avx512_gemm` would touch every value of B once more than the product does.
/// Needs AVX-512F (`cpu_has_avx512f`); K must be at least 1.
void avx512_small_rows(const float* a, int64_t lda, int64_t m, int64_t k, const float* b,
                       int64_t ldb, int64_t n, float* c, int64_t ldc);
inline constexpr int64_t kSmallRows = 4;

/// As `avx512_small_rows` with B given transposed: C [M, N] = A [M, K] x B, B^T [N, K] (row
/// stride ldbt) read in place: attention's scores of a decoder step, one row of queries a head
/// against the keys as they are stored ([past, head size]), with no transposed copy of them.
/// Needs AVX-512F; K at least 1.
void avx512_small_rows_bt(const float* a, int64_t lda, int64_t m, int64_t k, const float* bt,
                          int64_t ldbt, int64_t n, float* c, int64_t ldc);

}  // namespace kiln::engine::cpu::dnnl_impl
