#include <kiln/kernels/kernels.h>
#include <kiln/kernels/norm_helpers.h>

#include <cstring>
#include <string>

namespace kiln::kernels {

using runtime::Error;
using runtime::EValue;
using runtime::ScalarType;
using runtime::Span;
using runtime::Status;
using runtime::Tensor;

namespace {

constexpr std::string_view kOp = "Dropout";

// Opset 12+ passes `ratio` and `training_mode` as optional inputs 1 and 2; older opsets give
// `ratio` as an attribute and never train.
Status dropout_kernel(runtime::KernelContext& context, Span<EValue* const> inputs,
                      Span<EValue* const> outputs, const runtime::Attributes& attributes) {
  KILN_RETURN_IF_ERROR(internal::check_arity(kOp, inputs, outputs, 1, 3, outputs.size()));
  if (outputs.empty() || outputs.size() > 2) {
    return internal::invalid_argument(
        kOp, "got " + std::to_string(outputs.size()) + " outputs (expected 1 or 2)");
  }
  DropoutOptions options;
  KILN_ASSIGN_OR_RETURN(options.ratio, internal::double_attribute(kOp, attributes, "ratio", 0.5));
  if (!internal::is_absent(inputs, 1)) {
    KILN_ASSIGN_OR_RETURN(const Tensor* ratio, internal::input_tensor(kOp, inputs, 1));
    KILN_RETURN_IF_ERROR(check_dtype(kOp, "input 1 (ratio)", ratio->dtype(), kFloatDtypes));
    if (ratio->numel() != 1) {
      return internal::invalid_argument(kOp, "input 1 (ratio) has shape " +
                                                 runtime::shape_to_string(ratio->sizes()) +
                                                 " (expected a scalar)");
    }
    options.ratio = internal::read_float(*ratio, 0);
  }
  if (!internal::is_absent(inputs, 2)) {
    KILN_ASSIGN_OR_RETURN(const Tensor* training, internal::input_tensor(kOp, inputs, 2));
    KILN_RETURN_IF_ERROR(
        check_dtype(kOp, "input 2 (training_mode)", training->dtype(), kBoolDtypes));
    if (training->numel() != 1) {
      return internal::invalid_argument(kOp, "input 2 (training_mode) has shape " +
                                                 runtime::shape_to_string(training->sizes()) +
                                                 " (expected a scalar)");
    }
    options.training = training->data_ptr<bool>()[0];
  }
  KILN_ASSIGN_OR_RETURN(const Tensor* x, internal::input_tensor(kOp, inputs, 0));
  KILN_RETURN_IF_ERROR(check_dtype(kOp, "input 0", x->dtype(), kFloatDtypes));
  KILN_ASSIGN_OR_RETURN(EValue * out, internal::output_tensor(kOp, outputs, 0, x->dtype()));
  EValue* mask = nullptr;
  if (outputs.size() > 1) {
    KILN_ASSIGN_OR_RETURN(mask,
                          internal::output_tensor_of_dtype(kOp, outputs, 1, ScalarType::Bool));
  }
  KILN_RETURN_IF_ERROR(internal::resize_output(context, kOp, *out, x->sizes()));
  if (mask != nullptr)
    KILN_RETURN_IF_ERROR(internal::resize_output(context, kOp, *mask, x->sizes()));
  return dropout(*x, options, out->to_tensor(), mask != nullptr ? &mask->to_tensor() : nullptr);
}

const runtime::KernelRegistration kRegisterDropout("Dropout", dropout_kernel);

}  // namespace

Status dropout(const Tensor& x, const DropoutOptions& options, Tensor& out, Tensor* mask) {
  KILN_RETURN_IF_ERROR(check_dtype(kOp, "input 0", x.dtype(), kFloatDtypes));
  if (options.training && !(options.ratio >= 0 && options.ratio < 1)) {
    return internal::invalid_argument(
        kOp, "ratio is " + std::to_string(options.ratio) + " (expected 0 <= ratio < 1)");
  }
  if (options.training && options.ratio != 0) {
    return Status(Error::NotSupported,
                  internal::action(kOp) + ": training_mode is true with ratio " +
                      std::to_string(options.ratio) +
                      " (expected training_mode false, or ratio 0: random dropout is not "
                      "supported)");
  }
  if (mask != nullptr) {
    KILN_RETURN_IF_ERROR(check_dtype(kOp, "output 1 (mask)", mask->dtype(), kBoolDtypes));
    KILN_RETURN_IF_ERROR(internal::check_contiguous(kOp, "output 1 (mask)", *mask));
    if (!std::equal(mask->sizes().begin(), mask->sizes().end(), x.sizes().begin(),
                    x.sizes().end())) {
      return internal::invalid_argument(
          kOp, "output 1 (mask) has shape " + runtime::shape_to_string(mask->sizes()) +
                   " (expected " + runtime::shape_to_string(x.sizes()) + ")");
    }
  }
  KILN_RETURN_IF_ERROR(internal::check_output(kOp, out, x.dtype(), x.sizes()));
  KILN_RETURN_IF_ERROR(internal::copy_elements(kOp, x, out));
  if (mask != nullptr && mask->numel() > 0) {
    std::memset(mask->mutable_data(), 1, static_cast<size_t>(mask->numel()));
  }
  return Status();
}

}  // namespace kiln::kernels
