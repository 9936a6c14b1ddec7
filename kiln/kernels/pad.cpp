#include <kiln/kernels/index_ops.h>
#include <kiln/kernels/index_util.h>
#include <kiln/kernels/layout.h>

#include <algorithm>
#include <array>
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

constexpr std::string_view kOp = "Pad";

// Opset 11+ passes pads, constant_value and (opset 18) axes as inputs 1-3; opsets 2-10 pass
// `pads` and the float `value` as attributes (opset 1 called the list `paddings`).
Status pad_kernel(runtime::KernelContext& context, Span<EValue* const> inputs,
                  Span<EValue* const> outputs, const runtime::Attributes& attributes) {
  KILN_RETURN_IF_ERROR(internal::check_arity(kOp, inputs, outputs, 1, 4, 1));
  auto mode_name = attributes.get_string("mode", "constant");
  if (!mode_name.ok()) return mode_name.status().with_context(internal::action(kOp));
  auto mode = pad_mode_from_string(*mode_name);
  if (!mode.ok()) return mode.status().with_context(internal::action(kOp));
  KILN_ASSIGN_OR_RETURN(const Tensor* x, internal::input_tensor(kOp, inputs, 0));
  std::vector<int64_t> pads, axes;
  if (!internal::is_absent(inputs, 1)) {
    KILN_ASSIGN_OR_RETURN(pads, internal::read_int_list(kOp, inputs, 1, "pads"));
  } else {
    const char* name = attributes.has("pads") ? "pads" : "paddings";
    if (!attributes.has(name)) {
      return internal::invalid_argument(
          kOp, "input 1 (pads) and attribute 'pads' are both absent (expected one of them)");
    }
    auto values = attributes.get_ints(name);
    if (!values.ok()) return values.status().with_context(internal::action(kOp));
    pads = std::move(*values);
  }
  if (!internal::is_absent(inputs, 3)) {
    KILN_ASSIGN_OR_RETURN(axes, internal::read_int_list(kOp, inputs, 3, "axes"));
    KILN_ASSIGN_OR_RETURN(axes, internal::normalize_axes(kOp, "input 3 (axes)", axes, x->dim()));
  }
  auto full = pad_full_pads(x->dim(), pads, axes);
  if (!full.ok()) return full.status().with_context(internal::action(kOp));
  // The constant: input 2 when present and not empty, else attribute 'value' (default 0).
  const Tensor* value = nullptr;
  if (!internal::is_absent(inputs, 2)) {
    KILN_ASSIGN_OR_RETURN(value, internal::input_tensor(kOp, inputs, 2));
    if (value->numel() == 0) value = nullptr;
  }
  std::array<uint64_t, 1> storage = {0};
  Tensor attribute_value(x->dtype(), std::vector<int64_t>(), storage.data());
  if (value == nullptr) {
    auto number = attributes.get_double("value", 0.0);
    if (!number.ok()) return number.status().with_context(internal::action(kOp));
    KILN_RETURN_IF_ERROR(dispatch<DtypeGroup::All>(kOp, "input 0", x->dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      *attribute_value.mutable_data_ptr<T>() = store<T>(static_cast<ComputeType<T>>(*number));
      return Status();
    }));
    value = &attribute_value;
  }
  auto shape = pad_shape(x->sizes(), *full);
  if (!shape.ok()) return shape.status().with_context(internal::action(kOp));
  KILN_ASSIGN_OR_RETURN(EValue * out, internal::output_tensor(kOp, outputs, 0, x->dtype()));
  KILN_RETURN_IF_ERROR(internal::resize_output(context, kOp, *out, *shape));
  return pad(*x, *full, *mode, value, out->to_tensor());
}

const runtime::KernelRegistration kRegisterPad("Pad", pad_kernel);

// The source index along one dimension for output index `o`: `j` = o - pad_begin relative to
// the `n` elements left after cropping; -1 means "the constant".
int64_t source_index(int64_t j, int64_t n, PadMode mode) {
  if (j >= 0 && j < n) return j;
  switch (mode) {
    case PadMode::Constant:
      return -1;
    case PadMode::Edge:
      return std::clamp<int64_t>(j, 0, n - 1);
    case PadMode::Wrap:
      return ((j % n) + n) % n;
    case PadMode::Reflect: {
      if (n == 1) return 0;
      const int64_t period = 2 * (n - 1);
      j = ((j % period) + period) % period;
      return j < n ? j : period - j;
    }
  }
  return -1;
}

}  // namespace

Result<PadMode> pad_mode_from_string(std::string_view name) {
  if (name == "constant") return PadMode::Constant;
  if (name == "reflect") return PadMode::Reflect;
  if (name == "edge") return PadMode::Edge;
  if (name == "wrap") return PadMode::Wrap;
  return Status(Error::InvalidArgument, "attribute 'mode' is '" + std::string(name) +
                                            "' (expected constant, reflect, edge or wrap)");
}

Result<std::vector<int64_t>> pad_full_pads(int64_t rank, Span<const int64_t> pads,
                                           Span<const int64_t> axes) {
  const size_t count = axes.empty() ? static_cast<size_t>(rank) : axes.size();
  if (pads.size() != 2 * count) {
    return Status(Error::InvalidArgument,
                  "pads " + runtime::shape_to_string(pads) + " has " + std::to_string(pads.size()) +
                      " entries (expected " + std::to_string(2 * count) +
                      ": a begin and an end for each of " +
                      (axes.empty() ? "the " + std::to_string(rank) + " dimensions of input 0"
                                    : "the axes " + runtime::shape_to_string(axes)) +
                      ")");
  }
  std::vector<int64_t> full(2 * static_cast<size_t>(rank), 0);
  for (size_t i = 0; i < count; ++i) {
    const int64_t axis = axes.empty() ? static_cast<int64_t>(i) : axes[i];
    if (axis < 0 || axis >= rank) {
      return Status(Error::InvalidArgument, "axes " + runtime::shape_to_string(axes) + " has " +
                                                std::to_string(axis) + " (expected 0.." +
                                                std::to_string(rank - 1) + ")");
    }
    full[static_cast<size_t>(axis)] = pads[i];
    full[static_cast<size_t>(axis + rank)] = pads[i + count];
  }
  return full;
}

Result<std::vector<int64_t>> pad_shape(Span<const int64_t> input, Span<const int64_t> pads) {
  if (pads.size() != 2 * input.size()) {
    return Status(Error::InvalidArgument,
                  "pads " + runtime::shape_to_string(pads) + " has " + std::to_string(pads.size()) +
                      " entries (expected " + std::to_string(2 * input.size()) +
                      " for input 0 of shape " + runtime::shape_to_string(input) + ")");
  }
  std::vector<int64_t> shape(input.size());
  for (size_t d = 0; d < input.size(); ++d) {
    const int64_t begin = pads[d], end = pads[d + input.size()];
    const int64_t kept = input[d] - std::max<int64_t>(-begin, 0) - std::max<int64_t>(-end, 0);
    if (kept < 0) {
      return Status(Error::InvalidArgument, "pads " + runtime::shape_to_string(pads) + " crop " +
                                                std::to_string(input[d] - kept) +
                                                " elements from dimension " + std::to_string(d) +
                                                " of size " + std::to_string(input[d]) +
                                                " (expected at most its size)");
    }
    shape[d] = kept + std::max<int64_t>(begin, 0) + std::max<int64_t>(end, 0);
  }
  return shape;
}

Status pad(const Tensor& x, Span<const int64_t> pads, PadMode mode, const Tensor* value,
           Tensor& out) {
  auto shape = pad_shape(x.sizes(), pads);
  if (!shape.ok()) return shape.status().with_context(internal::action(kOp));
  KILN_RETURN_IF_ERROR(internal::check_contiguous(kOp, "input 0", x));
  KILN_RETURN_IF_ERROR(internal::check_output(kOp, out, x.dtype(), *shape));
  if (value != nullptr) {
    KILN_RETURN_IF_ERROR(
        internal::check_same_dtype(kOp, "input 2 (constant_value)", value->dtype(), x.dtype()));
    if (value->numel() != 1) {
      return internal::invalid_argument(kOp, "input 2 (constant_value) has shape " +
                                                 runtime::shape_to_string(value->sizes()) +
                                                 " (expected one element)");
    }
  }
  const size_t rank = x.sizes().size();
  // Per dimension: the input index each output index reads, or -1 for the constant.
  std::vector<std::vector<int64_t>> maps(rank);
  for (size_t d = 0; d < rank; ++d) {
    const int64_t crop = std::max<int64_t>(-pads[d], 0);
    const int64_t begin = std::max<int64_t>(pads[d], 0);
    const int64_t kept = (*shape)[d] - begin - std::max<int64_t>(pads[d + rank], 0);
    if (kept == 0 && (*shape)[d] > 0 && mode != PadMode::Constant) {
      return internal::invalid_argument(
          kOp, std::string(mode == PadMode::Edge   ? "edge"
                           : mode == PadMode::Wrap ? "wrap"
                                                   : "reflect") +
                   " mode pads dimension " + std::to_string(d) + " of " +
                   internal::describe_input(0, x.sizes()) +
                   ", which has no elements left to copy (expected mode 'constant')");
    }
    maps[d].resize(static_cast<size_t>((*shape)[d]));
    for (int64_t o = 0; o < (*shape)[d]; ++o) {
      const int64_t j = source_index(o - begin, kept, mode);
      maps[d][static_cast<size_t>(o)] = j < 0 ? -1 : j + crop;
    }
  }
  if (out.numel() == 0) return Status();
  const auto strides = internal::dense_strides(x.sizes());
  return internal::dispatch_bytes(x.element_size(), [&](auto tag) {
    using U = typename decltype(tag)::type;
    U constant{};
    if (value != nullptr) std::memcpy(&constant, value->data(), sizeof(U));
    const U* source = x.data_ptr<U>();
    U* target = out.mutable_data_ptr<U>();
    if (rank == 0) {
      target[0] = source[0];
      return Status();
    }
    const int64_t row = (*shape)[rank - 1];
    const auto& last = maps[rank - 1];
    std::vector<int64_t> position(rank - 1, 0);
    for (int64_t start = 0; start < out.numel(); start += row) {
      int64_t base = 0;
      bool constant_row = false;
      for (size_t d = 0; d + 1 < rank; ++d) {
        const int64_t i = maps[d][static_cast<size_t>(position[d])];
        constant_row |= i < 0;
        base += i * strides[d];
      }
      for (int64_t o = 0; o < row; ++o) {
        const int64_t i = last[static_cast<size_t>(o)];
        target[start + o] = constant_row || i < 0 ? constant : source[base + i];
      }
      for (size_t d = rank - 1; d-- > 0;) {
        if (++position[d] < (*shape)[d]) break;
        position[d] = 0;
      }
    }
    return Status();
  });
}

}  // namespace kiln::kernels
