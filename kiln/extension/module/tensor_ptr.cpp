#include <kiln/extension/module/tensor_ptr.h>

#include <kiln/runtime/core/aligned_buffer.h>

#include <cstring>

namespace kiln::extension {

using runtime::Error;
using runtime::Result;
using runtime::ScalarType;
using runtime::Status;
using runtime::Tensor;

namespace {

// Keeps the data's owner and the tensor in one allocation; the TensorPtr aliases the tensor.
struct Holder {
  std::shared_ptr<void> owner;
  Tensor tensor;
};

Result<int64_t> numel_of(const std::vector<int64_t>& sizes) {
  auto numel = runtime::checked_numel(sizes);
  if (!numel.ok()) return numel.status().with_context("make tensor");
  return numel;
}

}  // namespace

namespace detail {

Status check_element_count(const std::vector<int64_t>& sizes, size_t count) {
  KILN_ASSIGN_OR_RETURN(int64_t numel, numel_of(sizes));
  if (static_cast<uint64_t>(numel) != count) {
    return Status(Error::InvalidArgument, "make tensor: data has " + std::to_string(count) +
                                              " elements (expected " + std::to_string(numel) +
                                              " for shape " + runtime::shape_to_string(sizes) +
                                              ")");
  }
  return Status();
}

Result<TensorPtr> wrap_tensor(ScalarType dtype, std::vector<int64_t> sizes, void* data,
                              std::shared_ptr<void> owner) {
  KILN_ASSIGN_OR_RETURN(int64_t numel, numel_of(sizes));
  (void)numel;
  auto holder = std::make_shared<Holder>();
  holder->owner = std::move(owner);
  holder->tensor = Tensor(dtype, std::move(sizes), data);
  return TensorPtr(holder, &holder->tensor);
}

}  // namespace detail

Result<TensorPtr> make_tensor_ptr(ScalarType dtype, std::vector<int64_t> sizes) {
  KILN_ASSIGN_OR_RETURN(int64_t numel, numel_of(sizes));
  const size_t element = runtime::element_size(dtype);
  if (numel > 0 && static_cast<uint64_t>(numel) > SIZE_MAX / element) {
    return Status(Error::InvalidArgument, "make tensor: shape " + runtime::shape_to_string(sizes) +
                                              " has too many bytes for this machine");
  }
  const size_t nbytes = static_cast<size_t>(numel) * element;
  auto buffer = runtime::allocate_aligned(nbytes);
  if (!buffer.ok()) return buffer.status().with_context("make tensor");
  std::shared_ptr<uint8_t> storage(std::move(buffer).get().release(), runtime::FreeDeleter());
  if (nbytes > 0) std::memset(storage.get(), 0, nbytes);
  return detail::wrap_tensor(dtype, std::move(sizes), storage.get(), storage);
}

Result<TensorPtr> from_blob(void* data, std::vector<int64_t> sizes, ScalarType dtype) {
  KILN_ASSIGN_OR_RETURN(int64_t numel, numel_of(sizes));
  if (data == nullptr && numel > 0) {
    return Status(Error::InvalidArgument, "make tensor from blob: data is null (expected " +
                                              std::to_string(numel) + " elements for shape " +
                                              runtime::shape_to_string(sizes) + ")");
  }
  return detail::wrap_tensor(dtype, std::move(sizes), data, nullptr);
}

Result<TensorPtr> clone_tensor_ptr(const Tensor& tensor) {
  std::vector<int64_t> sizes(tensor.sizes().begin(), tensor.sizes().end());
  KILN_ASSIGN_OR_RETURN(TensorPtr copy, make_tensor_ptr(tensor.dtype(), sizes));
  std::vector<uint8_t> dim_order(tensor.dim_order().begin(), tensor.dim_order().end());
  if (!dim_order.empty()) KILN_RETURN_IF_ERROR(copy->set_dim_order(std::move(dim_order)));
  if (tensor.nbytes() > 0) std::memcpy(copy->mutable_data(), tensor.data(), tensor.nbytes());
  return copy;
}

}  // namespace kiln::extension
