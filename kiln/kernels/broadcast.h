#pragma once

#include <kiln/runtime/core/result.h>
#include <kiln/runtime/core/span.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace kiln::kernels {

/// The shape that tensors of shapes `a` and `b` broadcast to under numpy rules (ONNX
/// "multidirectional broadcasting"): the shapes are aligned at their last dimension, a missing
/// leading dimension counts as 1, and each pair of sizes must be equal or contain a 1 (the
/// result takes the other size, so 0 with 1 gives 0).
/// Errors: InvalidArgument naming both shapes, the dimension (counted from the end, e.g. -1)
/// and its two sizes. The caller prefixes its action ("run kernel 'Add'").
runtime::Result<std::vector<int64_t>> broadcast_shape(runtime::Span<const int64_t> a,
                                                      runtime::Span<const int64_t> b);

/// True when a tensor of shape `from` broadcasts to exactly `to` (ONNX "unidirectional
/// broadcasting", as for Gemm's C): `from` has rank <= rank of `to`, and each of its sizes is
/// 1 or equal to the aligned size of `to`.
bool broadcasts_to(runtime::Span<const int64_t> from, runtime::Span<const int64_t> to);

/// Element strides that read a dense row-major tensor of shape `in_sizes` as if it had shape
/// `out_sizes`: one stride per output dimension, 0 for a dimension the input lacks or has as
/// size 1. Precondition: `broadcasts_to(in_sizes, out_sizes)`.
std::vector<int64_t> broadcast_strides(runtime::Span<const int64_t> in_sizes,
                                       runtime::Span<const int64_t> out_sizes);

/// A row-major walk over a dense output of some shape while reading `N` inputs through their
/// broadcast strides. Built by `make_broadcast_loop`, which drops size-1 dimensions and merges
/// neighbouring dimensions wherever every input allows it, so the innermost row is as long as
/// possible (e.g. [8, 3, 4, 4] + [1, 3, 1, 1] walks 24 rows of 16 elements).
template <size_t N>
struct BroadcastLoop {
  /// Merged output sizes, outermost first; never empty (a scalar walk is one row of 1).
  std::vector<int64_t> sizes;
  /// For each input, its stride (in elements) along each merged dimension.
  std::array<std::vector<int64_t>, N> strides;
  /// Output elements in all; 0 means the walk visits nothing.
  int64_t numel = 1;
};

/// Plans the walk over `out_sizes` for inputs read with `strides` (one vector per input, one
/// entry per output dimension, e.g. from `broadcast_strides`).
template <size_t N>
BroadcastLoop<N> make_broadcast_loop(runtime::Span<const int64_t> out_sizes,
                                     const std::array<std::vector<int64_t>, N>& strides) {
  BroadcastLoop<N> loop;
  for (int64_t size : out_sizes) loop.numel *= size;
  for (size_t d = 0; d < out_sizes.size(); ++d) {
    if (out_sizes[d] == 1) continue;  // a size-1 dimension never moves any offset
    bool merge = !loop.sizes.empty();
    for (size_t i = 0; i < N && merge; ++i) {
      // Merging keeps every offset right when the outer stride spans the inner dimension.
      merge = loop.strides[i].back() == strides[i][d] * out_sizes[d];
    }
    if (merge) {
      loop.sizes.back() *= out_sizes[d];
      for (size_t i = 0; i < N; ++i) loop.strides[i].back() = strides[i][d];
    } else {
      loop.sizes.push_back(out_sizes[d]);
      for (size_t i = 0; i < N; ++i) loop.strides[i].push_back(strides[i][d]);
    }
  }
  if (loop.sizes.empty()) {
    loop.sizes.push_back(1);
    for (size_t i = 0; i < N; ++i) loop.strides[i].push_back(0);
  }
  return loop;
}

/// Calls `fn(out_offset, in_offsets, count, in_strides)` once per innermost row, in row-major
/// order: the row covers output elements [out_offset, out_offset + count) and input `i` reads
/// element `in_offsets[i] + j * in_strides[i]` for the row's j-th element. `in_offsets` and
/// `in_strides` are `std::array<int64_t, N>`. Does not allocate beyond one index per merged
/// dimension.
template <size_t N, typename Fn>
void for_each_broadcast_row(const BroadcastLoop<N>& loop, Fn&& fn) {
  if (loop.numel == 0) return;
  const size_t rank = loop.sizes.size();
  const int64_t count = loop.sizes.back();
  std::array<int64_t, N> inner_strides{};
  for (size_t i = 0; i < N; ++i) inner_strides[i] = loop.strides[i].back();
  std::vector<int64_t> index(rank - 1, 0);
  std::array<int64_t, N> offsets{};
  const int64_t rows = loop.numel / count;
  int64_t out_offset = 0;
  for (int64_t row = 0; row < rows; ++row, out_offset += count) {
    fn(out_offset, offsets, count, inner_strides);
    // Advance the odometer over the outer dimensions, innermost first.
    for (size_t d = rank - 1; d-- > 0;) {
      for (size_t i = 0; i < N; ++i) offsets[i] += loop.strides[i][d];
      if (++index[d] < loop.sizes[d]) break;
      for (size_t i = 0; i < N; ++i) offsets[i] -= loop.strides[i][d] * loop.sizes[d];
      index[d] = 0;
    }
  }
}

}  // namespace kiln::kernels
