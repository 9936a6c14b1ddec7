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

constexpr std::string_view kOp = "InstanceNormalization";

Status check_instance_norm(const Tensor& x, const Tensor& scale, const Tensor& bias) {
  KILN_RETURN_IF_ERROR(check_dtype(kOp, "input 0", x.dtype(), kFloatDtypes));
  KILN_RETURN_IF_ERROR(
      internal::check_same_dtype(kOp, "input 1 (scale)", scale.dtype(), x.dtype()));
  KILN_RETURN_IF_ERROR(internal::check_same_dtype(kOp, "input 2 (B)", bias.dtype(), x.dtype()));
  if (x.dim() < 3) {
    return internal::invalid_argument(kOp, "input 0 has rank " + std::to_string(x.dim()) +
                                               " (expected [N, C, D1, ...] of rank >= 3)");
  }
  const Tensor* params[2] = {&scale, &bias};
  const char* names[2] = {"input 1 (scale)", "input 2 (B)"};
  for (size_t i = 0; i < 2; ++i) {
    if (params[i]->dim() != 1 || params[i]->size(0) != x.size(1)) {
      return internal::invalid_argument(kOp, std::string(names[i]) + " has shape " +
                                                 runtime::shape_to_string(params[i]->sizes()) +
                                                 " (expected [" + std::to_string(x.size(1)) +
                                                 "], one value per channel of " +
                                                 internal::describe_input(0, x.sizes()) + ")");
    }
  }
  return Status();
}

Status instance_norm_kernel(runtime::KernelContext& context, Span<EValue* const> inputs,
                            Span<EValue* const> outputs, const runtime::Attributes& attributes) {
  KILN_RETURN_IF_ERROR(internal::check_arity(kOp, inputs, outputs, 3, 3, 1));
  KILN_ASSIGN_OR_RETURN(double epsilon,
                        internal::double_attribute(kOp, attributes, "epsilon", 1e-5));
  KILN_ASSIGN_OR_RETURN(const Tensor* x, internal::input_tensor(kOp, inputs, 0));
  KILN_ASSIGN_OR_RETURN(const Tensor* scale, internal::input_tensor(kOp, inputs, 1));
  KILN_ASSIGN_OR_RETURN(const Tensor* bias, internal::input_tensor(kOp, inputs, 2));
  KILN_RETURN_IF_ERROR(check_instance_norm(*x, *scale, *bias));
  KILN_ASSIGN_OR_RETURN(EValue * out, internal::output_tensor(kOp, outputs, 0, x->dtype()));
  KILN_RETURN_IF_ERROR(internal::resize_output(context, kOp, *out, x->sizes()));
  return instance_norm(*x, *scale, *bias, epsilon, out->to_tensor());
}

const runtime::KernelRegistration kRegisterInstanceNorm("InstanceNormalization",
                                                        instance_norm_kernel);

}  // namespace

Status instance_norm(const Tensor& x, const Tensor& scale, const Tensor& bias, double epsilon,
                     Tensor& out) {
  KILN_RETURN_IF_ERROR(check_instance_norm(x, scale, bias));
  KILN_RETURN_IF_ERROR(internal::check_contiguous(kOp, "input 0", x));
  KILN_RETURN_IF_ERROR(internal::check_contiguous(kOp, "input 1 (scale)", scale));
  KILN_RETURN_IF_ERROR(internal::check_contiguous(kOp, "input 2 (B)", bias));
  KILN_RETURN_IF_ERROR(internal::check_output(kOp, out, x.dtype(), x.sizes()));
  const int64_t channels = x.size(1);
  const int64_t planes = x.size(0) * channels;
  const int64_t spatial = planes == 0 ? 0 : x.numel() / planes;
  if (spatial == 0) return Status();
  return dispatch<DtypeGroup::Float>(kOp, "input 0", x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = ComputeType<T>;
    for (int64_t plane = 0; plane < planes; ++plane) {
      const T* in = x.data_ptr<T>() + plane * spatial;
      T* result = out.mutable_data_ptr<T>() + plane * spatial;
      double sum = 0;
      for (int64_t i = 0; i < spatial; ++i) sum += load(in[i]);
      const double mu = sum / static_cast<double>(spatial);
      double squares = 0;
      for (int64_t i = 0; i < spatial; ++i) {
        const double d = load(in[i]) - mu;
        squares += d * d;
      }
      const int64_t c = plane % channels;
      const double factor = static_cast<double>(load(scale.data_ptr<T>()[c])) /
                            std::sqrt(squares / static_cast<double>(spatial) + epsilon);
      const double shift = load(bias.data_ptr<T>()[c]);
      for (int64_t i = 0; i < spatial; ++i) {
        result[i] = store<T>(static_cast<C>((load(in[i]) - mu) * factor + shift));
      }
    }
    return Status();
  });
}

}  // namespace kiln::kernels
