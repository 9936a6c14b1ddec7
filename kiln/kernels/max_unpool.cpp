// MaxUnpool: scatters X into a zero tensor at the flat positions MaxPool's Indices recorded.
// With an explicit output_shape the unpooled result is padded with zeros at the end of each
// axis, as ONNX's reference and its test cases do.

#include <kiln/kernels/adapter.h>
#include <kiln/kernels/conv_geometry.h>
#include <kiln/kernels/dispatch.h>
#include <kiln/kernels/kernels.h>
#include <kiln/kernels/layout.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <string>
#include <vector>

namespace kiln::kernels {

using runtime::EValue;
using runtime::Result;
using runtime::ScalarType;
using runtime::Span;
using runtime::Status;
using runtime::Tensor;

namespace {

constexpr std::string_view kOp = "MaxUnpool";

// The default output shape [N, C, (in - 1) * stride + k - pads...].
Result<std::vector<int64_t>> default_shape(Span<const int64_t> x, const MaxUnpoolOptions& options) {
  KILN_RETURN_IF_ERROR(internal::check_spatial_rank(kOp, "input 0", x));
  const size_t rank = x.size() - 2;
  if (options.kernel_shape.empty()) {
    return internal::invalid_argument(kOp, "attribute 'kernel_shape' is missing (expected " +
                                               std::to_string(rank) + " window sizes)");
  }
  KILN_ASSIGN_OR_RETURN(
      auto kernel, internal::axis_values(kOp, "kernel_shape", options.kernel_shape, rank, 1, 1));
  KILN_ASSIGN_OR_RETURN(auto strides,
                        internal::axis_values(kOp, "strides", options.strides, rank, 1, 1));
  KILN_ASSIGN_OR_RETURN(auto pads,
                        internal::axis_values(kOp, "pads", options.pads, 2 * rank, 0, 0));
  std::vector<int64_t> shape = {x[0], x[1]};
  for (size_t axis = 0; axis < rank; ++axis) {
    const int64_t size =
        (x[2 + axis] - 1) * strides[axis] + kernel[axis] - pads[axis] - pads[rank + axis];
    if (size < 0) {
      return internal::invalid_argument(
          kOp, "spatial axis " + std::to_string(axis) + " has output size " + std::to_string(size) +
                   " (expected >= 0; the pads exceed the unpooled size)");
    }
    shape.push_back(size);
  }
  return shape;
}

}  // namespace

Result<std::vector<int64_t>> max_unpool_shape(Span<const int64_t> x,
                                              const MaxUnpoolOptions& options,
                                              const std::vector<int64_t>* output_shape) {
  KILN_ASSIGN_OR_RETURN(auto shape, default_shape(x, options));
  if (output_shape == nullptr) return shape;
  bool fits = output_shape->size() == shape.size();
  for (size_t d = 0; fits && d < shape.size(); ++d) {
    fits = d < 2 ? (*output_shape)[d] == shape[d] : (*output_shape)[d] >= shape[d];
  }
  if (!fits) {
    return internal::invalid_argument(
        kOp, "input 2 (output_shape) " + runtime::shape_to_string(*output_shape) +
                 " does not fit input 0 of shape " + runtime::shape_to_string(x) +
                 " (expected N and C of input 0 and spatial sizes of at least the unpooled " +
                 runtime::shape_to_string(shape) + ")");
  }
  return *output_shape;
}

Status max_unpool(const Tensor& x, const Tensor& indices, const MaxUnpoolOptions& options,
                  Tensor& out) {
  KILN_RETURN_IF_ERROR(check_dtype(kOp, "input 0", x.dtype(), kNumericDtypes));
  constexpr std::array<ScalarType, 1> kI64 = {ScalarType::Int64};
  KILN_RETURN_IF_ERROR(check_dtype(kOp, "input 1 (I)", indices.dtype(), kI64));
  KILN_RETURN_IF_ERROR(internal::check_contiguous(kOp, "input 0", x));
  KILN_RETURN_IF_ERROR(internal::check_contiguous(kOp, "input 1 (I)", indices));
  KILN_RETURN_IF_ERROR(internal::check_contiguous(kOp, "output 0", out));
  KILN_RETURN_IF_ERROR(internal::check_same_dtype(kOp, "output 0", out.dtype(), x.dtype()));
  if (!std::equal(indices.sizes().begin(), indices.sizes().end(), x.sizes().begin(),
                  x.sizes().end())) {
    return internal::invalid_argument(
        kOp, "input 1 (I) has shape " + runtime::shape_to_string(indices.sizes()) + " (expected " +
                 runtime::shape_to_string(x.sizes()) + ", input 0's)");
  }
  KILN_ASSIGN_OR_RETURN(auto unpooled, default_shape(x.sizes(), options));
  const std::vector<int64_t> out_sizes(out.sizes().begin(), out.sizes().end());
  KILN_ASSIGN_OR_RETURN(auto expected, max_unpool_shape(x.sizes(), options, &out_sizes));
  KILN_RETURN_IF_ERROR(internal::check_output_shape(kOp, out, expected));
  int64_t limit = 1;
  for (int64_t size : unpooled) limit *= size;
  const int64_t* index = indices.data_ptr<int64_t>();
  for (int64_t i = 0; i < indices.numel(); ++i) {
    if (index[i] < 0 || index[i] >= limit) {
      return internal::invalid_argument(
          kOp, "input 1 (I) holds " + std::to_string(index[i]) + " at element " +
                   std::to_string(i) + " (expected 0.." + std::to_string(limit - 1) +
                   " for the unpooled shape " + runtime::shape_to_string(unpooled) + ")");
    }
  }
  // A flat index of the unpooled shape, re-counted in the (possibly larger) output shape.
  const bool same = unpooled == out_sizes;
  auto target = [&](int64_t flat) {
    if (same) return flat;
    int64_t result = 0;
    int64_t stride = 1;
    for (size_t d = unpooled.size(); d-- > 0;) {
      result += (flat % unpooled[d]) * stride;
      flat /= unpooled[d];
      stride *= out_sizes[d];
    }
    return result;
  };
  return internal::dispatch_bytes(runtime::element_size(x.dtype()), [&](auto tag) {
    using U = typename decltype(tag)::type;
    const U* in = static_cast<const U*>(x.data());
    U* result = static_cast<U*>(out.mutable_data());
    std::fill(result, result + out.numel(), U{0});
    for (int64_t i = 0; i < x.numel(); ++i) result[target(index[i])] = in[i];
    return Status();
  });
}

namespace {

Status max_unpool_kernel(runtime::KernelContext& context, Span<EValue* const> inputs,
                         Span<EValue* const> outputs, const runtime::Attributes& attributes) {
  KILN_RETURN_IF_ERROR(internal::check_arity(kOp, inputs, outputs, 2, 3, 1));
  MaxUnpoolOptions options;
  KILN_ASSIGN_OR_RETURN(options.kernel_shape,
                        internal::ints_attribute(kOp, attributes, "kernel_shape"));
  KILN_ASSIGN_OR_RETURN(options.strides, internal::ints_attribute(kOp, attributes, "strides"));
  KILN_ASSIGN_OR_RETURN(options.pads, internal::ints_attribute(kOp, attributes, "pads"));
  KILN_ASSIGN_OR_RETURN(const Tensor* x, internal::input_tensor(kOp, inputs, 0));
  KILN_ASSIGN_OR_RETURN(const Tensor* indices, internal::input_tensor(kOp, inputs, 1));
  KILN_RETURN_IF_ERROR(check_dtype(kOp, "input 0", x->dtype(), kNumericDtypes));
  std::vector<int64_t> output_shape;
  const bool has_shape = !internal::is_absent(inputs, 2);
  if (has_shape) {
    KILN_ASSIGN_OR_RETURN(output_shape, internal::read_int_list(kOp, inputs, 2, "output_shape"));
  }
  KILN_ASSIGN_OR_RETURN(auto shape,
                        max_unpool_shape(x->sizes(), options, has_shape ? &output_shape : nullptr));
  KILN_ASSIGN_OR_RETURN(EValue * out, internal::output_tensor(kOp, outputs, 0, x->dtype()));
  KILN_RETURN_IF_ERROR(internal::resize_output(context, kOp, *out, shape));
  return max_unpool(*x, *indices, options, out->to_tensor());
}

const runtime::KernelRegistration kRegisterMaxUnpool("MaxUnpool", max_unpool_kernel);

}  // namespace
}  // namespace kiln::kernels
