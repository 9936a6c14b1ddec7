#pragma once

// Helpers shared by the normalization kernels (layer_norm.cpp, batch_norm.cpp, ...) and the
// misc ops with float attributes. Internal to kiln/kernels.

#include <kiln/kernels/adapter.h>
#include <kiln/kernels/broadcast.h>
#include <kiln/kernels/dispatch.h>
#include <kiln/kernels/layout.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::kernels::internal {

/// Reads double attribute `name` (an int attribute reads too), prefixing the op to any error.
inline runtime::Result<double> double_attribute(std::string_view op,
                                                const runtime::Attributes& attributes,
                                                std::string_view name, double fallback) {
  auto value = attributes.get_double(name, fallback);
  if (!value.ok()) return value.status().with_context(action(op));
  return *value;
}

/// Checks the `stash_type` attribute of LayerNormalization and RMSNormalization: ONNX's FLOAT
/// (1, the default) or DOUBLE (11). The statistics are computed in double either way, which is
/// at least as precise as either. Errors: NotSupported naming the value.
inline runtime::Status check_stash_type(std::string_view op,
                                        const runtime::Attributes& attributes) {
  constexpr int64_t kStashFloat = 1;
  constexpr int64_t kStashDouble = 11;
  KILN_ASSIGN_OR_RETURN(int64_t stash, int_attribute(op, attributes, "stash_type", kStashFloat));
  if (stash == kStashFloat || stash == kStashDouble) return runtime::Status();
  return runtime::Status(runtime::Error::NotSupported, action(op) + ": attribute 'stash_type' is " +
                                                           std::to_string(stash) +
                                                           " (expected 1 (float) or 11 (double))");
}

/// Element `i` of a float tensor (f32, f64, f16 or bf16) as double. Precondition: the dtype
/// was checked.
inline double read_float(const runtime::Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case runtime::ScalarType::Float64:
      return t.data_ptr<double>()[i];
    case runtime::ScalarType::Float16:
      return load(t.data_ptr<Half>()[i]);
    case runtime::ScalarType::BFloat16:
      return load(t.data_ptr<BFloat16>()[i]);
    default:
      return t.data_ptr<float>()[i];
  }
}

/// Writes `value` to element `i` of a float tensor (f32, f64, f16 or bf16), rounding once.
/// Precondition: the dtype was checked.
inline void write_float(runtime::Tensor& t, int64_t i, double value) {
  switch (t.dtype()) {
    case runtime::ScalarType::Float64:
      t.mutable_data_ptr<double>()[i] = value;
      break;
    case runtime::ScalarType::Float16:
      t.mutable_data_ptr<Half>()[i] = store<Half>(static_cast<float>(value));
      break;
    case runtime::ScalarType::BFloat16:
      t.mutable_data_ptr<BFloat16>()[i] = store<BFloat16>(static_cast<float>(value));
      break;
    default:
      t.mutable_data_ptr<float>()[i] = static_cast<float>(value);
      break;
  }
}

/// For each element of a dense tensor of shape `to` (row-major order), the offset
/// sum(index_d * strides[d]) (one stride per dimension of `to`, which may be 0).
inline std::vector<int64_t> strided_offsets(const std::vector<int64_t>& strides,
                                            runtime::Span<const int64_t> to) {
  int64_t numel = 1;
  for (int64_t size : to) numel *= size;
  std::vector<int64_t> offsets(static_cast<size_t>(numel), 0);
  std::vector<int64_t> index(to.size(), 0);
  int64_t offset = 0;
  for (int64_t i = 0; i < numel; ++i) {
    offsets[static_cast<size_t>(i)] = offset;
    // Odometer increment: the last dimension moves fastest.
    for (size_t d = to.size(); d-- > 0;) {
      if (++index[d] < to[d]) {
        offset += strides[d];
        break;
      }
      offset -= strides[d] * (to[d] - 1);
      index[d] = 0;
    }
  }
  return offsets;
}

/// For each element of a dense tensor of shape `to` (row-major order), the offset of the
/// element of a tensor of shape `from` that broadcasts onto it.
/// Precondition: `broadcasts_to(from, to)`.
inline std::vector<int64_t> broadcast_offsets(runtime::Span<const int64_t> from,
                                              runtime::Span<const int64_t> to) {
  return strided_offsets(broadcast_strides(from, to), to);
}

/// InvalidArgument "... <subject> has shape [3] (expected one that broadcasts to [2, 4])"
/// unless `from` broadcasts unidirectionally to `to`.
inline runtime::Status check_broadcasts_to(std::string_view op, std::string_view subject,
                                           runtime::Span<const int64_t> from,
                                           runtime::Span<const int64_t> to) {
  if (broadcasts_to(from, to)) return runtime::Status();
  return invalid_argument(
      op, std::string(subject) + " has shape " + runtime::shape_to_string(from) +
              " (expected one that broadcasts to " + runtime::shape_to_string(to) + ")");
}

/// Output `index` when it is present and wanted (an optional output the caller will write),
/// checked to be a tensor of a float dtype; null when `outputs` has no entry `index`.
inline runtime::Result<runtime::EValue*> optional_float_output(
    std::string_view op, runtime::Span<runtime::EValue* const> outputs, size_t index) {
  if (index >= outputs.size()) return static_cast<runtime::EValue*>(nullptr);
  runtime::EValue* value = outputs[index];
  const std::string subject = "output " + std::to_string(index);
  if (!value->is_tensor()) {
    return runtime::Status(runtime::Error::InvalidType,
                           action(op) + ": " + subject + " is " +
                               std::string(runtime::to_string(value->tag())) +
                               " (expected tensor)");
  }
  KILN_RETURN_IF_ERROR(check_dtype(op, subject, value->to_tensor().dtype(), kFloatDtypes));
  return value;
}

}  // namespace kiln::kernels::internal
