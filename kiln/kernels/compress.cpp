#include <kiln/kernels/index_ops.h>
#include <kiln/kernels/index_util.h>
#include <kiln/kernels/layout.h>

#include <cstring>
#include <optional>
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

constexpr std::string_view kOp = "Compress";

Status compress_kernel(runtime::KernelContext& context, Span<EValue* const> inputs,
                       Span<EValue* const> outputs, const runtime::Attributes& attributes) {
  KILN_RETURN_IF_ERROR(internal::check_arity(kOp, inputs, outputs, 2, 2, 1));
  std::optional<int64_t> axis;
  if (attributes.has("axis")) {
    KILN_ASSIGN_OR_RETURN(axis, internal::int_attribute(kOp, attributes, "axis", 0));
  }
  KILN_ASSIGN_OR_RETURN(const Tensor* x, internal::input_tensor(kOp, inputs, 0));
  KILN_ASSIGN_OR_RETURN(const Tensor* condition, internal::input_tensor(kOp, inputs, 1));
  auto shape = compress_shape(x->sizes(), *condition, axis);
  if (!shape.ok()) return shape.status().with_context(internal::action(kOp));
  KILN_ASSIGN_OR_RETURN(EValue * out, internal::output_tensor(kOp, outputs, 0, x->dtype()));
  KILN_RETURN_IF_ERROR(internal::resize_output(context, kOp, *out, *shape));
  return compress(*x, *condition, axis, out->to_tensor());
}

const runtime::KernelRegistration kRegisterCompress("Compress", compress_kernel);

}  // namespace

Result<std::vector<int64_t>> compress_shape(Span<const int64_t> x, const Tensor& condition,
                                            std::optional<int64_t> axis) {
  if (condition.dtype() != runtime::ScalarType::Bool) {
    return Status(Error::InvalidType, "input 1 (condition) has dtype " +
                                          std::string(runtime::to_string(condition.dtype())) +
                                          " (expected bool)");
  }
  const auto rank = static_cast<int64_t>(x.size());
  if (condition.dim() != 1) {
    return Status(Error::InvalidArgument, "input 1 (condition) has rank " +
                                              std::to_string(condition.dim()) + " (expected 1)");
  }
  if (axis && (*axis < -rank || *axis >= rank)) {
    return Status(Error::InvalidArgument, "attribute 'axis' is " + std::to_string(*axis) +
                                              " (expected " + std::to_string(-rank) + ".." +
                                              std::to_string(rank - 1) + " for input 0 of rank " +
                                              std::to_string(rank) + ")");
  }
  const int64_t normalized = axis ? (*axis < 0 ? *axis + rank : *axis) : -1;
  const int64_t length =
      axis ? x[static_cast<size_t>(normalized)] : internal::product(x, 0, x.size());
  if (condition.numel() > length) {
    return Status(Error::InvalidArgument,
                  "input 1 (condition) has " + std::to_string(condition.numel()) +
                      " elements (expected at most " + std::to_string(length) + ", " +
                      (axis ? "the size of axis " + std::to_string(normalized) + " of input 0"
                            : std::string("the element count of input 0")) +
                      " " + runtime::shape_to_string(x) + ")");
  }
  int64_t kept = 0;
  const bool* flags = condition.data_ptr<bool>();
  for (int64_t i = 0; i < condition.numel(); ++i) kept += flags[i] ? 1 : 0;
  if (!axis) return std::vector<int64_t>{kept};
  std::vector<int64_t> shape(x.begin(), x.end());
  shape[static_cast<size_t>(normalized)] = kept;
  return shape;
}

Status compress(const Tensor& x, const Tensor& condition, std::optional<int64_t> axis,
                Tensor& out) {
  auto shape = compress_shape(x.sizes(), condition, axis);
  if (!shape.ok()) return shape.status().with_context(internal::action(kOp));
  KILN_RETURN_IF_ERROR(internal::check_contiguous(kOp, "input 0", x));
  KILN_RETURN_IF_ERROR(internal::check_contiguous(kOp, "input 1", condition));
  KILN_RETURN_IF_ERROR(internal::check_output(kOp, out, x.dtype(), *shape));
  // Without an axis, the flattened input is one row of single elements.
  int64_t outer = 1, dim = x.numel(), inner = 1;
  if (axis) {
    const int64_t a = *axis < 0 ? *axis + x.dim() : *axis;
    outer = internal::product(x.sizes(), 0, static_cast<size_t>(a));
    dim = x.size(a);
    inner = internal::product(x.sizes(), static_cast<size_t>(a) + 1, x.sizes().size());
  }
  const size_t block = static_cast<size_t>(inner) * x.element_size();
  const auto* source = static_cast<const uint8_t*>(x.data());
  auto* target = static_cast<uint8_t*>(out.mutable_data());
  const bool* flags = condition.data_ptr<bool>();
  if (block == 0) return Status();
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < condition.numel(); ++i) {
      if (!flags[i]) continue;
      std::memcpy(target, source + static_cast<size_t>(o * dim + i) * block, block);
      target += block;
    }
  }
  return Status();
}

}  // namespace kiln::kernels
