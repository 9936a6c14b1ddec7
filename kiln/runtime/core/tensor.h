#pragma once

#include <kiln/runtime/core/result.h>
#include <kiln/runtime/core/scalar_type.h>
#include <kiln/runtime/core/span.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace kiln::runtime {

/// How a tensor's shape may change after load. Stored in program files: never renumber.
enum class ShapeDynamism : uint8_t {
  Static = 0,     ///< Sizes never change; `resize` accepts only the same sizes.
  Bounded = 1,    ///< Sizes may change within a capacity fixed at load (an upper bound).
  Unbounded = 2,  ///< Sizes may change freely; the owner reallocates storage (see Method).
};

std::string_view to_string(ShapeDynamism dynamism);

/// Formats sizes as "[1, 3, 224, 224]".
std::string shape_to_string(Span<const int64_t> sizes);

/// Number of elements for `sizes`, or an InvalidArgument error for a negative size or an
/// element count that overflows int64.
Result<int64_t> checked_numel(Span<const int64_t> sizes);

/// A tensor's metadata and a non-owning pointer to its data. Tensors are dense; `dim_order`
/// gives the order of dimensions in memory from outermost to innermost (identity for
/// row-major), and strides follow from sizes and dim order.
///
/// Ownership: the data is owned by someone else (planned memory of a Method, a constant
/// segment, a TensorPtr); it must outlive every use of this Tensor. Copying a Tensor copies the
/// metadata and aliases the data. Thread-safety: a value type; not synchronized.
class Tensor {
 public:
  Tensor() = default;
  /// A contiguous row-major tensor over `data`, whose capacity is `capacity_bytes` (0 means
  /// exactly `nbytes()` of `sizes`). Sizes must be non-negative.
  Tensor(ScalarType dtype, std::vector<int64_t> sizes, void* data,
         ShapeDynamism dynamism = ShapeDynamism::Static, size_t capacity_bytes = 0);

  ScalarType dtype() const { return dtype_; }
  int64_t dim() const { return static_cast<int64_t>(sizes_.size()); }
  Span<const int64_t> sizes() const { return sizes_; }
  int64_t size(int64_t d) const { return sizes_[static_cast<size_t>(d)]; }
  Span<const int64_t> strides() const { return strides_; }
  Span<const uint8_t> dim_order() const { return dim_order_; }
  int64_t numel() const { return numel_; }
  size_t element_size() const { return runtime::element_size(dtype_); }
  size_t nbytes() const { return static_cast<size_t>(numel_) * element_size(); }
  /// Bytes available at `data()`; `resize` may grow the tensor up to this.
  size_t capacity_bytes() const { return capacity_bytes_; }
  ShapeDynamism shape_dynamism() const { return dynamism_; }
  bool is_contiguous() const;

  const void* data() const { return data_; }
  void* mutable_data() { return data_; }
  template <typename T>
  const T* data_ptr() const { return static_cast<const T*>(data_); }
  template <typename T>
  T* mutable_data_ptr() { return static_cast<T*>(data_); }

  /// Points the tensor at other storage of `capacity_bytes` bytes (the owner's business).
  void set_data(void* data, size_t capacity_bytes);
  /// Sets the dim order (a permutation of 0..dim-1) and recomputes strides.
  Status set_dim_order(std::vector<uint8_t> dim_order);

  /// Changes the sizes. A Static tensor accepts only its current sizes; Bounded tensors accept
  /// any sizes of the same rank whose bytes fit in `capacity_bytes()`; Unbounded tensors accept
  /// any sizes, of any rank, that fit (their owner grows the capacity first). Errors:
  /// InvalidArgument naming the sizes given and what was expected. Does not allocate when the
  /// rank is unchanged.
  Status resize(Span<const int64_t> new_sizes);

 private:
  void update_strides();

  ScalarType dtype_ = ScalarType::Float32;
  std::vector<int64_t> sizes_;
  std::vector<int64_t> strides_;
  std::vector<uint8_t> dim_order_;
  int64_t numel_ = 1;
  void* data_ = nullptr;
  size_t capacity_bytes_ = 0;
  ShapeDynamism dynamism_ = ShapeDynamism::Static;
};

}  // namespace kiln::runtime
