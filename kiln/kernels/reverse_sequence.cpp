#include <kiln/kernels/index_ops.h>
#include <kiln/kernels/index_util.h>
#include <kiln/kernels/layout.h>

#include <array>
#include <cstring>
#include <string>

namespace kiln::kernels {

using runtime::EValue;
using runtime::Span;
using runtime::Status;
using runtime::Tensor;

namespace {

constexpr std::string_view kOp = "ReverseSequence";

Status reverse_sequence_kernel(runtime::KernelContext& context, Span<EValue* const> inputs,
                               Span<EValue* const> outputs, const runtime::Attributes& attributes) {
  KILN_RETURN_IF_ERROR(internal::check_arity(kOp, inputs, outputs, 2, 2, 1));
  KILN_ASSIGN_OR_RETURN(int64_t batch_axis,
                        internal::int_attribute(kOp, attributes, "batch_axis", 1));
  KILN_ASSIGN_OR_RETURN(int64_t time_axis,
                        internal::int_attribute(kOp, attributes, "time_axis", 0));
  KILN_ASSIGN_OR_RETURN(const Tensor* x, internal::input_tensor(kOp, inputs, 0));
  KILN_ASSIGN_OR_RETURN(const Tensor* lens, internal::input_tensor(kOp, inputs, 1));
  KILN_ASSIGN_OR_RETURN(EValue * out, internal::output_tensor(kOp, outputs, 0, x->dtype()));
  KILN_RETURN_IF_ERROR(internal::resize_output(context, kOp, *out, x->sizes()));
  return reverse_sequence(*x, *lens, batch_axis, time_axis, out->to_tensor());
}

const runtime::KernelRegistration kRegisterReverseSequence("ReverseSequence",
                                                           reverse_sequence_kernel);

}  // namespace

Status reverse_sequence(const Tensor& x, const Tensor& sequence_lens, int64_t batch_axis,
                        int64_t time_axis, Tensor& out) {
  KILN_RETURN_IF_ERROR(
      check_dtype(kOp, "input 1 (sequence_lens)", sequence_lens.dtype(), kIndexDtypes));
  if (x.dim() < 2) {
    return internal::invalid_argument(kOp, internal::describe_input(0, x.sizes()) + " has rank " +
                                               std::to_string(x.dim()) + " (expected at least 2)");
  }
  const bool axes_ok = (batch_axis == 0 && time_axis == 1) || (batch_axis == 1 && time_axis == 0);
  if (!axes_ok) {
    return internal::invalid_argument(
        kOp, "attributes 'batch_axis' = " + std::to_string(batch_axis) + " and 'time_axis' = " +
                 std::to_string(time_axis) + " (expected 0 and 1 in either order)");
  }
  KILN_RETURN_IF_ERROR(internal::check_contiguous(kOp, "input 0", x));
  KILN_RETURN_IF_ERROR(internal::check_output(kOp, out, x.dtype(), x.sizes()));
  const int64_t batch = x.size(batch_axis);
  const int64_t time = x.size(time_axis);
  const std::array<int64_t, 1> expected = {batch};
  KILN_RETURN_IF_ERROR(internal::check_shape(kOp, "input 1 (sequence_lens)", sequence_lens.sizes(),
                                             expected, "the batch size of input 0"));
  for (int64_t b = 0; b < batch; ++b) {
    KILN_RETURN_IF_ERROR(internal::check_index(
        kOp, "input 1 (sequence_lens)", internal::index_at(sequence_lens, b), b, 0, time,
        "for time axis " + std::to_string(time_axis) + " of size " + std::to_string(time)));
  }
  const int64_t inner = internal::product(x.sizes(), 2, x.sizes().size());
  const size_t block = static_cast<size_t>(inner) * x.element_size();
  // Offsets in blocks: dimension 0 steps by x.size(1), dimension 1 by one.
  const int64_t batch_step = batch_axis == 0 ? x.size(1) : 1;
  const int64_t time_step = time_axis == 0 ? x.size(1) : 1;
  const auto* source = static_cast<const uint8_t*>(x.data());
  auto* target = static_cast<uint8_t*>(out.mutable_data());
  if (block == 0) return Status();
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t length = internal::index_at(sequence_lens, b);
    for (int64_t t = 0; t < time; ++t) {
      const int64_t from = t < length ? length - 1 - t : t;
      std::memcpy(target + static_cast<size_t>(b * batch_step + t * time_step) * block,
                  source + static_cast<size_t>(b * batch_step + from * time_step) * block, block);
    }
  }
  return Status();
}

}  // namespace kiln::kernels
