// GroupNormalization (ONNX opset 18 and 21): statistics per (n, group) over the group's channels
// and the spatial axes; the scale and bias per channel (opset 21) or per group (opset 18).
#include <kiln/kernels/kernels.h>
#include <kiln/kernels/norm_helpers.h>

#include <cmath>
#include <string>

namespace kiln::kernels {

using runtime::EValue;
using runtime::Span;
using runtime::Status;
using runtime::Tensor;

namespace {

constexpr std::string_view kOp = "GroupNormalization";

Status check_group_norm(const Tensor& x, const Tensor& scale, const Tensor& bias, int64_t groups) {
  KILN_RETURN_IF_ERROR(check_dtype(kOp, "input 0", x.dtype(), kFloatDtypes));
  KILN_RETURN_IF_ERROR(
      internal::check_same_dtype(kOp, "input 1 (scale)", scale.dtype(), x.dtype()));
  KILN_RETURN_IF_ERROR(internal::check_same_dtype(kOp, "input 2 (bias)", bias.dtype(), x.dtype()));
  if (x.dim() < 3) {
    return internal::invalid_argument(kOp, "input 0 has rank " + std::to_string(x.dim()) +
                                               " (expected [N, C, D1, ...] of rank >= 3)");
  }
  const int64_t channels = x.size(1);
  if (groups <= 0 || channels % groups != 0) {
    return internal::invalid_argument(kOp, "num_groups is " + std::to_string(groups) +
                                               " (expected a divisor of the " +
                                               std::to_string(channels) + " channels of " +
                                               internal::describe_input(0, x.sizes()) + ")");
  }
  const Tensor* params[2] = {&scale, &bias};
  const char* names[2] = {"input 1 (scale)", "input 2 (bias)"};
  for (size_t i = 0; i < 2; ++i) {
    const bool fits =
        params[i]->dim() == 1 && (params[i]->size(0) == channels || params[i]->size(0) == groups);
    if (!fits) {
      return internal::invalid_argument(
          kOp, std::string(names[i]) + " has shape " +
                   runtime::shape_to_string(params[i]->sizes()) + " (expected [" +
                   std::to_string(channels) + "], one value per channel, or [" +
                   std::to_string(groups) + "], one per group as in opset 18)");
    }
  }
  return Status();
}

Status group_norm_kernel(runtime::KernelContext& context, Span<EValue* const> inputs,
                         Span<EValue* const> outputs, const runtime::Attributes& attributes) {
  KILN_RETURN_IF_ERROR(internal::check_arity(kOp, inputs, outputs, 3, 3, 1));
  KILN_ASSIGN_OR_RETURN(double epsilon,
                        internal::double_attribute(kOp, attributes, "epsilon", 1e-5));
  if (!attributes.has("num_groups")) {
    return internal::invalid_argument(
        kOp, "attribute 'num_groups' is missing (expected an int dividing the channels)");
  }
  KILN_ASSIGN_OR_RETURN(int64_t groups, internal::int_attribute(kOp, attributes, "num_groups", 0));
  KILN_ASSIGN_OR_RETURN(const Tensor* x, internal::input_tensor(kOp, inputs, 0));
  KILN_ASSIGN_OR_RETURN(const Tensor* scale, internal::input_tensor(kOp, inputs, 1));
  KILN_ASSIGN_OR_RETURN(const Tensor* bias, internal::input_tensor(kOp, inputs, 2));
  KILN_RETURN_IF_ERROR(check_group_norm(*x, *scale, *bias, groups));
  KILN_ASSIGN_OR_RETURN(EValue * out, internal::output_tensor(kOp, outputs, 0, x->dtype()));
  KILN_RETURN_IF_ERROR(internal::resize_output(context, kOp, *out, x->sizes()));
  return group_norm(*x, *scale, *bias, groups, epsilon, out->to_tensor());
}

const runtime::KernelRegistration kRegisterGroupNorm("GroupNormalization", group_norm_kernel);

}  // namespace

Status group_norm(const Tensor& x, const Tensor& scale, const Tensor& bias, int64_t groups,
                  double epsilon, Tensor& out) {
  KILN_RETURN_IF_ERROR(check_group_norm(x, scale, bias, groups));
  KILN_RETURN_IF_ERROR(internal::check_contiguous(kOp, "input 0", x));
  KILN_RETURN_IF_ERROR(internal::check_contiguous(kOp, "input 1 (scale)", scale));
  KILN_RETURN_IF_ERROR(internal::check_contiguous(kOp, "input 2 (bias)", bias));
  KILN_RETURN_IF_ERROR(internal::check_output(kOp, out, x.dtype(), x.sizes()));
  const int64_t channels = x.size(1);
  const int64_t per_group = channels / groups;
  const int64_t planes = x.size(0) * channels;
  const int64_t spatial = planes == 0 ? 0 : x.numel() / planes;
  if (spatial == 0) return Status();
  const int64_t span = per_group * spatial;  // the values of one (n, group)
  return dispatch<DtypeGroup::Float>(kOp, "input 0", x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = ComputeType<T>;
    for (int64_t row = 0; row < x.size(0) * groups; ++row) {
      const T* in = x.data_ptr<T>() + row * span;
      T* result = out.mutable_data_ptr<T>() + row * span;
      double sum = 0;
      for (int64_t i = 0; i < span; ++i) sum += load(in[i]);
      const double mu = sum / static_cast<double>(span);
      double squares = 0;
      for (int64_t i = 0; i < span; ++i) {
        const double d = load(in[i]) - mu;
        squares += d * d;
      }
      const double inverse = 1.0 / std::sqrt(squares / static_cast<double>(span) + epsilon);
      const int64_t g = row % groups;
      for (int64_t k = 0; k < per_group; ++k) {
        const int64_t c = g * per_group + k;
        const int64_t s = scale.size(0) == channels ? c : g;
        const int64_t b = bias.size(0) == channels ? c : g;
        const double factor = static_cast<double>(load(scale.data_ptr<T>()[s])) * inverse;
        const double shift = load(bias.data_ptr<T>()[b]);
        for (int64_t i = k * spatial; i < (k + 1) * spatial; ++i) {
          result[i] = store<T>(static_cast<C>((load(in[i]) - mu) * factor + shift));
        }
      }
    }
    return Status();
  });
}

}  // namespace kiln::kernels
