#pragma once

// Test helpers for the kernel tests: tensors that own their storage, seeded random data and
// simple sequences, multi-index loops for naive reference implementations, a KernelContext that
// resizes through Tensor::resize, and an error expectation.

#include <kiln/kernels/dispatch.h>
#include <kiln/runtime/core/evalue.h>
#include <kiln/runtime/core/scalar_type.h>
#include <kiln/runtime/core/tensor.h>
#include <kiln/runtime/executor/kernel_registry.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace kiln::kernels::test_helpers {

using runtime::ScalarType;
using runtime::ShapeDynamism;
using runtime::Tensor;

/// A tensor together with the bytes it points at. Moving keeps the tensor valid (the vector's
/// buffer moves with it); copying is disabled so two owners never alias by accident.
class OwnedTensor {
 public:
  /// A static tensor of `sizes` holding `values` (row-major).
  template <typename T>
  static OwnedTensor of(std::vector<int64_t> sizes, const std::vector<T>& values) {
    OwnedTensor owned(runtime::scalar_type_of<T>, std::move(sizes), ShapeDynamism::Static, 0);
    if constexpr (std::is_same_v<T, bool>) {  // std::vector<bool> has no data()
      for (size_t i = 0; i < values.size(); ++i) owned.storage_[i] = values[i] ? 1 : 0;
    } else if (!values.empty()) {
      std::memcpy(owned.storage_.data(), values.data(), values.size() * sizeof(T));
    }
    return owned;
  }

  /// A static f16 (or bf16) tensor holding `values` rounded from float.
  static OwnedTensor half_of(ScalarType dtype, std::vector<int64_t> sizes,
                             const std::vector<float>& values) {
    OwnedTensor owned(dtype, std::move(sizes), ShapeDynamism::Static, 0);
    auto* bits = reinterpret_cast<uint16_t*>(owned.storage_.data());
    for (size_t i = 0; i < values.size(); ++i) {
      bits[i] = dtype == ScalarType::Float16 ? runtime::float_to_half(values[i])
                                             : runtime::float_to_bfloat16(values[i]);
    }
    return owned;
  }

  /// A static zero-filled tensor: the output of a typed function, shaped by the test.
  static OwnedTensor zeros(ScalarType dtype, std::vector<int64_t> sizes) {
    return OwnedTensor(dtype, std::move(sizes), ShapeDynamism::Static, 0);
  }

  /// A bounded tensor of `rank` zero sizes and room for `capacity` elements: the output of
  /// an adapter, which resizes it.
  static OwnedTensor resizable(ScalarType dtype, size_t rank, size_t capacity = 4096) {
    return OwnedTensor(dtype, std::vector<int64_t>(rank, 0), ShapeDynamism::Bounded,
                       capacity * runtime::element_size(dtype));
  }

  OwnedTensor(OwnedTensor&&) = default;
  OwnedTensor& operator=(OwnedTensor&&) = default;
  OwnedTensor(const OwnedTensor&) = delete;
  OwnedTensor& operator=(const OwnedTensor&) = delete;

  Tensor& tensor() { return tensor_; }
  const Tensor& tensor() const { return tensor_; }

  /// The first `numel` elements of the storage as `T` (reads `tensor`'s sizes by default).
  template <typename T>
  std::vector<T> values(int64_t numel = -1) const {
    if (numel < 0) numel = tensor_.numel();
    std::vector<T> out(static_cast<size_t>(numel));
    if constexpr (std::is_same_v<T, bool>) {
      for (size_t i = 0; i < out.size(); ++i) out[i] = storage_[i] != 0;
    } else if (!out.empty()) {
      std::memcpy(out.data(), storage_.data(), out.size() * sizeof(T));
    }
    return out;
  }

  /// The elements of an f16 or bf16 tensor as float.
  std::vector<float> half_values() const {
    std::vector<float> out;
    for (uint16_t bits : values<uint16_t>()) {
      out.push_back(tensor_.dtype() == ScalarType::Float16 ? runtime::half_to_float(bits)
                                                           : runtime::bfloat16_to_float(bits));
    }
    return out;
  }

 private:
  OwnedTensor(ScalarType dtype, std::vector<int64_t> sizes, ShapeDynamism dynamism,
              size_t capacity_bytes) {
    int64_t numel = 1;
    for (int64_t size : sizes) numel *= size;
    const size_t bytes =
        std::max(capacity_bytes, static_cast<size_t>(numel) * runtime::element_size(dtype));
    storage_.assign(std::max<size_t>(bytes, 1), 0);
    tensor_ = Tensor(dtype, std::move(sizes), storage_.data(), dynamism, capacity_bytes);
  }

  std::vector<uint8_t> storage_;
  Tensor tensor_;
};

/// `count` values uniform in [lo, hi) from a generator seeded with `seed`.
template <typename T = float>
std::vector<T> random_values(size_t count, uint32_t seed, double lo = -1.0, double hi = 1.0) {
  std::mt19937 generator(seed);
  std::uniform_real_distribution<double> distribution(lo, hi);
  std::vector<T> out(count);
  for (T& value : out) value = static_cast<T>(distribution(generator));
  return out;
}

/// Number of elements of `sizes`.
inline int64_t numel_of(const std::vector<int64_t>& sizes) {
  int64_t numel = 1;
  for (int64_t size : sizes) numel *= size;
  return numel;
}

/// `n` consecutive floats from `start`: start, start + 1, ...
inline std::vector<float> iota(int64_t n, float start = 0) {
  std::vector<float> values(static_cast<size_t>(n));
  for (size_t i = 0; i < values.size(); ++i) values[i] = start + static_cast<float>(i);
  return values;
}

/// `values` widened to double, the input of the double-precision reference loops.
template <typename T>
std::vector<double> to_double(const std::vector<T>& values) {
  return std::vector<double>(values.begin(), values.end());
}

/// Every multi-index of `sizes` in row-major order (none when a size is 0).
inline std::vector<std::vector<int64_t>> indices_of(const std::vector<int64_t>& sizes) {
  std::vector<std::vector<int64_t>> all;
  if (numel_of(sizes) == 0) return all;
  std::vector<int64_t> at(sizes.size(), 0);
  while (true) {
    all.push_back(at);
    int d = static_cast<int>(sizes.size()) - 1;
    for (; d >= 0; --d) {
      if (++at[d] < sizes[d]) break;
      at[d] = 0;
    }
    if (d < 0) return all;
  }
}

/// The row-major flat index of multi-index `at` in a tensor of `sizes`.
inline int64_t flat_index(const std::vector<int64_t>& sizes, const std::vector<int64_t>& at) {
  int64_t index = 0;
  for (size_t d = 0; d < sizes.size(); ++d) index = index * sizes[d] + at[d];
  return index;
}

/// A KernelContext whose resize calls Tensor::resize, as the executor does for planned tensors.
inline runtime::KernelContext resizing_context(std::string_view op) {
  return runtime::KernelContext(op, [](runtime::EValue& value, runtime::Span<const int64_t> sizes) {
    return value.to_tensor().resize(sizes);
  });
}

/// Runs registered op `op` on `inputs`, writing `outputs`, as the executor would.
inline runtime::Status run_kernel(std::string_view op, std::vector<runtime::EValue*> inputs,
                                  std::vector<runtime::EValue*> outputs,
                                  const runtime::Attributes& attributes = runtime::Attributes()) {
  runtime::KernelFunction kernel = runtime::get_kernel(op);
  if (kernel == nullptr) return runtime::Status(runtime::Error::OperatorMissing, std::string(op));
  auto context = resizing_context(op);
  return kernel(context, inputs, outputs, attributes);
}

/// The sizes of a tensor EValue, as a vector.
inline std::vector<int64_t> sizes_of(const runtime::EValue& value) {
  auto sizes = value.to_tensor().sizes();
  return std::vector<int64_t>(sizes.begin(), sizes.end());
}

/// Expects `status` to carry `code` and a message containing `substring` (the culprit's name).
inline void expect_error(const runtime::Status& status, runtime::Error code,
                         const std::string& substring) {
  EXPECT_EQ(status.code(), code) << status.message();
  EXPECT_THAT(std::string(status.message()), ::testing::HasSubstr(substring));
}

/// Attributes from name/value pairs: `attrs({{"axis", 1}})`.
inline runtime::Attributes attrs(std::vector<std::pair<std::string, runtime::EValue>> entries) {
  return runtime::Attributes(std::move(entries));
}

}  // namespace kiln::kernels::test_helpers
