#include <kiln/kernels/adapter.h>
#include <kiln/kernels/dispatch.h>
#include <kiln/kernels/kernels.h>

#include <array>
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

constexpr std::string_view kOp = "Reshape";
constexpr std::array<ScalarType, 1> kShapeDtypes = {ScalarType::Int64};

Status shape_error(Span<const int64_t> shape, const std::string& problem) {
  return Status(Error::InvalidArgument,
                "input 1 (shape) " + runtime::shape_to_string(shape) + " " + problem);
}

Status reshape_kernel(runtime::KernelContext& context, Span<EValue* const> inputs,
                      Span<EValue* const> outputs, const runtime::Attributes& attributes) {
  KILN_RETURN_IF_ERROR(internal::check_arity(kOp, inputs, outputs, 2, 2, 1));
  auto allow_zero = attributes.get_int("allowzero", 0);
  if (!allow_zero.ok()) return allow_zero.status().with_context(internal::action(kOp));
  KILN_ASSIGN_OR_RETURN(const Tensor* x, internal::input_tensor(kOp, inputs, 0));
  KILN_ASSIGN_OR_RETURN(const Tensor* shape, internal::input_tensor(kOp, inputs, 1));
  KILN_RETURN_IF_ERROR(check_dtype(kOp, "input 1", shape->dtype(), kShapeDtypes));
  KILN_RETURN_IF_ERROR(internal::check_contiguous(kOp, "input 1", *shape));
  if (shape->dim() != 1) {
    return internal::invalid_argument(
        kOp, "input 1 (shape) has rank " + std::to_string(shape->dim()) + " (expected 1)");
  }
  const Span<const int64_t> requested(shape->data_ptr<int64_t>(),
                                      static_cast<size_t>(shape->numel()));
  auto sizes = reshape_shape(x->sizes(), requested, *allow_zero != 0);
  if (!sizes.ok()) return sizes.status().with_context(internal::action(kOp));
  KILN_ASSIGN_OR_RETURN(EValue * out, internal::output_tensor(kOp, outputs, 0, x->dtype()));
  KILN_RETURN_IF_ERROR(internal::resize_output(context, kOp, *out, *sizes));
  return reshape(*x, out->to_tensor());
}

const runtime::KernelRegistration kRegisterReshape("Reshape", reshape_kernel);

}  // namespace

Result<std::vector<int64_t>> reshape_shape(Span<const int64_t> input, Span<const int64_t> shape,
                                           bool allow_zero) {
  std::vector<int64_t> out(shape.begin(), shape.end());
  int64_t inferred = -1;  // position of the -1, if any
  bool has_zero = false;
  for (size_t i = 0; i < shape.size(); ++i) {
    const std::string position = "position " + std::to_string(i);
    if (shape[i] == -1) {
      if (inferred >= 0) {
        return shape_error(shape, "has -1 at positions " + std::to_string(inferred) + " and " +
                                      std::to_string(i) + " (expected at most one -1)");
      }
      inferred = static_cast<int64_t>(i);
    } else if (shape[i] < -1) {
      return shape_error(
          shape, "has " + std::to_string(shape[i]) + " at " + position + " (expected sizes >= -1)");
    } else if (shape[i] == 0) {
      has_zero = true;
      if (allow_zero) continue;
      if (i >= input.size()) {
        return shape_error(shape, "has 0 at " + position +
                                      ", past the last dimension of input 0 "
                                      "of shape " +
                                      runtime::shape_to_string(input) +
                                      " (expected 0 only where it copies an input dimension)");
      }
      out[i] = input[i];
    }
  }
  if (allow_zero && has_zero && inferred >= 0) {
    return shape_error(shape,
                       "has both 0 and -1 with attribute 'allowzero' = 1 "
                       "(expected at most one of them)");
  }
  KILN_ASSIGN_OR_RETURN(const int64_t input_numel, runtime::checked_numel(input));
  int64_t known = 1;
  for (size_t i = 0; i < out.size(); ++i) {
    if (static_cast<int64_t>(i) == inferred) continue;
    if (__builtin_mul_overflow(known, out[i], &known)) {
      return shape_error(shape, "has more elements than int64 holds (expected " +
                                    std::to_string(input_numel) + " elements)");
    }
  }
  if (inferred >= 0) {
    if (known == 0) {
      return shape_error(shape, "cannot infer the -1 at position " + std::to_string(inferred) +
                                    ": the other sizes multiply to 0 (expected non-zero sizes "
                                    "beside the -1)");
    }
    if (input_numel % known != 0) {
      return shape_error(shape, "cannot infer the -1 at position " + std::to_string(inferred) +
                                    ": the other sizes multiply to " + std::to_string(known) +
                                    " (expected a divisor of " + std::to_string(input_numel) +
                                    ", the elements of input 0 of shape " +
                                    runtime::shape_to_string(input) + ")");
    }
    out[static_cast<size_t>(inferred)] = input_numel / known;
  } else if (known != input_numel) {
    return shape_error(shape, "gives shape " + runtime::shape_to_string(out) + " with " +
                                  std::to_string(known) + " elements (expected " +
                                  std::to_string(input_numel) +
                                  ", the elements of input 0 of "
                                  "shape " +
                                  runtime::shape_to_string(input) + ")");
  }
  return out;
}

Status reshape(const Tensor& x, Tensor& out) { return internal::copy_elements(kOp, x, out); }

}  // namespace kiln::kernels
