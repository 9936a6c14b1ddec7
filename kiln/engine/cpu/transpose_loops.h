#pragma once

#include <kiln/runtime/core/span.h>
#include <kiln/runtime/core/status.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace kiln::engine::cpu::dnnl_impl {

/// Transpose on kiln's own loops, for the op of known shapes (transpose_op.cpp) and the one of
/// run-time shapes (runtime_elementwise.cpp). `plan` simplifies the dimensions (size-1 ones
/// dropped, neighbours that stay neighbours merged), then `run` either copies whole rows (the
/// innermost dimension stays innermost) or transposes 16 x 16 tiles (4-byte elements on AVX-512
/// in registers; otherwise element by element within the tile). Planning allocates nothing, so
/// a shape-generic plan may plan at every call.
///
/// Thread-safety: `run` only reads the plan; distinct objects are independent.
class TransposeLoops {
 public:
  static constexpr size_t kMaxRank = 8;

  /// Plans the ONNX Transpose of a tensor of `sizes` by `perm` (empty: the dimensions
  /// reversed), elements of `element` bytes, on up to `threads` threads (used from 1 MiB of
  /// data). Errors: InvalidArgument naming `perm` unless it is a permutation of 0..rank-1;
  /// NotSupported for more than kMaxRank dimensions or elements of other than 1, 2, 4 or 8 bytes.
  runtime::Status plan(runtime::Span<const int64_t> sizes, runtime::Span<const int64_t> perm,
                       size_t element, int threads);
  /// The output's sizes (out[i] = sizes[perm[i]]) of the last successful `plan`.
  runtime::Span<const int64_t> output_sizes() const { return {out_sizes_.data(), rank_}; }
  /// Writes the transpose of `src` (contiguous, the planned sizes) to `dst` (contiguous).
  void run(const void* src, void* dst) const;
  /// "rows copied", "16 x 16 tiles" or "16 x 16 tiles, AVX-512" for the last plan.
  std::string describe() const;
  /// Threads the last plan runs on (1 below 1 MiB).
  int threads() const { return threads_; }

 private:
  template <typename T>
  void run_as(const T* from, T* to) const;
  template <typename T>
  void part(const T* from, T* to, int64_t begin, int64_t end) const;
  std::array<int64_t, 2> offsets_of(int64_t unit) const;

  std::array<int64_t, kMaxRank> out_sizes_{};
  size_t rank_ = 0;
  // The simplified output dims: sizes and strides (elements) in the input and the output.
  std::array<int64_t, kMaxRank> sizes_{}, in_strides_{}, out_strides_{};
  size_t dims_ = 0;
  // Outer dims (all but the copied row's, or all but the tile's two) and their count.
  std::array<size_t, kMaxRank> outer_{};
  size_t num_outer_ = 0;
  size_t a_ = 0, c_ = 0;  // tiles: the innermost output dim, and the one read contiguously
  int64_t numel_ = 0, row_ = 1, units_ = 1;
  size_t element_ = 4;
  int threads_ = 1;
  bool rows_ = true, avx512_ = false;
};

}  // namespace kiln::engine::cpu::dnnl_impl
