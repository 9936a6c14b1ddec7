#pragma once

// The matrix-product loop shared by MatMul and Gemm. Internal to kiln/kernels.

#include <kiln/kernels/dispatch.h>

#include <algorithm>
#include <cstdint>

namespace kiln::kernels::internal {

/// One product op(A) * op(B) of an [M, K] by a [K, N] matrix, both dense row-major.
struct GemmProblem {
  int64_t m = 0;
  int64_t n = 0;
  int64_t k = 0;
  bool trans_a = false;  ///< A is stored as [K, M].
  bool trans_b = false;  ///< B is stored as [N, K].
};

/// Computes op(A) * op(B) one output row at a time into `row` (N accumulators of the compute
/// type) and calls `epilogue(i, row)` after each row i, which writes it out (scaling, bias,
/// rounding to the storage type).
///
/// The loop order is i-k-j when B is not transposed: the innermost loop streams a row of B and
/// the accumulator row with unit stride, instead of walking a column of B as the naive i-j-k
/// order does. With B transposed, its rows are the columns of op(B), so i-j-k is the one with
/// unit stride (a dot product of two contiguous rows of length K).
template <typename T, typename Epilogue>
void gemm_rows(const GemmProblem& p, const T* a, const T* b, ComputeType<T>* row,
               Epilogue&& epilogue) {
  using C = ComputeType<T>;
  for (int64_t i = 0; i < p.m; ++i) {
    auto a_at = [&](int64_t kk) { return load(p.trans_a ? a[kk * p.m + i] : a[i * p.k + kk]); };
    if (!p.trans_b) {
      std::fill(row, row + p.n, C{0});
      for (int64_t kk = 0; kk < p.k; ++kk) {
        const C a_ik = a_at(kk);
        const T* b_row = b + kk * p.n;
        for (int64_t j = 0; j < p.n; ++j) row[j] += a_ik * load(b_row[j]);
      }
    } else {
      for (int64_t j = 0; j < p.n; ++j) {
        const T* b_row = b + j * p.k;
        C sum{0};
        for (int64_t kk = 0; kk < p.k; ++kk) sum += a_at(kk) * load(b_row[kk]);
        row[j] = sum;
      }
    }
    epilogue(i, static_cast<const C*>(row));
  }
}

}  // namespace kiln::kernels::internal
