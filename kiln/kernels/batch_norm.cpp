#include <kiln/kernels/kernels.h>
#include <kiln/kernels/norm_helpers.h>

#include <cmath>
#include <string>
#include <vector>

namespace kiln::kernels {

using runtime::Error;
using runtime::EValue;
using runtime::Span;
using runtime::Status;
using runtime::Tensor;

namespace {

constexpr std::string_view kOp = "BatchNormalization";
constexpr const char* kParamNames[] = {"input 1 (scale)", "input 2 (B)", "input 3 (input_mean)",
                                       "input 4 (input_var)"};

// The number P of values in each parameter: one per channel, or (per-activation form, opsets
// < 9 with `spatial` = 0) one per element of x.shape[1:]. Either way x reads as [N, P, S].
runtime::Result<int64_t> param_count(const Tensor& x, const Tensor* const params[4]) {
  if (x.dim() < 2) {
    return internal::invalid_argument(kOp, "input 0 has rank " + std::to_string(x.dim()) +
                                               " (expected [N, C, ...] of rank >= 2)");
  }
  int64_t per_sample = 1;
  for (int64_t d = 1; d < x.dim(); ++d) per_sample *= x.size(d);
  const int64_t channels = x.size(1);
  const int64_t p = params[0]->numel() == per_sample ? per_sample : channels;
  for (size_t i = 0; i < 4; ++i) {
    KILN_RETURN_IF_ERROR(
        internal::check_same_dtype(kOp, kParamNames[i], params[i]->dtype(), x.dtype()));
    if (params[i]->numel() != p) {
      return internal::invalid_argument(kOp, std::string(kParamNames[i]) + " has shape " +
                                                 runtime::shape_to_string(params[i]->sizes()) +
                                                 " (expected " + std::to_string(channels) +
                                                 " elements, one per channel of " +
                                                 internal::describe_input(0, x.sizes()) + ")");
    }
  }
  return p;
}

// Opset 14+ says training with the `training_mode` attribute; opsets 7..13 with the number of
// outputs (the running statistics exist only when training).
Status batch_norm_kernel(runtime::KernelContext& context, Span<EValue* const> inputs,
                         Span<EValue* const> outputs, const runtime::Attributes& attributes) {
  KILN_RETURN_IF_ERROR(internal::check_arity(kOp, inputs, outputs, 5, 5, outputs.size()));
  if (outputs.empty() || outputs.size() > 5) {
    return internal::invalid_argument(
        kOp, "got " + std::to_string(outputs.size()) + " outputs (expected 1 to 5)");
  }
  BatchNormOptions options;
  KILN_ASSIGN_OR_RETURN(options.epsilon,
                        internal::double_attribute(kOp, attributes, "epsilon", 1e-5));
  KILN_ASSIGN_OR_RETURN(options.momentum,
                        internal::double_attribute(kOp, attributes, "momentum", 0.9));
  KILN_ASSIGN_OR_RETURN(int64_t training_mode,
                        internal::int_attribute(kOp, attributes, "training_mode", 0));
  options.training = attributes.has("training_mode") ? training_mode != 0 : outputs.size() > 1;
  if (outputs.size() > 3) {
    return Status(Error::NotSupported,
                  internal::action(kOp) + ": got " + std::to_string(outputs.size()) +
                      " outputs (expected 1 or 3: the saved_mean and saved_var outputs of "
                      "opsets before 14 are not supported)");
  }
  if (!options.training && outputs.size() > 1) {
    return internal::invalid_argument(kOp,
                                      "got " + std::to_string(outputs.size()) +
                                          " outputs with attribute 'training_mode' 0 (expected 1)");
  }
  KILN_ASSIGN_OR_RETURN(const Tensor* x, internal::input_tensor(kOp, inputs, 0));
  KILN_RETURN_IF_ERROR(check_dtype(kOp, "input 0", x->dtype(), kFloatDtypes));
  const Tensor* params[4] = {};
  for (size_t i = 0; i < 4; ++i) {
    KILN_ASSIGN_OR_RETURN(params[i], internal::input_tensor(kOp, inputs, i + 1));
    KILN_RETURN_IF_ERROR(
        internal::check_same_dtype(kOp, kParamNames[i], params[i]->dtype(), x->dtype()));
  }
  KILN_RETURN_IF_ERROR(param_count(*x, params).status());
  EValue* running[2] = {nullptr, nullptr};
  for (size_t i = 1; i < outputs.size(); ++i) {
    KILN_ASSIGN_OR_RETURN(running[i - 1], internal::output_tensor(kOp, outputs, i, x->dtype()));
  }
  KILN_ASSIGN_OR_RETURN(EValue * out, internal::output_tensor(kOp, outputs, 0, x->dtype()));
  KILN_RETURN_IF_ERROR(internal::resize_output(context, kOp, *out, x->sizes()));
  for (size_t i = 0; i < 2; ++i) {
    if (running[i] == nullptr) continue;
    KILN_RETURN_IF_ERROR(
        internal::resize_output(context, kOp, *running[i], params[2 + i]->sizes()));
  }
  return batch_norm(*x, *params[0], *params[1], *params[2], *params[3], options, out->to_tensor(),
                    running[0] != nullptr ? &running[0]->to_tensor() : nullptr,
                    running[1] != nullptr ? &running[1]->to_tensor() : nullptr);
}

const runtime::KernelRegistration kRegisterBatchNorm("BatchNormalization", batch_norm_kernel);

Status check_running_output(const Tensor* t, std::string_view subject, const Tensor& like,
                            const Tensor& x) {
  if (t == nullptr) return Status();
  KILN_RETURN_IF_ERROR(internal::check_same_dtype(kOp, subject, t->dtype(), x.dtype()));
  KILN_RETURN_IF_ERROR(internal::check_contiguous(kOp, subject, *t));
  if (t->numel() == like.numel()) return Status();
  return internal::invalid_argument(kOp, std::string(subject) + " has " +
                                             std::to_string(t->numel()) + " elements (expected " +
                                             std::to_string(like.numel()) + ", as input_mean)");
}

}  // namespace

Status batch_norm(const Tensor& x, const Tensor& scale, const Tensor& bias, const Tensor& mean,
                  const Tensor& var, const BatchNormOptions& options, Tensor& out,
                  Tensor* running_mean, Tensor* running_var) {
  KILN_RETURN_IF_ERROR(check_dtype(kOp, "input 0", x.dtype(), kFloatDtypes));
  const Tensor* params[4] = {&scale, &bias, &mean, &var};
  KILN_ASSIGN_OR_RETURN(const int64_t p, param_count(x, params));
  for (size_t i = 0; i < 4; ++i) {
    KILN_RETURN_IF_ERROR(internal::check_contiguous(kOp, kParamNames[i], *params[i]));
  }
  const int64_t batch = x.size(0);
  const int64_t per_sample = batch == 0 ? 0 : x.numel() / batch;
  KILN_RETURN_IF_ERROR(internal::check_contiguous(kOp, "input 0", x));
  KILN_RETURN_IF_ERROR(internal::check_output(kOp, out, x.dtype(), x.sizes()));
  KILN_RETURN_IF_ERROR(check_running_output(running_mean, "output 1 (running_mean)", mean, x));
  KILN_RETURN_IF_ERROR(check_running_output(running_var, "output 2 (running_var)", var, x));
  if (p == 0) return Status();
  const int64_t s = per_sample / p;
  const int64_t count = batch * s;

  return dispatch<DtypeGroup::Float>(kOp, "input 0", x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = ComputeType<T>;
    const T* in = x.data_ptr<T>();
    T* result = out.mutable_data_ptr<T>();
    auto param = [](const Tensor& t, int64_t c) {
      return static_cast<double>(load(t.data_ptr<T>()[c]));
    };
    for (int64_t c = 0; c < p; ++c) {
      double mu = param(mean, c);
      double sigma2 = param(var, c);
      if (options.training) {
        double sum = 0;
        for (int64_t n = 0; n < batch; ++n) {
          for (int64_t i = 0; i < s; ++i) sum += load(in[(n * p + c) * s + i]);
        }
        mu = count > 0 ? sum / static_cast<double>(count) : 0.0;
        double squares = 0;
        for (int64_t n = 0; n < batch; ++n) {
          for (int64_t i = 0; i < s; ++i) {
            const double d = load(in[(n * p + c) * s + i]) - mu;
            squares += d * d;
          }
        }
        sigma2 = count > 0 ? squares / static_cast<double>(count) : 0.0;
        const double keep = options.momentum;
        if (running_mean != nullptr) {
          internal::write_float(*running_mean, c, param(mean, c) * keep + mu * (1 - keep));
        }
        if (running_var != nullptr) {
          internal::write_float(*running_var, c, param(var, c) * keep + sigma2 * (1 - keep));
        }
      }
      const double factor = param(scale, c) / std::sqrt(sigma2 + options.epsilon);
      const double shift = param(bias, c);
      for (int64_t n = 0; n < batch; ++n) {
        for (int64_t i = 0; i < s; ++i) {
          const int64_t at = (n * p + c) * s + i;
          result[at] = store<T>(static_cast<C>((load(in[at]) - mu) * factor + shift));
        }
      }
    }
    return Status();
  });
}

}  // namespace kiln::kernels
