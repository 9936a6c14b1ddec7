#include <kiln/kernels/conv_geometry.h>

#include <kiln/kernels/adapter.h>
#include <kiln/kernels/dispatch.h>

#include <algorithm>
#include <limits>
#include <string>

namespace kiln::kernels {

using runtime::Error;
using runtime::Result;
using runtime::Span;
using runtime::Status;

Result<AutoPad> parse_auto_pad(std::string_view op, std::string_view value) {
  if (value.empty() || value == "NOTSET") return AutoPad::NotSet;
  if (value == "SAME_UPPER") return AutoPad::SameUpper;
  if (value == "SAME_LOWER") return AutoPad::SameLower;
  if (value == "VALID") return AutoPad::Valid;
  return internal::invalid_argument(op, "attribute 'auto_pad' is '" + std::string(value) +
                                            "' (expected NOTSET, SAME_UPPER, SAME_LOWER or VALID)");
}

namespace internal {

namespace {

int64_t ceil_div(int64_t a, int64_t b) { return a >= 0 ? (a + b - 1) / b : -((-a) / b); }

}  // namespace

Span1d valid_range(int64_t count, int64_t limit, int64_t step, int64_t offset) {
  // o * step + offset >= 0  <=>  o >= ceil(-offset / step); < limit  <=>  o < ceil((limit -
  // offset) / step).
  Span1d range;
  range.first = offset >= 0 ? 0 : ceil_div(-offset, step);
  range.last = limit - offset <= 0 ? 0 : ceil_div(limit - offset, step);
  range.last = std::min(range.last, count);
  range.first = std::min(range.first, range.last);
  return range;
}

Status check_spatial_rank(std::string_view op, std::string_view subject, Span<const int64_t> x) {
  if (x.size() < 3) {
    return invalid_argument(op, std::string(subject) + " of shape " + runtime::shape_to_string(x) +
                                    " has rank " + std::to_string(x.size()) +
                                    " (expected N, C and 1 to 3 spatial axes)");
  }
  if (x.size() > 2 + kMaxSpatialRank) {
    return Status(Error::NotSupported, action(op) + ": " + std::string(subject) + " of shape " +
                                           runtime::shape_to_string(x) + " has " +
                                           std::to_string(x.size() - 2) +
                                           " spatial axes (expected 1 to 3)");
  }
  return Status();
}

Result<std::vector<int64_t>> axis_values(std::string_view op, std::string_view name,
                                         const std::vector<int64_t>& values, size_t count,
                                         int64_t fallback, int64_t min) {
  if (values.empty()) return std::vector<int64_t>(count, fallback);
  const std::string subject =
      "attribute '" + std::string(name) + "' " + runtime::shape_to_string(values);
  if (values.size() != count) {
    return invalid_argument(op, subject + " has " + std::to_string(values.size()) +
                                    " values (expected " + std::to_string(count) + ")");
  }
  constexpr int64_t kLimit = std::numeric_limits<int32_t>::max();
  for (int64_t value : values) {
    if (value < min || value > kLimit) {
      return invalid_argument(op, subject + " holds " + std::to_string(value) + " (expected " +
                                      std::to_string(min) + ".." + std::to_string(kLimit) + ")");
    }
  }
  return values;
}

Result<Window> forward_window(std::string_view op, Span<const int64_t> x,
                              Span<const int64_t> kernel, const std::vector<int64_t>& strides,
                              const std::vector<int64_t>& dilations,
                              const std::vector<int64_t>& pads, AutoPad auto_pad, bool ceil_mode) {
  KILN_RETURN_IF_ERROR(check_spatial_rank(op, "input 0", x));
  const size_t rank = x.size() - 2;
  KILN_ASSIGN_OR_RETURN(auto stride, axis_values(op, "strides", strides, rank, 1, 1));
  KILN_ASSIGN_OR_RETURN(auto dilation, axis_values(op, "dilations", dilations, rank, 1, 1));
  std::vector<int64_t> pad(2 * rank, 0);
  if (auto_pad == AutoPad::NotSet) {
    KILN_ASSIGN_OR_RETURN(pad, axis_values(op, "pads", pads, 2 * rank, 0, 0));
  }
  Window window;
  window.rank = rank;
  for (size_t axis = 0; axis < rank; ++axis) {
    const size_t s = window.slot(axis);
    const int64_t in = x[2 + axis];
    window.in[s] = in;
    window.kernel[s] = kernel[axis];
    window.stride[s] = stride[axis];
    window.dilation[s] = dilation[axis];
    if (kernel[axis] < 1) {
      return invalid_argument(op, "kernel size " + std::to_string(kernel[axis]) +
                                      " on spatial axis " + std::to_string(axis) +
                                      " (expected at least 1)");
    }
    // The window's extent and the padded input's, in 64 bits (attributes may be any int64).
    int64_t extent = 0, padded = 0;
    if (__builtin_mul_overflow(kernel[axis] - 1, dilation[axis], &extent) ||
        __builtin_add_overflow(extent, 1, &extent) ||
        __builtin_add_overflow(in, pad[axis], &padded) ||
        __builtin_add_overflow(padded, pad[rank + axis], &padded)) {
      return invalid_argument(op, "spatial axis " + std::to_string(axis) + ": size " +
                                      std::to_string(in) + ", pads " + std::to_string(pad[axis]) +
                                      " and " + std::to_string(pad[rank + axis]) + ", kernel " +
                                      std::to_string(kernel[axis]) + " and dilation " +
                                      std::to_string(dilation[axis]) +
                                      " overflow 64 bits (expected sizes a tensor can have)");
    }
    if (auto_pad == AutoPad::SameUpper || auto_pad == AutoPad::SameLower) {
      const int64_t out = ceil_div(in, stride[axis]);
      const int64_t total = std::max<int64_t>(0, (out - 1) * stride[axis] + extent - in);
      const int64_t small = total / 2;
      window.pad_begin[s] = auto_pad == AutoPad::SameUpper ? small : total - small;
      window.pad_end[s] = total - window.pad_begin[s];
      window.out[s] = out;
      continue;
    }
    window.pad_begin[s] = pad[axis];
    window.pad_end[s] = pad[rank + axis];
    const int64_t room = padded - extent;
    if (room < 0) {
      return invalid_argument(
          op, "spatial axis " + std::to_string(axis) + " of input 0 (shape " +
                  runtime::shape_to_string(x) + ") has size " + std::to_string(in) + " + pads " +
                  std::to_string(pad[axis]) + " and " + std::to_string(pad[rank + axis]) +
                  " (expected at least the dilated window size " + std::to_string(extent) + ")");
    }
    int64_t out = (ceil_mode && auto_pad == AutoPad::NotSet ? ceil_div(room, stride[axis])
                                                            : room / stride[axis]) +
                  1;
    // A window must start inside the input or its begin padding (ONNX, PyTorch).
    if (ceil_mode && (out - 1) * stride[axis] >= in + pad[axis]) --out;
    window.out[s] = out;
  }
  return window;
}

std::vector<int64_t> window_output_shape(int64_t batch, int64_t channels, const Window& window) {
  std::vector<int64_t> shape = {batch, channels};
  for (size_t axis = 0; axis < window.rank; ++axis) shape.push_back(window.out[window.slot(axis)]);
  return shape;
}

Result<std::vector<int64_t>> ints_attribute(std::string_view op,
                                            const runtime::Attributes& attributes,
                                            std::string_view name) {
  auto values = attributes.get_ints(name);
  if (!values.ok()) return values.status().with_context(action(op));
  return std::move(*values);
}

Result<WindowAttributes> read_window_attributes(std::string_view op,
                                                const runtime::Attributes& attributes) {
  WindowAttributes read;
  KILN_ASSIGN_OR_RETURN(read.kernel_shape, ints_attribute(op, attributes, "kernel_shape"));
  KILN_ASSIGN_OR_RETURN(read.strides, ints_attribute(op, attributes, "strides"));
  KILN_ASSIGN_OR_RETURN(read.dilations, ints_attribute(op, attributes, "dilations"));
  KILN_ASSIGN_OR_RETURN(read.pads, ints_attribute(op, attributes, "pads"));
  auto auto_pad = attributes.get_string("auto_pad", "NOTSET");
  if (!auto_pad.ok()) return auto_pad.status().with_context(action(op));
  KILN_ASSIGN_OR_RETURN(read.auto_pad, parse_auto_pad(op, *auto_pad));
  return read;
}

Status check_conv_ranks(std::string_view op, Span<const int64_t> x, Span<const int64_t> w,
                        int64_t group) {
  KILN_RETURN_IF_ERROR(check_spatial_rank(op, "input 0", x));
  if (w.size() != x.size()) {
    return invalid_argument(op, "input 1 (W) of shape " + runtime::shape_to_string(w) +
                                    " has rank " + std::to_string(w.size()) + " (expected " +
                                    std::to_string(x.size()) + ", the rank of input 0 of shape " +
                                    runtime::shape_to_string(x) + ")");
  }
  if (group < 1) {
    return invalid_argument(op,
                            "attribute 'group' is " + std::to_string(group) + " (expected >= 1)");
  }
  return Status();
}

Result<std::vector<int64_t>> conv_kernel_sizes(std::string_view op, Span<const int64_t> w,
                                               const std::vector<int64_t>& kernel_shape) {
  std::vector<int64_t> kernel(w.begin() + 2, w.end());
  for (int64_t k : kernel) {
    if (k < 1) {
      return invalid_argument(op, "input 1 (W) of shape " + runtime::shape_to_string(w) +
                                      " has an empty kernel (expected sizes >= 1)");
    }
  }
  if (!kernel_shape.empty() && kernel_shape != kernel) {
    return invalid_argument(op, "attribute 'kernel_shape' " +
                                    runtime::shape_to_string(kernel_shape) +
                                    " differs from input 1 (W)'s spatial sizes " +
                                    runtime::shape_to_string(kernel) + " (expected equal)");
  }
  return kernel;
}

Status check_float_conv_dtypes(std::string_view op, const runtime::Tensor& x,
                               const runtime::Tensor& w) {
  KILN_RETURN_IF_ERROR(check_dtype(op, "input 0", x.dtype(), kFloatDtypes));
  return check_same_dtype(op, "input 1 (W)", w.dtype(), x.dtype());
}

Status check_conv_tensors(std::string_view op, const runtime::Tensor& x, const runtime::Tensor& w,
                          const runtime::Tensor* b, int64_t out_channels,
                          const runtime::Tensor& out, Span<const int64_t> out_shape) {
  if (b != nullptr) {
    KILN_RETURN_IF_ERROR(check_same_dtype(op, "input 2 (B)", b->dtype(), x.dtype()));
    KILN_RETURN_IF_ERROR(check_contiguous(op, "input 2 (B)", *b));
    if (b->dim() != 1 || b->size(0) != out_channels) {
      return invalid_argument(op, "input 2 (B) has shape " + runtime::shape_to_string(b->sizes()) +
                                      " (expected [" + std::to_string(out_channels) +
                                      "], one bias per output channel)");
    }
  }
  KILN_RETURN_IF_ERROR(check_contiguous(op, "input 0", x));
  KILN_RETURN_IF_ERROR(check_contiguous(op, "input 1 (W)", w));
  return check_output(op, out, x.dtype(), out_shape);
}

}  // namespace internal
}  // namespace kiln::kernels
