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

}  // namespace kiln::engine::cpu::dnnl_impl
