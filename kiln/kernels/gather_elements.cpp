#include <kiln/kernels/kernels.h>
#include <kiln/kernels/layout.h>

#include <string>
#include <vector>

namespace kiln::kernels {

using runtime::EValue;
using runtime::ScalarType;
using runtime::Span;
using runtime::Status;
using runtime::Tensor;

namespace {

constexpr std::string_view kOp = "GatherElements";

Status gather_elements_kernel(runtime::KernelContext& context, Span<EValue* const> inputs,
                              Span<EValue* const> outputs, const runtime::Attributes& attributes) {
  KILN_RETURN_IF_ERROR(internal::check_arity(kOp, inputs, outputs, 2, 2, 1));
  KILN_ASSIGN_OR_RETURN(int64_t axis, internal::int_attribute(kOp, attributes, "axis", 0));
  KILN_ASSIGN_OR_RETURN(const Tensor* data, internal::input_tensor(kOp, inputs, 0));
  KILN_ASSIGN_OR_RETURN(const Tensor* indices, internal::input_tensor(kOp, inputs, 1));
  KILN_RETURN_IF_ERROR(check_dtype(kOp, "input 1 (indices)", indices->dtype(), kIndexDtypes));
  KILN_ASSIGN_OR_RETURN(axis, internal::normalize_axis(kOp, "attribute 'axis'", axis, data->dim()));
  KILN_ASSIGN_OR_RETURN(EValue * out, internal::output_tensor(kOp, outputs, 0, data->dtype()));
  KILN_RETURN_IF_ERROR(internal::resize_output(context, kOp, *out, indices->sizes()));
  return gather_elements(*data, *indices, axis, out->to_tensor());
}

const runtime::KernelRegistration kRegisterGatherElements("GatherElements", gather_elements_kernel);

int64_t index_at(const Tensor& indices, int64_t i) {
  return indices.dtype() == ScalarType::Int64 ? indices.data_ptr<int64_t>()[i]
                                              : indices.data_ptr<int32_t>()[i];
}

}  // namespace

Status gather_elements(const Tensor& data, const Tensor& indices, int64_t axis, Tensor& out) {
  KILN_RETURN_IF_ERROR(check_dtype(kOp, "input 1 (indices)", indices.dtype(), kIndexDtypes));
  KILN_ASSIGN_OR_RETURN(axis, internal::normalize_axis(kOp, "attribute 'axis'", axis, data.dim()));
  KILN_RETURN_IF_ERROR(internal::check_contiguous(kOp, "input 0", data));
  KILN_RETURN_IF_ERROR(internal::check_contiguous(kOp, "input 1", indices));
  KILN_RETURN_IF_ERROR(internal::check_output(kOp, out, data.dtype(), indices.sizes()));
  bool fits = indices.dim() == data.dim();
  for (int64_t d = 0; fits && d < data.dim(); ++d) {
    fits = d == axis || indices.size(d) <= data.size(d);
  }
  if (!fits) {
    return internal::invalid_argument(
        kOp, "input 1 (indices) has shape " + runtime::shape_to_string(indices.sizes()) +
                 " (expected rank " + std::to_string(data.dim()) +
                 " and sizes no larger than those of " + internal::describe_input(0, data.sizes()) +
                 " outside axis " + std::to_string(axis) + ")");
  }
  const int64_t dim = data.size(axis);
  for (int64_t i = 0; i < indices.numel(); ++i) {
    const int64_t index = index_at(indices, i);
    if (index < -dim || index >= dim) {
      return internal::invalid_argument(
          kOp, "input 1 (indices) has " + std::to_string(index) + " at element " +
                   std::to_string(i) + " (expected " + std::to_string(-dim) + ".." +
                   std::to_string(dim - 1) + " for axis " + std::to_string(axis) + " of size " +
                   std::to_string(dim) + ")");
    }
  }
  const auto data_strides = internal::dense_strides(data.sizes());
  const auto rank = static_cast<size_t>(data.dim());
  return internal::dispatch_bytes(data.element_size(), [&](auto tag) {
    using U = typename decltype(tag)::type;
    const U* source = data.data_ptr<U>();
    U* target = out.mutable_data_ptr<U>();
    std::vector<int64_t> position(rank, 0);
    for (int64_t i = 0; i < indices.numel(); ++i) {
      int64_t index = index_at(indices, i);
      if (index < 0) index += dim;
      int64_t offset = 0;
      for (size_t d = 0; d < rank; ++d) {
        offset += (static_cast<int64_t>(d) == axis ? index : position[d]) * data_strides[d];
      }
      target[i] = source[offset];
      // Advance the row-major position over `indices`' shape.
      for (size_t d = rank; d-- > 0;) {
        if (++position[d] < indices.size(static_cast<int64_t>(d))) break;
        position[d] = 0;
      }
    }
    return Status();
  });
}

}  // namespace kiln::kernels
