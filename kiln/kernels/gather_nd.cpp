#include <kiln/kernels/index_ops.h>
#include <kiln/kernels/index_util.h>
#include <kiln/kernels/layout.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

namespace kiln::kernels {

using runtime::Error;
using runtime::EValue;
using runtime::Result;
using runtime::Span;
using runtime::Status;
using runtime::Tensor;

namespace {

constexpr std::string_view kOp = "GatherND";

Status gather_nd_kernel(runtime::KernelContext& context, Span<EValue* const> inputs,
                        Span<EValue* const> outputs, const runtime::Attributes& attributes) {
  KILN_RETURN_IF_ERROR(internal::check_arity(kOp, inputs, outputs, 2, 2, 1));
  KILN_ASSIGN_OR_RETURN(int64_t batch_dims,
                        internal::int_attribute(kOp, attributes, "batch_dims", 0));
  KILN_ASSIGN_OR_RETURN(const Tensor* data, internal::input_tensor(kOp, inputs, 0));
  KILN_ASSIGN_OR_RETURN(const Tensor* indices, internal::input_tensor(kOp, inputs, 1));
  KILN_RETURN_IF_ERROR(check_dtype(kOp, "input 1 (indices)", indices->dtype(), kIndexDtypes));
  auto shape = gather_nd_shape(data->sizes(), indices->sizes(), batch_dims);
  if (!shape.ok()) return shape.status().with_context(internal::action(kOp));
  KILN_ASSIGN_OR_RETURN(EValue * out, internal::output_tensor(kOp, outputs, 0, data->dtype()));
  KILN_RETURN_IF_ERROR(internal::resize_output(context, kOp, *out, *shape));
  return gather_nd(*data, *indices, batch_dims, out->to_tensor());
}

const runtime::KernelRegistration kRegisterGatherND("GatherND", gather_nd_kernel);

}  // namespace

Result<std::vector<int64_t>> gather_nd_shape(Span<const int64_t> data, Span<const int64_t> indices,
                                             int64_t batch_dims) {
  const auto r = static_cast<int64_t>(data.size());
  const auto q = static_cast<int64_t>(indices.size());
  if (r < 1 || q < 1) {
    return Status(Error::InvalidArgument, "input 0 (data) has rank " + std::to_string(r) +
                                              " and input 1 (indices) rank " + std::to_string(q) +
                                              " (expected both at least 1)");
  }
  if (batch_dims < 0 || batch_dims >= std::min(r, q)) {
    return Status(Error::InvalidArgument,
                  "attribute 'batch_dims' is " + std::to_string(batch_dims) + " (expected 0.." +
                      std::to_string(std::min(r, q) - 1) + " for data of rank " +
                      std::to_string(r) + " and indices of rank " + std::to_string(q) + ")");
  }
  const auto b = static_cast<size_t>(batch_dims);
  for (size_t d = 0; d < b; ++d) {
    if (data[d] != indices[d]) {
      return Status(Error::InvalidArgument,
                    "input 1 (indices) of shape " + runtime::shape_to_string(indices) +
                        " differs from input 0 (data) of shape " + runtime::shape_to_string(data) +
                        " in batch dimension " + std::to_string(d) +
                        " (expected equal leading batch_dims = " + std::to_string(batch_dims) +
                        " sizes)");
    }
  }
  const int64_t k = indices.back();
  if (k < 1 || k > r - batch_dims) {
    return Status(Error::InvalidArgument,
                  "input 1 (indices) has last dimension " + std::to_string(k) + " (expected 1.." +
                      std::to_string(r - batch_dims) + ", the rank of input 0 (data) " +
                      std::to_string(r) + " less batch_dims " + std::to_string(batch_dims) + ")");
  }
  std::vector<int64_t> shape(indices.begin(), indices.end() - 1);
  shape.insert(shape.end(), data.begin() + batch_dims + k, data.end());
  return shape;
}

Status gather_nd(const Tensor& data, const Tensor& indices, int64_t batch_dims, Tensor& out) {
  KILN_RETURN_IF_ERROR(check_dtype(kOp, "input 1 (indices)", indices.dtype(), kIndexDtypes));
  auto shape = gather_nd_shape(data.sizes(), indices.sizes(), batch_dims);
  if (!shape.ok()) return shape.status().with_context(internal::action(kOp));
  KILN_RETURN_IF_ERROR(internal::check_contiguous(kOp, "input 0", data));
  KILN_RETURN_IF_ERROR(internal::check_contiguous(kOp, "input 1", indices));
  KILN_RETURN_IF_ERROR(internal::check_output(kOp, out, data.dtype(), *shape));
  const auto b = static_cast<size_t>(batch_dims);
  const auto k = static_cast<size_t>(indices.sizes().back());
  const auto strides = internal::dense_strides(data.sizes());
  for (int64_t i = 0; i < indices.numel(); ++i) {
    const size_t d = b + static_cast<size_t>(i) % k;
    const int64_t dim = data.size(static_cast<int64_t>(d));
    KILN_RETURN_IF_ERROR(internal::check_index(
        kOp, "input 1 (indices)", internal::index_at(indices, i), i, -dim, dim - 1,
        "for dimension " + std::to_string(d) + " of input 0 (data) of size " +
            std::to_string(dim)));
  }
  const int64_t batches = internal::product(data.sizes(), 0, b);
  const int64_t tuples = indices.numel() / static_cast<int64_t>(k) / std::max<int64_t>(batches, 1);
  const int64_t batch_stride = internal::product(data.sizes(), b, data.sizes().size());
  const int64_t slice = internal::product(data.sizes(), b + k, data.sizes().size());
  const size_t block = static_cast<size_t>(slice) * data.element_size();
  const auto* source = static_cast<const uint8_t*>(data.data());
  auto* target = static_cast<uint8_t*>(out.mutable_data());
  if (block == 0) return Status();
  int64_t position = 0;
  for (int64_t batch = 0; batch < batches; ++batch) {
    for (int64_t t = 0; t < tuples; ++t) {
      int64_t offset = batch * batch_stride;
      for (size_t j = 0; j < k; ++j, ++position) {
        int64_t index = internal::index_at(indices, position);
        if (index < 0) index += data.size(static_cast<int64_t>(b + j));
        offset += index * strides[b + j];
      }
      std::memcpy(target, source + static_cast<size_t>(offset) * data.element_size(), block);
      target += block;
    }
  }
  return Status();
}

}  // namespace kiln::kernels
