#include <kiln/kernels/layout.h>

#include <kiln/kernels/broadcast.h>

#include <algorithm>
#include <array>

namespace kiln::kernels::internal {

using runtime::Error;
using runtime::EValue;
using runtime::Result;
using runtime::ScalarType;
using runtime::Span;
using runtime::Status;
using runtime::Tensor;

Result<int64_t> normalize_axis(std::string_view op, std::string_view subject, int64_t axis,
                               int64_t rank) {
  if (axis < -rank || axis >= rank) {
    return invalid_argument(op, std::string(subject) + " is " + std::to_string(axis) +
                                    " (expected " + std::to_string(-rank) + ".." +
                                    std::to_string(rank - 1) + " for rank " + std::to_string(rank) +
                                    ")");
  }
  return axis < 0 ? axis + rank : axis;
}

Result<std::vector<int64_t>> normalize_axes(std::string_view op, std::string_view subject,
                                            const std::vector<int64_t>& axes, int64_t rank) {
  std::vector<int64_t> out;
  std::vector<bool> seen(static_cast<size_t>(rank), false);
  for (int64_t axis : axes) {
    KILN_ASSIGN_OR_RETURN(int64_t normalized, normalize_axis(op, subject, axis, rank));
    if (seen[static_cast<size_t>(normalized)]) {
      return invalid_argument(op, std::string(subject) + " " + runtime::shape_to_string(axes) +
                                      " repeats axis " + std::to_string(normalized) +
                                      " (expected distinct axes)");
    }
    seen[static_cast<size_t>(normalized)] = true;
    out.push_back(normalized);
  }
  return out;
}

Result<std::vector<int64_t>> read_int_list(std::string_view op, Span<EValue* const> inputs,
                                           size_t index, std::string_view name) {
  const std::string subject = "input " + std::to_string(index) + " (" + std::string(name) + ")";
  KILN_ASSIGN_OR_RETURN(const Tensor* tensor, input_tensor(op, inputs, index));
  KILN_RETURN_IF_ERROR(check_dtype(op, subject, tensor->dtype(), kIndexDtypes));
  KILN_RETURN_IF_ERROR(check_contiguous(op, subject, *tensor));
  if (tensor->dim() > 1) {
    return invalid_argument(
        op, subject + " has rank " + std::to_string(tensor->dim()) + " (expected 0 or 1)");
  }
  std::vector<int64_t> out(static_cast<size_t>(tensor->numel()));
  for (size_t i = 0; i < out.size(); ++i) {
    out[i] = tensor->dtype() == ScalarType::Int64 ? tensor->data_ptr<int64_t>()[i]
                                                  : tensor->data_ptr<int32_t>()[i];
  }
  return out;
}

Result<std::optional<std::vector<int64_t>>> int_list_input_or_attribute(
    std::string_view op, Span<EValue* const> inputs, size_t index,
    const runtime::Attributes& attributes, std::string_view name) {
  if (!is_absent(inputs, index)) {
    KILN_ASSIGN_OR_RETURN(auto values, read_int_list(op, inputs, index, name));
    return std::optional<std::vector<int64_t>>(std::move(values));
  }
  if (!attributes.has(name)) return std::optional<std::vector<int64_t>>();
  auto values = attributes.get_ints(name);
  if (!values.ok()) return values.status().with_context(action(op));
  return std::optional<std::vector<int64_t>>(std::move(*values));
}

Result<int64_t> int_attribute(std::string_view op, const runtime::Attributes& attributes,
                              std::string_view name, int64_t fallback) {
  auto value = attributes.get_int(name, fallback);
  if (!value.ok()) return value.status().with_context(action(op));
  return *value;
}

std::vector<int64_t> dense_strides(Span<const int64_t> sizes) {
  std::vector<int64_t> strides(sizes.size(), 1);
  for (size_t d = sizes.size(); d-- > 1;) strides[d - 1] = strides[d] * sizes[d];
  return strides;
}

void strided_copy(const Tensor& x, int64_t base, Span<const int64_t> out_sizes,
                  const std::vector<int64_t>& in_strides, void* out_data) {
  const auto loop = make_broadcast_loop<2>(out_sizes, {dense_strides(out_sizes), in_strides});
  (void)dispatch_bytes(x.element_size(), [&](auto tag) {
    using U = typename decltype(tag)::type;
    const U* in = x.data_ptr<U>() + base;
    U* out = static_cast<U*>(out_data);
    for_each_broadcast_row(loop, [&](int64_t out_offset, std::array<int64_t, 2> offsets,
                                     int64_t count, std::array<int64_t, 2> strides) {
      const U* row = in + offsets[1];
      U* target = out + out_offset;
      if (strides[1] == 1) {
        std::copy(row, row + count, target);
      } else {
        for (int64_t i = 0; i < count; ++i) target[i] = row[i * strides[1]];
      }
    });
    return Status();
  });
}

std::string describe_input(size_t index, Span<const int64_t> sizes) {
  return "input " + std::to_string(index) + " of shape " + runtime::shape_to_string(sizes);
}

}  // namespace kiln::kernels::internal
