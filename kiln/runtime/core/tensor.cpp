#include <kiln/runtime/core/tensor.h>

#include <limits>
#include <numeric>

namespace kiln::runtime {

std::string_view to_string(ShapeDynamism dynamism) {
  switch (dynamism) {
    case ShapeDynamism::Static: return "static";
    case ShapeDynamism::Bounded: return "bounded";
    case ShapeDynamism::Unbounded: return "unbounded";
  }
  return "invalid";
}

std::string shape_to_string(Span<const int64_t> sizes) {
  std::string out = "[";
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (i > 0) out += ", ";
    out += std::to_string(sizes[i]);
  }
  return out + "]";
}

Result<int64_t> checked_numel(Span<const int64_t> sizes) {
  int64_t numel = 1;
  for (int64_t size : sizes) {
    if (size < 0) {
      return Status(Error::InvalidArgument, "shape " + shape_to_string(sizes) +
                                                " has a negative size (expected sizes >= 0)");
    }
    if (size != 0 && numel > std::numeric_limits<int64_t>::max() / size) {
      return Status(Error::InvalidArgument,
                    "shape " + shape_to_string(sizes) + " has more elements than int64 holds");
    }
    numel *= size;
  }
  return numel;
}

Tensor::Tensor(ScalarType dtype, std::vector<int64_t> sizes, void* data, ShapeDynamism dynamism,
               size_t capacity_bytes)
    : dtype_(dtype), sizes_(std::move(sizes)), data_(data), dynamism_(dynamism) {
  dim_order_.resize(sizes_.size());
  std::iota(dim_order_.begin(), dim_order_.end(), uint8_t{0});
  update_strides();
  capacity_bytes_ = capacity_bytes == 0 ? nbytes() : capacity_bytes;
}

bool Tensor::is_contiguous() const {
  for (size_t i = 0; i < dim_order_.size(); ++i) {
    if (dim_order_[i] != i) return false;
  }
  return true;
}

void Tensor::set_data(void* data, size_t capacity_bytes) {
  data_ = data;
  capacity_bytes_ = capacity_bytes;
}

Status Tensor::set_dim_order(std::vector<uint8_t> dim_order) {
  std::vector<bool> seen(sizes_.size(), false);
  if (dim_order.size() != sizes_.size()) {
    return Status(Error::InvalidArgument, "set dim order: has " + std::to_string(dim_order.size()) +
                                              " entries (expected " +
                                              std::to_string(sizes_.size()) + ")");
  }
  for (uint8_t d : dim_order) {
    if (d >= sizes_.size() || seen[d]) {
      return Status(Error::InvalidArgument,
                    "set dim order: not a permutation of 0.." + std::to_string(sizes_.size() - 1));
    }
    seen[d] = true;
  }
  dim_order_ = std::move(dim_order);
  update_strides();
  return Status();
}

void Tensor::update_strides() {
  strides_.resize(sizes_.size());
  int64_t stride = 1;
  numel_ = 1;
  for (size_t i = dim_order_.size(); i-- > 0;) {
    size_t d = dim_order_[i];
    strides_[d] = stride;
    stride *= sizes_[d];
  }
  for (int64_t size : sizes_) numel_ *= size;
}

Status Tensor::resize(Span<const int64_t> new_sizes) {
  if (dynamism_ == ShapeDynamism::Unbounded && new_sizes.size() != sizes_.size()) {
    // Unbounded tensors (unknown shapes at export) may change rank; this allocates.
    auto numel = checked_numel(new_sizes);
    if (!numel.ok()) return numel.status().with_context("resize tensor");
    if (static_cast<size_t>(*numel) * element_size() > capacity_bytes_) {
      return Status(Error::InvalidArgument, "resize tensor: shape " +
                                                shape_to_string(new_sizes) +
                                                " exceeds the tensor's capacity");
    }
    sizes_.assign(new_sizes.begin(), new_sizes.end());
    dim_order_.resize(sizes_.size());
    std::iota(dim_order_.begin(), dim_order_.end(), uint8_t{0});
    update_strides();
    return Status();
  }
  if (new_sizes.size() != sizes_.size()) {
    return Status(Error::InvalidArgument,
                  "resize tensor: new shape " + shape_to_string(new_sizes) + " has rank " +
                      std::to_string(new_sizes.size()) + " (expected rank " +
                      std::to_string(sizes_.size()) + ", current shape " +
                      shape_to_string(sizes_) + ")");
  }
  bool same = std::equal(new_sizes.begin(), new_sizes.end(), sizes_.begin());
  if (same) return Status();
  if (dynamism_ == ShapeDynamism::Static) {
    return Status(Error::InvalidArgument, "resize static tensor: shape " +
                                              shape_to_string(new_sizes) + " differs from " +
                                              shape_to_string(sizes_) +
                                              " (expected the same shape)");
  }
  auto numel = checked_numel(new_sizes);
  if (!numel.ok()) return numel.status().with_context("resize tensor");
  size_t needed = static_cast<size_t>(*numel) * element_size();
  if (needed > capacity_bytes_) {
    return Status(Error::InvalidArgument,
                  "resize tensor: shape " + shape_to_string(new_sizes) + " needs " +
                      std::to_string(needed) + " bytes, " + std::to_string(capacity_bytes_) +
                      " available (expected a shape within the tensor's upper bound)");
  }
  std::copy(new_sizes.begin(), new_sizes.end(), sizes_.begin());
  update_strides();
  return Status();
}

}  // namespace kiln::runtime
