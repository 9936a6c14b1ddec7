// Transpose's loops (transpose_loops.h). The reference kernel walks every element through
// strides it works out at each call (GPT decode's K^T, 129 x 32 floats a head: 7 us a block, a
// tenth of a decode step); these plan the dimensions once and copy rows or 16 x 16 tiles.

#include <kiln/engine/cpu/avx512_transpose.h>
#include <kiln/engine/cpu/cpu_op.h>
#include <kiln/engine/cpu/transpose_loops.h>

#include <omp.h>

#include <algorithm>
#include <cstring>

namespace kiln::engine::cpu::dnnl_impl {

using runtime::Error;
using runtime::Status;

namespace {

constexpr int64_t kTile = 16;
constexpr double kParallelBytes = 1 << 20;

#ifdef KILN_HAS_AVX512_TRANSPOSE
// dst[c * ldd + a] = src[a * lds + c] for a, c in [0, 16): a 16 x 16 block of floats.
__attribute__((target("avx512f"))) void tile16_avx512(const float* src, int64_t lds, float* dst,
                                                      int64_t ldd) {
  __m512 r[16];
  for (int i = 0; i < 16; ++i) r[i] = _mm512_loadu_ps(src + i * lds);
  transpose16_avx512(r);
  for (int i = 0; i < 16; ++i) _mm512_storeu_ps(dst + i * ldd, r[i]);
}
#endif

// dst[c * ldd + a] = src[a * lds + c] for a < rows, c < cols (at most 16 each).
template <typename T>
void tile_scalar(const T* src, int64_t lds, T* dst, int64_t ldd, int64_t rows, int64_t cols) {
  for (int64_t c = 0; c < cols; ++c) {
    for (int64_t a = 0; a < rows; ++a) dst[c * ldd + a] = src[a * lds + c];
  }
}

std::string perm_text(runtime::Span<const int64_t> perm) {
  std::string text = "[";
  for (size_t i = 0; i < perm.size(); ++i) text += (i ? ", " : "") + std::to_string(perm[i]);
  return text + "]";
}

}  // namespace

Status TransposeLoops::plan(runtime::Span<const int64_t> sizes, runtime::Span<const int64_t> perm,
                            size_t element, int threads) {
  const size_t rank = sizes.size();
  if (rank > kMaxRank) {
    return Status(Error::NotSupported, "Transpose of " + std::to_string(rank) +
                                           " dimensions (expected at most " +
                                           std::to_string(kMaxRank) + ")");
  }
  if (element != 1 && element != 2 && element != 4 && element != 8) {
    return Status(Error::NotSupported, "Transpose of elements of " + std::to_string(element) +
                                           " bytes (expected 1, 2, 4 or 8)");
  }
  if (!perm.empty() && perm.size() != rank) {
    return Status(Error::InvalidArgument, "Transpose: perm " + perm_text(perm) + " has " +
                                              std::to_string(perm.size()) +
                                              " entries (expected the input's rank, " +
                                              std::to_string(rank) + ")");
  }
  std::array<size_t, kMaxRank> axis_of{};
  unsigned seen = 0;
  for (size_t i = 0; i < rank; ++i) {
    const int64_t p = perm.empty() ? static_cast<int64_t>(rank - 1 - i) : perm[i];
    if (p < 0 || p >= static_cast<int64_t>(rank) || (seen & (1u << p)) != 0) {
      return Status(Error::InvalidArgument,
                    "Transpose: perm " + perm_text(perm) + " is not a permutation of 0.." +
                        std::to_string(static_cast<int64_t>(rank) - 1) +
                        " (expected each of the input's " + std::to_string(rank) +
                        " axes once)");
    }
    seen |= 1u << p;
    axis_of[i] = static_cast<size_t>(p);
  }
  std::array<int64_t, kMaxRank> in_strides{};
  int64_t stride = 1, numel = 1;
  for (size_t d = rank; d-- > 0;) {
    in_strides[d] = stride;
    stride *= sizes[d];
    numel *= sizes[d];
  }
  rank_ = rank;
  numel_ = numel;
  element_ = element;
  // Output dims without the size-1 ones; one that steps over exactly the next one's extent in
  // the input merges with it.
  dims_ = 0;
  for (size_t i = 0; i < rank; ++i) {
    const size_t axis = axis_of[i];
    out_sizes_[i] = sizes[axis];
    if (sizes[axis] == 1) continue;
    if (dims_ > 0 && in_strides_[dims_ - 1] == in_strides[axis] * sizes[axis]) {
      sizes_[dims_ - 1] *= sizes[axis];
      in_strides_[dims_ - 1] = in_strides[axis];
      continue;
    }
    sizes_[dims_] = sizes[axis];
    in_strides_[dims_] = in_strides[axis];
    ++dims_;
  }
  int64_t out_stride = 1;
  for (size_t d = dims_; d-- > 0;) {
    out_strides_[d] = out_stride;
    out_stride *= sizes_[d];
  }
  rows_ = dims_ == 0 || in_strides_[dims_ - 1] == 1;
  num_outer_ = 0;
  if (rows_) {
    row_ = dims_ == 0 ? 1 : sizes_[dims_ - 1];
    for (size_t d = 0; d + 1 < dims_; ++d) outer_[num_outer_++] = d;
  } else {
    a_ = dims_ - 1;
    for (size_t d = 0; d < dims_; ++d) {
      if (in_strides_[d] == 1) c_ = d;
    }
    for (size_t d = 0; d < dims_; ++d) {
      if (d != c_ && d != a_) outer_[num_outer_++] = d;
    }
  }
  units_ = 1;
  for (size_t i = 0; i < num_outer_; ++i) units_ *= sizes_[outer_[i]];
  const double bytes = static_cast<double>(numel) * static_cast<double>(element);
  threads_ = bytes > kParallelBytes && threads != 1
                 ? (threads > 0 ? threads : omp_get_max_threads())
                 : 1;
  avx512_ = false;
#ifdef KILN_HAS_AVX512_TRANSPOSE
  avx512_ = element == 4 && cpu_has_avx512();  // as ONEDNN_MAX_CPU_ISA allows
#endif
  return Status();
}

std::string TransposeLoops::describe() const {
  return rows_ ? "rows copied" : avx512_ ? "16 x 16 tiles, AVX-512" : "16 x 16 tiles";
}

void TransposeLoops::run(const void* src, void* dst) const {
  if (numel_ == 0) return;
  switch (element_) {
    case 1: run_as(static_cast<const uint8_t*>(src), static_cast<uint8_t*>(dst)); break;
    case 2: run_as(static_cast<const uint16_t*>(src), static_cast<uint16_t*>(dst)); break;
    case 4: run_as(static_cast<const uint32_t*>(src), static_cast<uint32_t*>(dst)); break;
    default: run_as(static_cast<const uint64_t*>(src), static_cast<uint64_t*>(dst)); break;
  }
}

std::array<int64_t, 2> TransposeLoops::offsets_of(int64_t unit) const {
  std::array<int64_t, 2> at{};
  for (size_t i = num_outer_; i-- > 0;) {
    const size_t d = outer_[i];
    const int64_t index = unit % sizes_[d];
    unit /= sizes_[d];
    at[0] += index * in_strides_[d];
    at[1] += index * out_strides_[d];
  }
  return at;
}

template <typename T>
void TransposeLoops::run_as(const T* from, T* to) const {
  if (threads_ <= 1 || units_ < 2) {
    part(from, to, 0, units_);
    return;
  }
  const int parts = static_cast<int>(std::min<int64_t>(threads_, units_));
#pragma omp parallel for num_threads(parts) schedule(static)
  for (int p = 0; p < parts; ++p) part(from, to, units_ * p / parts, units_ * (p + 1) / parts);
}

template <typename T>
void TransposeLoops::part(const T* from, T* to, int64_t begin, int64_t end) const {
  if (rows_) {
    const size_t bytes = static_cast<size_t>(row_) * sizeof(T);
    for (int64_t unit = begin; unit < end; ++unit) {
      const std::array<int64_t, 2> at = offsets_of(unit);
      std::memcpy(to + at[1], from + at[0], bytes);
    }
    return;
  }
  const int64_t rows = sizes_[a_], cols = sizes_[c_];
  const int64_t lds = in_strides_[a_], ldd = out_strides_[c_];
  for (int64_t unit = begin; unit < end; ++unit) {
    const std::array<int64_t, 2> at = offsets_of(unit);
    for (int64_t c = 0; c < cols; c += kTile) {
      const int64_t nc = std::min(kTile, cols - c);
      for (int64_t a = 0; a < rows; a += kTile) {
        const int64_t na = std::min(kTile, rows - a);
        const T* s = from + at[0] + a * lds + c;
        T* d = to + at[1] + c * ldd + a;
#ifdef KILN_HAS_AVX512_TRANSPOSE
        if constexpr (sizeof(T) == 4) {
          if (avx512_ && na == kTile && nc == kTile) {
            tile16_avx512(reinterpret_cast<const float*>(s), lds, reinterpret_cast<float*>(d),
                          ldd);
            continue;
          }
        }
#endif
        tile_scalar(s, lds, d, ldd, na, nc);
      }
    }
  }
}

}  // namespace kiln::engine::cpu::dnnl_impl
