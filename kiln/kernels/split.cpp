#include <kiln/kernels/kernels.h>
#include <kiln/kernels/layout.h>

#include <algorithm>
#include <cstring>
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

constexpr std::string_view kOp = "Split";

// The parts come from input 1 (opset 13+), else attribute 'split' (opsets 2-12), else equal
// parts for as many outputs as the node has (or attribute 'num_outputs', opset 18).
Status split_kernel(runtime::KernelContext& context, Span<EValue* const> inputs,
                    Span<EValue* const> outputs, const runtime::Attributes& attributes) {
  if (outputs.empty()) return internal::invalid_argument(kOp, "got 0 outputs (expected 1 or more)");
  KILN_RETURN_IF_ERROR(internal::check_arity(kOp, inputs, outputs, 1, 2, outputs.size()));
  KILN_ASSIGN_OR_RETURN(int64_t axis, internal::int_attribute(kOp, attributes, "axis", 0));
  KILN_ASSIGN_OR_RETURN(int64_t num_outputs,
                        internal::int_attribute(kOp, attributes, "num_outputs",
                                                static_cast<int64_t>(outputs.size())));
  if (num_outputs != static_cast<int64_t>(outputs.size())) {
    return internal::invalid_argument(
        kOp, "attribute 'num_outputs' is " + std::to_string(num_outputs) + " (expected " +
                 std::to_string(outputs.size()) + ", the number of outputs)");
  }
  KILN_ASSIGN_OR_RETURN(const Tensor* x, internal::input_tensor(kOp, inputs, 0));
  KILN_ASSIGN_OR_RETURN(auto parts,
                        internal::int_list_input_or_attribute(kOp, inputs, 1, attributes, "split"));
  KILN_ASSIGN_OR_RETURN(axis, internal::normalize_axis(kOp, "attribute 'axis'", axis, x->dim()));
  auto sizes = split_sizes(x->size(axis), outputs.size(), parts);
  if (!sizes.ok()) return sizes.status().with_context(internal::action(kOp));
  std::vector<Tensor*> targets;
  std::vector<int64_t> shape(x->sizes().begin(), x->sizes().end());
  for (size_t i = 0; i < outputs.size(); ++i) {
    KILN_ASSIGN_OR_RETURN(EValue * out, internal::output_tensor(kOp, outputs, i, x->dtype()));
    shape[static_cast<size_t>(axis)] = (*sizes)[i];
    Status status = context.resize(*out, shape);
    if (!status.ok()) {
      return status.with_context(internal::action(kOp) + ": resize output " + std::to_string(i) +
                                 " to " + runtime::shape_to_string(shape));
    }
    targets.push_back(&out->to_tensor());
  }
  return split(*x, axis, targets);
}

const runtime::KernelRegistration kRegisterSplit("Split", split_kernel);

}  // namespace

Result<std::vector<int64_t>> split_sizes(int64_t dim, size_t num_outputs,
                                         const std::optional<std::vector<int64_t>>& split) {
  if (split.has_value()) {
    int64_t total = 0;
    bool valid = split->size() == num_outputs;
    for (int64_t part : *split) {
      valid = valid && part >= 0;
      total += part;
    }
    if (!valid || total != dim) {
      return Status(Error::InvalidArgument,
                    "split " + runtime::shape_to_string(*split) + " (expected " +
                        std::to_string(num_outputs) + " sizes >= 0 that add up to " +
                        std::to_string(dim) + ", the size of the split axis)");
    }
    return *split;
  }
  const auto n = static_cast<int64_t>(num_outputs);
  const int64_t part = (dim + n - 1) / n;
  if (part * (n - 1) > dim) {
    return Status(Error::InvalidArgument, "axis of size " + std::to_string(dim) +
                                              " cannot be split into " + std::to_string(n) +
                                              " parts (expected at least " +
                                              std::to_string(part * (n - 1)) + " elements)");
  }
  std::vector<int64_t> sizes(num_outputs, part);
  sizes.back() = dim - part * (n - 1);
  return sizes;
}

Status split(const Tensor& x, int64_t axis, Span<Tensor* const> outputs) {
  KILN_ASSIGN_OR_RETURN(axis, internal::normalize_axis(kOp, "axis", axis, x.dim()));
  KILN_RETURN_IF_ERROR(internal::check_contiguous(kOp, "input 0", x));
  int64_t total = 0;
  std::vector<int64_t> expected(x.sizes().begin(), x.sizes().end());
  for (size_t i = 0; i < outputs.size(); ++i) {
    const Tensor& out = *outputs[i];
    expected[static_cast<size_t>(axis)] = out.dim() == x.dim() ? out.size(axis) : 0;
    const std::string subject = "output " + std::to_string(i);
    KILN_RETURN_IF_ERROR(internal::check_same_dtype(kOp, subject, out.dtype(), x.dtype()));
    KILN_RETURN_IF_ERROR(internal::check_contiguous(kOp, subject, out));
    if (!std::equal(out.sizes().begin(), out.sizes().end(), expected.begin(), expected.end())) {
      return internal::invalid_argument(
          kOp, subject + " has shape " + runtime::shape_to_string(out.sizes()) +
                   " (expected input 0's shape " + runtime::shape_to_string(x.sizes()) +
                   " except along axis " + std::to_string(axis) + ")");
    }
    total += out.size(axis);
  }
  if (total != x.size(axis)) {
    return internal::invalid_argument(kOp, "outputs have " + std::to_string(total) +
                                               " elements along axis " + std::to_string(axis) +
                                               " (expected " + std::to_string(x.size(axis)) + ")");
  }
  int64_t outer = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= x.size(d);
  if (x.numel() == 0) return Status();
  const size_t in_row = static_cast<size_t>(x.numel() / outer) * x.element_size();
  const auto* source = static_cast<const uint8_t*>(x.data());
  size_t column = 0;
  for (Tensor* out : outputs) {
    const size_t block =
        out->numel() == 0 ? 0 : static_cast<size_t>(out->numel() / outer) * out->element_size();
    auto* target = static_cast<uint8_t*>(out->mutable_data());
    for (int64_t o = 0; o < outer && block > 0; ++o) {
      std::memcpy(target + o * block, source + o * in_row + column, block);
    }
    column += block;
  }
  return Status();
}

}  // namespace kiln::kernels
