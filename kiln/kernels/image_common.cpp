#include <kiln/kernels/dispatch.h>
#include <kiln/kernels/image_common.h>

#include <string>
#include <vector>

namespace kiln::kernels::internal {

using runtime::EValue;
using runtime::Result;
using runtime::Span;
using runtime::Status;
using runtime::Tensor;

Result<std::vector<double>> read_float_list(std::string_view op, Span<EValue* const> inputs,
                                            size_t index, std::string_view name) {
  const std::string subject = "input " + std::to_string(index) + " (" + std::string(name) + ")";
  KILN_ASSIGN_OR_RETURN(const Tensor* tensor, input_tensor(op, inputs, index));
  KILN_RETURN_IF_ERROR(check_contiguous(op, subject, *tensor));
  if (tensor->dim() > 1) {
    return invalid_argument(
        op, subject + " has rank " + std::to_string(tensor->dim()) + " (expected 0 or 1)");
  }
  std::vector<double> out(static_cast<size_t>(tensor->numel()));
  KILN_RETURN_IF_ERROR(dispatch<DtypeGroup::Float>(op, subject, tensor->dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* data = tensor->data_ptr<T>();
    for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<double>(load(data[i]));
    return Status();
  }));
  return out;
}

Result<std::string> string_attribute(std::string_view op, const runtime::Attributes& attributes,
                                     std::string_view name, std::string fallback) {
  auto value = attributes.get_string(name, std::move(fallback));
  if (!value.ok()) return value.status().with_context(action(op));
  return *value;
}

Result<double> double_attribute(std::string_view op, const runtime::Attributes& attributes,
                                std::string_view name, double fallback) {
  auto value = attributes.get_double(name, fallback);
  if (!value.ok()) return value.status().with_context(action(op));
  return *value;
}

}  // namespace kiln::kernels::internal
