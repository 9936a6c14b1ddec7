// Expand and Tile: copies that read input elements more than once.

#include <kiln/kernels/kernels.h>
#include <kiln/kernels/layout.h>

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

template <bool kExpand>
Status expand_kernel(runtime::KernelContext& context, Span<EValue* const> inputs,
                     Span<EValue* const> outputs, const runtime::Attributes& attributes) {
  constexpr std::string_view kOp = kExpand ? "Expand" : "Tile";
  KILN_RETURN_IF_ERROR(internal::check_arity(kOp, inputs, outputs, 2, 2, 1));
  KILN_ASSIGN_OR_RETURN(const Tensor* x, internal::input_tensor(kOp, inputs, 0));
  KILN_ASSIGN_OR_RETURN(auto values,
                        internal::read_int_list(kOp, inputs, 1, kExpand ? "shape" : "repeats"));
  auto shape = kExpand ? expand_shape(x->sizes(), values) : tile_shape(x->sizes(), values);
  if (!shape.ok()) return shape.status().with_context(internal::action(kOp));
  KILN_ASSIGN_OR_RETURN(EValue * out, internal::output_tensor(kOp, outputs, 0, x->dtype()));
  KILN_RETURN_IF_ERROR(internal::resize_output(context, kOp, *out, *shape));
  return kExpand ? expand(*x, out->to_tensor()) : tile(*x, out->to_tensor());
}

const runtime::KernelRegistration kRegisterExpand("Expand", expand_kernel<true>);
const runtime::KernelRegistration kRegisterTile("Tile", expand_kernel<false>);

}  // namespace

Result<std::vector<int64_t>> expand_shape(Span<const int64_t> input, Span<const int64_t> shape) {
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] < 0) {
      return Status(Error::InvalidArgument, "input 1 (shape) " + runtime::shape_to_string(shape) +
                                                " has " + std::to_string(shape[i]) +
                                                " at position " + std::to_string(i) +
                                                " (expected sizes >= 0)");
    }
  }
  return broadcast_shape(input, shape);
}

Status expand(const Tensor& x, Tensor& out) {
  constexpr std::string_view kOp = "Expand";
  KILN_RETURN_IF_ERROR(internal::check_contiguous(kOp, "input 0", x));
  KILN_RETURN_IF_ERROR(internal::check_output(kOp, out, x.dtype(), out.sizes()));
  if (!broadcasts_to(x.sizes(), out.sizes())) {
    return internal::invalid_argument(
        kOp, "output 0 has shape " + runtime::shape_to_string(out.sizes()) +
                 " (expected a "
                 "shape that input 0 of shape " +
                 runtime::shape_to_string(x.sizes()) + " broadcasts to)");
  }
  internal::strided_copy(x, 0, out.sizes(), broadcast_strides(x.sizes(), out.sizes()),
                         out.mutable_data());
  return Status();
}

Result<std::vector<int64_t>> tile_shape(Span<const int64_t> input, Span<const int64_t> repeats) {
  if (repeats.size() != input.size()) {
    return Status(Error::InvalidArgument,
                  "input 1 (repeats) has " + std::to_string(repeats.size()) +
                      " elements (expected " + std::to_string(input.size()) +
                      ", the rank of input 0)");
  }
  std::vector<int64_t> shape(input.size());
  for (size_t d = 0; d < input.size(); ++d) {
    if (repeats[d] < 0) {
      return Status(Error::InvalidArgument, "input 1 (repeats) " +
                                                runtime::shape_to_string(repeats) + " has " +
                                                std::to_string(repeats[d]) + " at position " +
                                                std::to_string(d) + " (expected repeats >= 0)");
    }
    shape[d] = input[d] * repeats[d];
  }
  return shape;
}

Status tile(const Tensor& x, Tensor& out) {
  constexpr std::string_view kOp = "Tile";
  KILN_RETURN_IF_ERROR(internal::check_contiguous(kOp, "input 0", x));
  KILN_RETURN_IF_ERROR(internal::check_output(kOp, out, x.dtype(), out.sizes()));
  bool multiple = out.dim() == x.dim();
  for (int64_t d = 0; multiple && d < x.dim(); ++d) {
    multiple = x.size(d) == 0 ? out.size(d) == 0 : out.size(d) % x.size(d) == 0;
  }
  if (!multiple) {
    return internal::invalid_argument(
        kOp, "output 0 has shape " + runtime::shape_to_string(out.sizes()) +
                 " (expected multiples of the sizes of input 0 of shape " +
                 runtime::shape_to_string(x.sizes()) + ")");
  }
  if (out.numel() == 0) return Status();
  // Output dimension d of size r * s is read as [r, s]: the repeat index moves nothing.
  const auto x_strides = internal::dense_strides(x.sizes());
  std::vector<int64_t> sizes, strides;
  for (int64_t d = 0; d < x.dim(); ++d) {
    sizes.push_back(out.size(d) / x.size(d));
    strides.push_back(0);
    sizes.push_back(x.size(d));
    strides.push_back(x_strides[static_cast<size_t>(d)]);
  }
  internal::strided_copy(x, 0, sizes, strides, out.mutable_data());
  return Status();
}

}  // namespace kiln::kernels
