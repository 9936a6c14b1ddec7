#include <kiln/kernels/kernels.h>
#include <kiln/kernels/norm_helpers.h>

#include <cmath>
#include <string>
#include <vector>

namespace kiln::kernels {

using runtime::EValue;
using runtime::Span;
using runtime::Status;
using runtime::Tensor;

namespace {

constexpr std::string_view kOp = "RMSNormalization";

// Checks the dtypes, the axis and that Scale broadcasts to x.shape[axis:]; returns the
// normalized axis (non-negative).
runtime::Result<int64_t> check_inputs(const Tensor& x, const Tensor& scale, int64_t axis) {
  KILN_RETURN_IF_ERROR(check_dtype(kOp, "input 0", x.dtype(), kFloatDtypes));
  KILN_RETURN_IF_ERROR(
      internal::check_same_dtype(kOp, "input 1 (scale)", scale.dtype(), x.dtype()));
  const int64_t rank = x.dim();
  if (rank == 0 || axis < -rank || axis >= rank) {
    return internal::invalid_argument(kOp, "attribute 'axis' is " + std::to_string(axis) +
                                               " (expected " + std::to_string(-rank) + ".." +
                                               std::to_string(rank - 1) + " for input 0 of rank " +
                                               std::to_string(rank) + ")");
  }
  if (axis < 0) axis += rank;
  const Span<const int64_t> normalized(x.sizes().data() + axis, static_cast<size_t>(rank - axis));
  KILN_RETURN_IF_ERROR(
      internal::check_broadcasts_to(kOp, "input 1 (scale)", scale.sizes(), normalized));
  return axis;
}

Status rms_norm_kernel(runtime::KernelContext& context, Span<EValue* const> inputs,
                       Span<EValue* const> outputs, const runtime::Attributes& attributes) {
  KILN_RETURN_IF_ERROR(internal::check_arity(kOp, inputs, outputs, 2, 2, 1));
  RmsNormOptions options;
  KILN_ASSIGN_OR_RETURN(options.axis, internal::int_attribute(kOp, attributes, "axis", -1));
  KILN_ASSIGN_OR_RETURN(options.epsilon,
                        internal::double_attribute(kOp, attributes, "epsilon", 1e-5));
  KILN_RETURN_IF_ERROR(internal::check_stash_type(kOp, attributes));
  KILN_ASSIGN_OR_RETURN(const Tensor* x, internal::input_tensor(kOp, inputs, 0));
  KILN_ASSIGN_OR_RETURN(const Tensor* scale, internal::input_tensor(kOp, inputs, 1));
  KILN_RETURN_IF_ERROR(check_inputs(*x, *scale, options.axis).status());
  KILN_ASSIGN_OR_RETURN(EValue * out, internal::output_tensor(kOp, outputs, 0, x->dtype()));
  KILN_RETURN_IF_ERROR(internal::resize_output(context, kOp, *out, x->sizes()));
  return rms_norm(*x, *scale, options, out->to_tensor());
}

const runtime::KernelRegistration kRegisterRmsNorm("RMSNormalization", rms_norm_kernel);

}  // namespace

Status rms_norm(const Tensor& x, const Tensor& scale, const RmsNormOptions& options, Tensor& out) {
  KILN_ASSIGN_OR_RETURN(const int64_t axis, check_inputs(x, scale, options.axis));
  const Span<const int64_t> normalized(x.sizes().data() + axis,
                                       static_cast<size_t>(x.dim() - axis));
  KILN_RETURN_IF_ERROR(internal::check_contiguous(kOp, "input 0", x));
  KILN_RETURN_IF_ERROR(internal::check_contiguous(kOp, "input 1 (scale)", scale));
  KILN_RETURN_IF_ERROR(internal::check_output(kOp, out, x.dtype(), x.sizes()));
  int64_t inner = 1;
  for (int64_t size : normalized) inner *= size;
  const int64_t outer = inner == 0 ? 0 : x.numel() / inner;
  const std::vector<int64_t> scale_at = internal::broadcast_offsets(scale.sizes(), normalized);
  return dispatch<DtypeGroup::Float>(kOp, "input 0", x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = ComputeType<T>;
    const T* in = x.data_ptr<T>();
    const T* gamma = scale.data_ptr<T>();
    T* result = out.mutable_data_ptr<T>();
    for (int64_t o = 0; o < outer; ++o) {
      const T* row = in + o * inner;
      double squares = 0;
      for (int64_t j = 0; j < inner; ++j) {
        const double v = static_cast<double>(load(row[j]));
        squares += v * v;
      }
      const double inv_rms =
          1.0 / std::sqrt(squares / static_cast<double>(inner) + options.epsilon);
      for (int64_t j = 0; j < inner; ++j) {
        const double y = static_cast<double>(load(row[j])) * inv_rms *
                         static_cast<double>(load(gamma[scale_at[static_cast<size_t>(j)]]));
        result[o * inner + j] = store<T>(static_cast<C>(y));
      }
    }
    return Status();
  });
}

}  // namespace kiln::kernels
