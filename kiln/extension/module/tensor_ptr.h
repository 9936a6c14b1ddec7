#pragma once

#include <kiln/runtime/core/result.h>
#include <kiln/runtime/core/scalar_type.h>
#include <kiln/runtime/core/tensor.h>

#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace kiln::extension {

/// A tensor together with whatever keeps its data alive. Copying the pointer shares both; the
/// data is freed when the last copy goes away. Pass one to a method as `EValue(*tensor)`
/// (the EValue aliases the data; it must not outlive the TensorPtr).
/// Thread-safety: as `std::shared_ptr`; the tensor and its data are not synchronized.
using TensorPtr = std::shared_ptr<runtime::Tensor>;

namespace detail {
/// Wraps `data` (kept alive by `owner`) in a Static contiguous tensor. Errors: InvalidArgument
/// for a negative size or an element count that overflows.
runtime::Result<TensorPtr> wrap_tensor(runtime::ScalarType dtype, std::vector<int64_t> sizes,
                                       void* data, std::shared_ptr<void> owner);
/// InvalidArgument when `count` elements do not fill `sizes`.
runtime::Status check_element_count(const std::vector<int64_t>& sizes, size_t count);
}  // namespace detail

/// A tensor of `sizes` that owns `data` (row-major; moved in, so pass by value to copy or
/// `std::move` to hand it over). The dtype follows from `T` (float → f32, int64_t → i64,
/// bool → bool, …). Errors: InvalidArgument when `data.size()` is not the number of elements
/// of `sizes` (naming both), or for a negative size.
template <typename T>
runtime::Result<TensorPtr> make_tensor_ptr(std::vector<int64_t> sizes, std::vector<T> data) {
  KILN_RETURN_IF_ERROR(detail::check_element_count(sizes, data.size()));
  if constexpr (std::is_same_v<T, bool>) {
    // std::vector<bool> packs bits; tensors store one byte per element.
    auto bytes = std::make_shared<std::vector<uint8_t>>(data.begin(), data.end());
    return detail::wrap_tensor(runtime::ScalarType::Bool, std::move(sizes), bytes->data(), bytes);
  } else {
    auto owned = std::make_shared<std::vector<T>>(std::move(data));
    return detail::wrap_tensor(runtime::scalar_type_of<T>, std::move(sizes), owned->data(), owned);
  }
}

/// A zero-filled tensor of `dtype` and `sizes` that owns its data (64-byte aligned).
/// Errors: InvalidArgument for a negative or overflowing size; MemoryAllocationFailed with
/// the bytes asked for.
runtime::Result<TensorPtr> make_tensor_ptr(runtime::ScalarType dtype, std::vector<int64_t> sizes);

/// A tensor over memory the caller owns (zero copy). `data` must hold the tensor's bytes
/// (row-major) and must stay valid for as long as the returned pointer, any copy of it, or
/// any EValue made from it is used; ownership stays with the caller. Errors: InvalidArgument
/// for a negative or overflowing size, or a null `data` with a non-zero element count.
runtime::Result<TensorPtr> from_blob(void* data, std::vector<int64_t> sizes,
                                     runtime::ScalarType dtype);

/// A deep copy of `tensor` (same dtype, sizes and dim order) that owns its data, e.g. to keep
/// an output of `Module::execute` past the next run. Errors: MemoryAllocationFailed.
runtime::Result<TensorPtr> clone_tensor_ptr(const runtime::Tensor& tensor);

}  // namespace kiln::extension
