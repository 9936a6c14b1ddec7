// DepthToSpace and SpaceToDepth: a reshape to rank 6, a transpose and a reshape back, done as
// one strided copy.
#include <kiln/kernels/index_ops.h>
#include <kiln/kernels/index_util.h>
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

constexpr std::string_view kDepthOp = "DepthToSpace";
constexpr std::string_view kSpaceOp = "SpaceToDepth";

Result<int64_t> blocksize_attribute(std::string_view op, const runtime::Attributes& attributes) {
  if (!attributes.has("blocksize")) {
    return internal::invalid_argument(op, "attribute 'blocksize' is missing (expected an int)");
  }
  return internal::int_attribute(op, attributes, "blocksize", 0);
}

Status depth_to_space_kernel(runtime::KernelContext& context, Span<EValue* const> inputs,
                             Span<EValue* const> outputs, const runtime::Attributes& attributes) {
  KILN_RETURN_IF_ERROR(internal::check_arity(kDepthOp, inputs, outputs, 1, 1, 1));
  KILN_ASSIGN_OR_RETURN(int64_t blocksize, blocksize_attribute(kDepthOp, attributes));
  auto mode_name = attributes.get_string("mode", "DCR");
  if (!mode_name.ok()) return mode_name.status().with_context(internal::action(kDepthOp));
  if (*mode_name != "DCR" && *mode_name != "CRD") {
    return internal::invalid_argument(
        kDepthOp, "attribute 'mode' is '" + *mode_name + "' (expected DCR or CRD)");
  }
  const auto mode = *mode_name == "CRD" ? DepthToSpaceMode::CRD : DepthToSpaceMode::DCR;
  KILN_ASSIGN_OR_RETURN(const Tensor* x, internal::input_tensor(kDepthOp, inputs, 0));
  auto shape = depth_to_space_shape(x->sizes(), blocksize);
  if (!shape.ok()) return shape.status().with_context(internal::action(kDepthOp));
  KILN_ASSIGN_OR_RETURN(EValue * out, internal::output_tensor(kDepthOp, outputs, 0, x->dtype()));
  KILN_RETURN_IF_ERROR(internal::resize_output(context, kDepthOp, *out, *shape));
  return depth_to_space(*x, blocksize, mode, out->to_tensor());
}

Status space_to_depth_kernel(runtime::KernelContext& context, Span<EValue* const> inputs,
                             Span<EValue* const> outputs, const runtime::Attributes& attributes) {
  KILN_RETURN_IF_ERROR(internal::check_arity(kSpaceOp, inputs, outputs, 1, 1, 1));
  KILN_ASSIGN_OR_RETURN(int64_t blocksize, blocksize_attribute(kSpaceOp, attributes));
  KILN_ASSIGN_OR_RETURN(const Tensor* x, internal::input_tensor(kSpaceOp, inputs, 0));
  auto shape = space_to_depth_shape(x->sizes(), blocksize);
  if (!shape.ok()) return shape.status().with_context(internal::action(kSpaceOp));
  KILN_ASSIGN_OR_RETURN(EValue * out, internal::output_tensor(kSpaceOp, outputs, 0, x->dtype()));
  KILN_RETURN_IF_ERROR(internal::resize_output(context, kSpaceOp, *out, *shape));
  return space_to_depth(*x, blocksize, out->to_tensor());
}

const runtime::KernelRegistration kRegisterDepthToSpace("DepthToSpace", depth_to_space_kernel);
const runtime::KernelRegistration kRegisterSpaceToDepth("SpaceToDepth", space_to_depth_kernel);

Status check_rank4_blocksize(Span<const int64_t> x, int64_t blocksize) {
  if (x.size() != 4) {
    return Status(Error::InvalidArgument, "input 0 has shape " + runtime::shape_to_string(x) +
                                              " (expected rank 4, [N, C, H, W])");
  }
  // The bound keeps blocksize squared and the spatial sizes times blocksize within int64.
  int64_t unused = 0;
  if (blocksize < 1 || blocksize > (int64_t{1} << 20) ||
      __builtin_mul_overflow(x[2], blocksize, &unused) ||
      __builtin_mul_overflow(x[3], blocksize, &unused)) {
    return Status(Error::InvalidArgument, "attribute 'blocksize' is " + std::to_string(blocksize) +
                                              " (expected 1.." + std::to_string(int64_t{1} << 20) +
                                              " for input 0 of shape " +
                                              runtime::shape_to_string(x) + ")");
  }
  return Status();
}

// The rank-6 copy: `in6` is the shape x is viewed as, `perm` the transpose.
Status permuted_copy(std::string_view op, const Tensor& x, const std::vector<int64_t>& in6,
                     const std::vector<int64_t>& perm, Tensor& out) {
  KILN_RETURN_IF_ERROR(internal::check_contiguous(op, "input 0", x));
  const auto in_strides = internal::dense_strides(in6);
  std::vector<int64_t> sizes(6), strides(6);
  for (size_t d = 0; d < 6; ++d) {
    sizes[d] = in6[static_cast<size_t>(perm[d])];
    strides[d] = in_strides[static_cast<size_t>(perm[d])];
  }
  if (x.numel() > 0) internal::strided_copy(x, 0, sizes, strides, out.mutable_data());
  return Status();
}

}  // namespace

Result<std::vector<int64_t>> depth_to_space_shape(Span<const int64_t> x, int64_t blocksize) {
  KILN_RETURN_IF_ERROR(check_rank4_blocksize(x, blocksize));
  if (x[1] % (blocksize * blocksize) != 0) {
    return Status(Error::InvalidArgument,
                  "input 0 has " + std::to_string(x[1]) + " channels (expected a multiple of " +
                      std::to_string(blocksize * blocksize) + ", blocksize squared)");
  }
  return std::vector<int64_t>{x[0], x[1] / (blocksize * blocksize), x[2] * blocksize,
                              x[3] * blocksize};
}

Status depth_to_space(const Tensor& x, int64_t blocksize, DepthToSpaceMode mode, Tensor& out) {
  auto shape = depth_to_space_shape(x.sizes(), blocksize);
  if (!shape.ok()) return shape.status().with_context(internal::action(kDepthOp));
  KILN_RETURN_IF_ERROR(internal::check_output(kDepthOp, out, x.dtype(), *shape));
  const int64_t b = blocksize, c = (*shape)[1], h = x.size(2), w = x.size(3);
  if (mode == DepthToSpaceMode::DCR) {
    return permuted_copy(kDepthOp, x, {x.size(0), b, b, c, h, w}, {0, 3, 4, 1, 5, 2}, out);
  }
  return permuted_copy(kDepthOp, x, {x.size(0), c, b, b, h, w}, {0, 1, 4, 2, 5, 3}, out);
}

Result<std::vector<int64_t>> space_to_depth_shape(Span<const int64_t> x, int64_t blocksize) {
  KILN_RETURN_IF_ERROR(check_rank4_blocksize(x, blocksize));
  if (x[2] % blocksize != 0 || x[3] % blocksize != 0) {
    return Status(Error::InvalidArgument,
                  "input 0 has shape " + runtime::shape_to_string(x) +
                      " (expected height and width multiples of blocksize " +
                      std::to_string(blocksize) + ")");
  }
  return std::vector<int64_t>{x[0], x[1] * blocksize * blocksize, x[2] / blocksize,
                              x[3] / blocksize};
}

Status space_to_depth(const Tensor& x, int64_t blocksize, Tensor& out) {
  auto shape = space_to_depth_shape(x.sizes(), blocksize);
  if (!shape.ok()) return shape.status().with_context(internal::action(kSpaceOp));
  KILN_RETURN_IF_ERROR(internal::check_output(kSpaceOp, out, x.dtype(), *shape));
  const int64_t b = blocksize;
  return permuted_copy(kSpaceOp, x, {x.size(0), x.size(1), x.size(2) / b, b, x.size(3) / b, b},
                       {0, 3, 5, 1, 2, 4}, out);
}

}  // namespace kiln::kernels
