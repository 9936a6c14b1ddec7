#include <kiln/kernels/kernels.h>
#include <kiln/kernels/norm_helpers.h>

#include <algorithm>
#include <cmath>
#include <string>

namespace kiln::kernels {

using runtime::EValue;
using runtime::Span;
using runtime::Status;
using runtime::Tensor;

namespace {

constexpr std::string_view kOp = "LRN";

Status check_lrn(const Tensor& x, const LrnOptions& options) {
  KILN_RETURN_IF_ERROR(check_dtype(kOp, "input 0", x.dtype(), kFloatDtypes));
  if (x.dim() < 3) {
    return internal::invalid_argument(kOp, "input 0 has rank " + std::to_string(x.dim()) +
                                               " (expected [N, C, D1, ...] of rank >= 3)");
  }
  if (options.size < 1) {
    return internal::invalid_argument(
        kOp, "attribute 'size' is " + std::to_string(options.size) + " (expected >= 1)");
  }
  return Status();
}

Status lrn_kernel(runtime::KernelContext& context, Span<EValue* const> inputs,
                  Span<EValue* const> outputs, const runtime::Attributes& attributes) {
  KILN_RETURN_IF_ERROR(internal::check_arity(kOp, inputs, outputs, 1, 1, 1));
  LrnOptions options;
  KILN_ASSIGN_OR_RETURN(options.alpha, internal::double_attribute(kOp, attributes, "alpha", 1e-4));
  KILN_ASSIGN_OR_RETURN(options.beta, internal::double_attribute(kOp, attributes, "beta", 0.75));
  KILN_ASSIGN_OR_RETURN(options.bias, internal::double_attribute(kOp, attributes, "bias", 1.0));
  if (!attributes.has("size")) {
    return internal::invalid_argument(kOp, "attribute 'size' is missing (expected an int >= 1)");
  }
  KILN_ASSIGN_OR_RETURN(options.size, internal::int_attribute(kOp, attributes, "size", 0));
  KILN_ASSIGN_OR_RETURN(const Tensor* x, internal::input_tensor(kOp, inputs, 0));
  KILN_RETURN_IF_ERROR(check_lrn(*x, options));
  KILN_ASSIGN_OR_RETURN(EValue * out, internal::output_tensor(kOp, outputs, 0, x->dtype()));
  KILN_RETURN_IF_ERROR(internal::resize_output(context, kOp, *out, x->sizes()));
  return lrn(*x, options, out->to_tensor());
}

const runtime::KernelRegistration kRegisterLrn("LRN", lrn_kernel);

}  // namespace

Status lrn(const Tensor& x, const LrnOptions& options, Tensor& out) {
  KILN_RETURN_IF_ERROR(check_lrn(x, options));
  KILN_RETURN_IF_ERROR(internal::check_contiguous(kOp, "input 0", x));
  KILN_RETURN_IF_ERROR(internal::check_output(kOp, out, x.dtype(), x.sizes()));
  const int64_t batch = x.size(0);
  const int64_t channels = x.size(1);
  const int64_t spatial = batch * channels == 0 ? 0 : x.numel() / (batch * channels);
  const int64_t before = (options.size - 1) / 2;
  const int64_t after = options.size / 2;  // ceil((size - 1) / 2)
  const double scale = options.alpha / static_cast<double>(options.size);
  return dispatch<DtypeGroup::Float>(kOp, "input 0", x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = ComputeType<T>;
    const T* in = x.data_ptr<T>();
    T* result = out.mutable_data_ptr<T>();
    for (int64_t n = 0; n < batch; ++n) {
      for (int64_t c = 0; c < channels; ++c) {
        const int64_t first = std::max<int64_t>(0, c - before);
        const int64_t last = std::min(channels - 1, c + after);
        for (int64_t i = 0; i < spatial; ++i) {
          double square_sum = 0;
          for (int64_t k = first; k <= last; ++k) {
            const double v = load(in[(n * channels + k) * spatial + i]);
            square_sum += v * v;
          }
          const int64_t at = (n * channels + c) * spatial + i;
          const double y = load(in[at]) / std::pow(options.bias + scale * square_sum, options.beta);
          result[at] = store<T>(static_cast<C>(y));
        }
      }
    }
    return Status();
  });
}

}  // namespace kiln::kernels
