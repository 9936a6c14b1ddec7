#include <kiln/kernels/kernels.h>
#include <kiln/kernels/layout.h>

#include <cstring>
#include <string>
#include <vector>

namespace kiln::kernels {

using runtime::Error;
using runtime::EValue;
using runtime::Result;
using runtime::ScalarType;
using runtime::Span;
using runtime::Status;
using runtime::Tensor;

namespace {

constexpr std::string_view kOp = "Gather";

Status gather_kernel(runtime::KernelContext& context, Span<EValue* const> inputs,
                     Span<EValue* const> outputs, const runtime::Attributes& attributes) {
  KILN_RETURN_IF_ERROR(internal::check_arity(kOp, inputs, outputs, 2, 2, 1));
  KILN_ASSIGN_OR_RETURN(int64_t axis, internal::int_attribute(kOp, attributes, "axis", 0));
  KILN_ASSIGN_OR_RETURN(const Tensor* data, internal::input_tensor(kOp, inputs, 0));
  KILN_ASSIGN_OR_RETURN(const Tensor* indices, internal::input_tensor(kOp, inputs, 1));
  KILN_RETURN_IF_ERROR(check_dtype(kOp, "input 1 (indices)", indices->dtype(), kIndexDtypes));
  auto shape = gather_shape(data->sizes(), indices->sizes(), axis);
  if (!shape.ok()) return shape.status().with_context(internal::action(kOp));
  KILN_ASSIGN_OR_RETURN(EValue * out, internal::output_tensor(kOp, outputs, 0, data->dtype()));
  KILN_RETURN_IF_ERROR(internal::resize_output(context, kOp, *out, *shape));
  return gather(*data, *indices, axis, out->to_tensor());
}

const runtime::KernelRegistration kRegisterGather("Gather", gather_kernel);

// Index `i` of `indices` as int64.
int64_t index_at(const Tensor& indices, int64_t i) {
  return indices.dtype() == ScalarType::Int64 ? indices.data_ptr<int64_t>()[i]
                                              : indices.data_ptr<int32_t>()[i];
}

}  // namespace

Result<std::vector<int64_t>> gather_shape(Span<const int64_t> data, Span<const int64_t> indices,
                                          int64_t axis) {
  const auto rank = static_cast<int64_t>(data.size());
  if (axis < -rank || axis >= rank) {
    return Status(Error::InvalidArgument, "attribute 'axis' is " + std::to_string(axis) +
                                              " (expected " + std::to_string(-rank) + ".." +
                                              std::to_string(rank - 1) + " for input 0 of rank " +
                                              std::to_string(rank) + ")");
  }
  if (axis < 0) axis += rank;
  std::vector<int64_t> shape(data.begin(), data.begin() + axis);
  shape.insert(shape.end(), indices.begin(), indices.end());
  shape.insert(shape.end(), data.begin() + axis + 1, data.end());
  return shape;
}

Status gather(const Tensor& data, const Tensor& indices, int64_t axis, Tensor& out) {
  KILN_RETURN_IF_ERROR(check_dtype(kOp, "input 1 (indices)", indices.dtype(), kIndexDtypes));
  auto shape = gather_shape(data.sizes(), indices.sizes(), axis);
  if (!shape.ok()) return shape.status().with_context(internal::action(kOp));
  if (axis < 0) axis += data.dim();
  KILN_RETURN_IF_ERROR(internal::check_contiguous(kOp, "input 0", data));
  KILN_RETURN_IF_ERROR(internal::check_contiguous(kOp, "input 1", indices));
  KILN_RETURN_IF_ERROR(internal::check_output(kOp, out, data.dtype(), *shape));
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
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= data.size(d);
  for (int64_t d = axis + 1; d < data.dim(); ++d) inner *= data.size(d);
  const size_t block = static_cast<size_t>(inner) * data.element_size();
  const auto* source = static_cast<const uint8_t*>(data.data());
  auto* target = static_cast<uint8_t*>(out.mutable_data());
  if (block == 0) return Status();
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < indices.numel(); ++i) {
      int64_t index = index_at(indices, i);
      if (index < 0) index += dim;
      std::memcpy(target, source + static_cast<size_t>(o * dim + index) * block, block);
      target += block;
    }
  }
  return Status();
}

}  // namespace kiln::kernels
