// NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (ONNX opsets 12 and 13): the loss of
// log-probabilities [N, C, d1, ..., dk] at target classes [N, d1, ..., dk], each weighted by its
// class's weight (1 without weights); a target equal to `ignore_index` adds nothing and weighs
// 0. Reduction "none" gives the loss per target, "sum" their sum, "mean" (the default) the sum
// over the sum of the weights. SoftmaxCrossEntropyLoss takes scores: their log-softmax over
// axis 1 (its optional second output) is the log-probabilities.

#include <kiln/kernels/dispatch.h>
#include <kiln/kernels/image_common.h>
#include <kiln/kernels/kernels.h>
#include <kiln/kernels/layout.h>

#include <optional>
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

constexpr std::string_view kNll = "NegativeLogLikelihoodLoss";
constexpr std::string_view kSce = "SoftmaxCrossEntropyLoss";

enum class Reduction { None, Sum, Mean };

struct LossOptions {
  Reduction reduction = Reduction::Mean;
  std::optional<int64_t> ignore_index;
};

Result<LossOptions> read_options(std::string_view op, const runtime::Attributes& attributes) {
  LossOptions options;
  KILN_ASSIGN_OR_RETURN(std::string reduction,
                        internal::string_attribute(op, attributes, "reduction", "mean"));
  if (reduction == "none") {
    options.reduction = Reduction::None;
  } else if (reduction == "sum") {
    options.reduction = Reduction::Sum;
  } else if (reduction != "mean") {
    return internal::invalid_argument(
        op, "attribute 'reduction' is '" + reduction + "' (expected none, sum or mean)");
  }
  if (attributes.has("ignore_index")) {
    KILN_ASSIGN_OR_RETURN(int64_t ignore,
                          internal::int_attribute(op, attributes, "ignore_index", 0));
    options.ignore_index = ignore;
  }
  return options;
}

// Checks the inputs' dtypes and shapes; returns the loss's shape.
Result<std::vector<int64_t>> check_inputs(std::string_view op, const Tensor& input,
                                          const Tensor& target, const Tensor* weight,
                                          const LossOptions& options) {
  KILN_RETURN_IF_ERROR(check_dtype(op, "input 0", input.dtype(), kFloatDtypes));
  KILN_RETURN_IF_ERROR(check_dtype(op, "input 1 (target)", target.dtype(), kIndexDtypes));
  KILN_RETURN_IF_ERROR(internal::check_contiguous(op, "input 0", input));
  KILN_RETURN_IF_ERROR(internal::check_contiguous(op, "input 1 (target)", target));
  const std::vector<int64_t> in(input.sizes().begin(), input.sizes().end());
  const std::vector<int64_t> expected_target = [&] {
    std::vector<int64_t> t;
    if (in.size() >= 2) t.push_back(in[0]);
    for (size_t d = 2; d < in.size(); ++d) t.push_back(in[d]);
    return t;
  }();
  if (in.size() < 2) {
    return internal::invalid_argument(op, "input 0 has shape " + runtime::shape_to_string(in) +
                                              " (expected [N, C] or [N, C, d1, ...])");
  }
  const std::vector<int64_t> t(target.sizes().begin(), target.sizes().end());
  if (t != expected_target) {
    return internal::invalid_argument(
        op, "input 1 (target) has shape " + runtime::shape_to_string(t) + " (expected " +
                runtime::shape_to_string(expected_target) + " for input 0 of shape " +
                runtime::shape_to_string(in) + ")");
  }
  if (weight != nullptr) {
    KILN_RETURN_IF_ERROR(
        internal::check_same_dtype(op, "input 2 (weight)", weight->dtype(), input.dtype()));
    KILN_RETURN_IF_ERROR(internal::check_contiguous(op, "input 2 (weight)", *weight));
    if (weight->dim() != 1 || weight->size(0) != in[1]) {
      return internal::invalid_argument(
          op, "input 2 (weight) has shape " +
                  runtime::shape_to_string(
                      std::vector<int64_t>(weight->sizes().begin(), weight->sizes().end())) +
                  " (expected [" + std::to_string(in[1]) + "], one weight per class)");
    }
  }
  if (options.reduction == Reduction::None) return t;
  return std::vector<int64_t>{};
}

// The loss of `log_prob` (contiguous, [N, C, D...]) at `target` into `out`.
Status nll(std::string_view op, const Tensor& log_prob, const Tensor& target, const Tensor* weight,
           const LossOptions& options, Tensor& out) {
  const int64_t n = log_prob.size(0), classes = log_prob.size(1);
  const int64_t inner = n * classes == 0 ? 0 : log_prob.numel() / (n * classes);
  return dispatch<DtypeGroup::Float>(op, "input 0", log_prob.dtype(), [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    const T* p = log_prob.data_ptr<T>();
    const T* w = weight != nullptr ? weight->data_ptr<T>() : nullptr;
    T* result = out.mutable_data_ptr<T>();
    double total = 0, total_weight = 0;
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t d = 0; d < inner; ++d) {
        const int64_t at = i * inner + d;
        const int64_t cls = target.dtype() == ScalarType::Int32
                                ? int64_t{target.data_ptr<int32_t>()[at]}
                                : target.data_ptr<int64_t>()[at];
        double loss = 0, cls_weight = 0;
        if (!options.ignore_index || cls != *options.ignore_index) {
          if (cls < 0 || cls >= classes) {
            return internal::invalid_argument(
                op, "input 1 (target) holds " + std::to_string(cls) + " at flat index " +
                        std::to_string(at) + " (expected a class in [0, " +
                        std::to_string(classes) + ")" +
                        (options.ignore_index
                             ? " or ignore_index " + std::to_string(*options.ignore_index)
                             : std::string()) +
                        ")");
          }
          cls_weight = w != nullptr ? static_cast<double>(load(w[cls])) : 1.0;
          loss = -static_cast<double>(load(p[(i * classes + cls) * inner + d])) * cls_weight;
        }
        if (options.reduction == Reduction::None) {
          result[at] = store<T>(static_cast<ComputeType<T>>(loss));
        }
        total += loss;
        total_weight += cls_weight;
      }
    }
    if (options.reduction == Reduction::Sum) {
      result[0] = store<T>(static_cast<ComputeType<T>>(total));
    } else if (options.reduction == Reduction::Mean) {
      // No target counted: 0 / 0, as ONNX's reference gives (nan).
      result[0] = store<T>(static_cast<ComputeType<T>>(total / total_weight));
    }
    return Status();
  });
}

Status nll_kernel(runtime::KernelContext& context, Span<EValue* const> inputs,
                  Span<EValue* const> outputs, const runtime::Attributes& attributes) {
  KILN_RETURN_IF_ERROR(internal::check_arity(kNll, inputs, outputs, 2, 3, 1));
  KILN_ASSIGN_OR_RETURN(LossOptions options, read_options(kNll, attributes));
  KILN_ASSIGN_OR_RETURN(const Tensor* input, internal::input_tensor(kNll, inputs, 0));
  KILN_ASSIGN_OR_RETURN(const Tensor* target, internal::input_tensor(kNll, inputs, 1));
  KILN_ASSIGN_OR_RETURN(const Tensor* weight, internal::optional_input(kNll, inputs, 2));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> shape,
                        check_inputs(kNll, *input, *target, weight, options));
  KILN_ASSIGN_OR_RETURN(EValue * out, internal::output_tensor(kNll, outputs, 0, input->dtype()));
  KILN_RETURN_IF_ERROR(internal::resize_output(context, kNll, *out, shape));
  return nll(kNll, *input, *target, weight, options, out->to_tensor());
}

Status sce_kernel(runtime::KernelContext& context, Span<EValue* const> inputs,
                  Span<EValue* const> outputs, const runtime::Attributes& attributes) {
  const size_t num_outputs = outputs.size() == 2 ? 2 : 1;
  KILN_RETURN_IF_ERROR(internal::check_arity(kSce, inputs, outputs, 2, 3, num_outputs));
  KILN_ASSIGN_OR_RETURN(LossOptions options, read_options(kSce, attributes));
  KILN_ASSIGN_OR_RETURN(const Tensor* scores, internal::input_tensor(kSce, inputs, 0));
  KILN_ASSIGN_OR_RETURN(const Tensor* labels, internal::input_tensor(kSce, inputs, 1));
  KILN_ASSIGN_OR_RETURN(const Tensor* weight, internal::optional_input(kSce, inputs, 2));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> shape,
                        check_inputs(kSce, *scores, *labels, weight, options));
  KILN_ASSIGN_OR_RETURN(EValue * out, internal::output_tensor(kSce, outputs, 0, scores->dtype()));
  KILN_RETURN_IF_ERROR(internal::resize_output(context, kSce, *out, shape));
  // The log-probabilities: into output 1 when asked for, else into memory of the call's own.
  std::vector<uint8_t> own;
  std::optional<Tensor> log_prob;
  if (num_outputs == 2) {
    KILN_ASSIGN_OR_RETURN(EValue * second,
                          internal::output_tensor(kSce, outputs, 1, scores->dtype()));
    KILN_RETURN_IF_ERROR(internal::resize_output(context, kSce, *second, scores->sizes()));
    log_prob = second->to_tensor();
  } else {
    own.resize(scores->nbytes());
    log_prob =
        Tensor(scores->dtype(),
               std::vector<int64_t>(scores->sizes().begin(), scores->sizes().end()), own.data());
  }
  KILN_RETURN_IF_ERROR(log_softmax(*scores, 1, *log_prob));
  return nll(kSce, *log_prob, *labels, weight, options, out->to_tensor());
}

const runtime::KernelRegistration kRegisterNll(kNll, nll_kernel);
const runtime::KernelRegistration kRegisterSce(kSce, sce_kernel);

}  // namespace

}  // namespace kiln::kernels
