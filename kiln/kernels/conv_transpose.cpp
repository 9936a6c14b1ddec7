// ConvTranspose: per batch item and group, W^T * X gives one row of input-position values per
// (output channel, kernel offset) with the shared gemm row loop (A transposed); each row is
// then added into the output positions that kernel offset reaches (col2im), so no column
// matrix is stored.

#include <kiln/kernels/adapter.h>
#include <kiln/kernels/conv_geometry.h>
#include <kiln/kernels/dispatch.h>
#include <kiln/kernels/gemm_rows.h>
#include <kiln/kernels/kernels.h>

#include <algorithm>
#include <string>
#include <vector>

namespace kiln::kernels {

using runtime::EValue;
using runtime::Result;
using runtime::Span;
using runtime::Status;
using runtime::Tensor;

namespace {

constexpr std::string_view kOp = "ConvTranspose";

// Sizes of one transposed convolution, validated. `window.in` holds X's spatial sizes and
// `window.out` Y's: X position i reaches Y position i * stride - pad_begin + k * dilation.
struct TransposeProblem {
  internal::Window window;
  int64_t batch = 0;
  int64_t channels = 0;      // C
  int64_t out_channels = 0;  // M
  int64_t group = 1;
  int64_t group_channels = 0;      // C / group
  int64_t group_out_channels = 0;  // M / group
};

// The pads and output size of one axis.
Status resolve_axis(const ConvTransposeOptions& o, const std::vector<int64_t>& pads,
                    const std::vector<int64_t>& output_padding, size_t axis, size_t rank,
                    internal::Window& w) {
  const size_t s = w.slot(axis);
  const int64_t full =
      w.stride[s] * (w.in[s] - 1) + output_padding[axis] + (w.kernel[s] - 1) * w.dilation[s] + 1;
  int64_t out = -1;
  if (!o.output_shape.empty()) {
    out = o.output_shape[o.output_shape.size() - rank + axis];
  } else if (o.auto_pad == AutoPad::SameUpper || o.auto_pad == AutoPad::SameLower) {
    out = w.in[s] * w.stride[s];
  }
  if (out >= 0) {
    // Output positions past the covered extent (a negative total) get only the bias.
    const int64_t total = std::max<int64_t>(0, full - out);
    w.pad_begin[s] = o.auto_pad == AutoPad::SameUpper ? total / 2 : total - total / 2;
    w.pad_end[s] = total - w.pad_begin[s];
  } else {
    if (o.auto_pad == AutoPad::NotSet) {
      w.pad_begin[s] = pads[axis];
      w.pad_end[s] = pads[rank + axis];
    }
    out = full - w.pad_begin[s] - w.pad_end[s];
  }
  if (out < 0) {
    return internal::invalid_argument(
        kOp, "spatial axis " + std::to_string(axis) + " has output size " + std::to_string(out) +
                 " (expected >= 0; pads " + std::to_string(w.pad_begin[s]) + " and " +
                 std::to_string(w.pad_end[s]) + " exceed the full size " + std::to_string(full) +
                 ")");
  }
  w.out[s] = out;
  return Status();
}

Result<TransposeProblem> transpose_problem(Span<const int64_t> x, Span<const int64_t> w,
                                           const ConvTransposeOptions& o) {
  KILN_RETURN_IF_ERROR(internal::check_conv_ranks(kOp, x, w, o.group));
  TransposeProblem p;
  p.batch = x[0];
  p.channels = x[1];
  p.group = o.group;
  if (w[0] != p.channels || p.channels % p.group != 0) {
    return internal::invalid_argument(
        kOp, "input 1 (W) of shape " + runtime::shape_to_string(w) + " does not fit input 0 of " +
                 "shape " + runtime::shape_to_string(x) + " with group " + std::to_string(p.group) +
                 " (expected W[0] = C, divisible by group)");
  }
  p.group_channels = p.channels / p.group;
  p.group_out_channels = w[1];
  p.out_channels = w[1] * p.group;
  const size_t rank = x.size() - 2;
  KILN_ASSIGN_OR_RETURN(auto kernel, internal::conv_kernel_sizes(kOp, w, o.kernel_shape));
  KILN_ASSIGN_OR_RETURN(auto stride, internal::axis_values(kOp, "strides", o.strides, rank, 1, 1));
  KILN_ASSIGN_OR_RETURN(auto dilation,
                        internal::axis_values(kOp, "dilations", o.dilations, rank, 1, 1));
  KILN_ASSIGN_OR_RETURN(auto pads, internal::axis_values(kOp, "pads", o.pads, 2 * rank, 0, 0));
  KILN_ASSIGN_OR_RETURN(auto output_padding,
                        internal::axis_values(kOp, "output_padding", o.output_padding, rank, 0, 0));
  if (!o.output_shape.empty() && o.output_shape.size() != rank &&
      o.output_shape.size() != rank + 2) {
    return internal::invalid_argument(
        kOp, "attribute 'output_shape' " + runtime::shape_to_string(o.output_shape) + " has " +
                 std::to_string(o.output_shape.size()) + " values (expected " +
                 std::to_string(rank) + ", or " + std::to_string(rank + 2) + " with N and C)");
  }
  p.window.rank = rank;
  for (size_t axis = 0; axis < rank; ++axis) {
    const size_t s = p.window.slot(axis);
    p.window.in[s] = x[2 + axis];
    p.window.kernel[s] = kernel[axis];
    p.window.stride[s] = stride[axis];
    p.window.dilation[s] = dilation[axis];
    KILN_RETURN_IF_ERROR(resolve_axis(o, pads, output_padding, axis, rank, p.window));
  }
  return p;
}

// Adds `row` (the values of one kernel offset at every input position) into the output plane
// `acc` at the positions that offset reaches.
template <typename C>
void scatter_row(const internal::Window& w, int64_t kd, int64_t kh, int64_t kw, const C* row,
                 C* acc) {
  const int64_t offset_w = kw * w.dilation[2] - w.pad_begin[2];
  const auto cols = internal::valid_range(w.in[2], w.out[2], w.stride[2], offset_w);
  for (int64_t id = 0; id < w.in[0]; ++id) {
    const int64_t od = id * w.stride[0] - w.pad_begin[0] + kd * w.dilation[0];
    if (od < 0 || od >= w.out[0]) continue;
    for (int64_t ih = 0; ih < w.in[1]; ++ih) {
      const int64_t oh = ih * w.stride[1] - w.pad_begin[1] + kh * w.dilation[1];
      if (oh < 0 || oh >= w.out[1]) continue;
      const C* src = row + (id * w.in[1] + ih) * w.in[2];
      C* dst = acc + (od * w.out[1] + oh) * w.out[2];
      for (int64_t iw = cols.first; iw < cols.last; ++iw) {
        dst[iw * w.stride[2] + offset_w] += src[iw];
      }
    }
  }
}

}  // namespace

Result<std::vector<int64_t>> conv_transpose_shape(Span<const int64_t> x, Span<const int64_t> w,
                                                  const ConvTransposeOptions& options) {
  KILN_ASSIGN_OR_RETURN(auto p, transpose_problem(x, w, options));
  return internal::window_output_shape(p.batch, p.out_channels, p.window);
}

Status conv_transpose(const Tensor& x, const Tensor& w, const Tensor* b,
                      const ConvTransposeOptions& options, Tensor& out) {
  KILN_RETURN_IF_ERROR(internal::check_float_conv_dtypes(kOp, x, w));
  KILN_ASSIGN_OR_RETURN(auto p, transpose_problem(x.sizes(), w.sizes(), options));
  KILN_RETURN_IF_ERROR(internal::check_conv_tensors(
      kOp, x, w, b, p.out_channels, out,
      internal::window_output_shape(p.batch, p.out_channels, p.window)));
  return dispatch<DtypeGroup::Float>(kOp, "input 0", x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = ComputeType<T>;
    const internal::Window& win = p.window;
    const int64_t in_plane = win.in_size();
    const int64_t out_plane = win.out_size();
    const int64_t kernel_size = win.kernel_size();
    std::vector<C> acc(static_cast<size_t>(p.out_channels * out_plane));
    std::vector<C> row(static_cast<size_t>(in_plane));
    internal::GemmProblem gemm;
    gemm.m = p.group_out_channels * kernel_size;
    gemm.k = p.group_channels;
    gemm.n = in_plane;
    gemm.trans_a = true;  // W's group block is [C / group, (M / group) * prod(k)]
    const T* bias = b != nullptr ? b->data_ptr<T>() : nullptr;
    T* result = out.mutable_data_ptr<T>();
    for (int64_t n = 0; n < p.batch; ++n) {
      for (int64_t m = 0; m < p.out_channels; ++m) {
        const C value = bias != nullptr ? load(bias[m]) : C{0};
        std::fill(acc.begin() + m * out_plane, acc.begin() + (m + 1) * out_plane, value);
      }
      for (int64_t g = 0; g < p.group; ++g) {
        const T* a = w.data_ptr<T>() + g * p.group_channels * gemm.m;
        const T* xb = x.data_ptr<T>() + (n * p.channels + g * p.group_channels) * in_plane;
        internal::gemm_rows(gemm, a, xb, row.data(), [&](int64_t i, const C* values) {
          const int64_t m = g * p.group_out_channels + i / kernel_size;
          const int64_t k = i % kernel_size;
          const int64_t kw = k % win.kernel[2];
          const int64_t kh = (k / win.kernel[2]) % win.kernel[1];
          const int64_t kd = k / (win.kernel[2] * win.kernel[1]);
          scatter_row(win, kd, kh, kw, values, acc.data() + m * out_plane);
        });
      }
      T* dst = result + n * p.out_channels * out_plane;
      for (size_t i = 0; i < acc.size(); ++i) dst[i] = store<T>(acc[i]);
    }
    return Status();
  });
}

namespace {

Status conv_transpose_kernel(runtime::KernelContext& context, Span<EValue* const> inputs,
                             Span<EValue* const> outputs, const runtime::Attributes& attributes) {
  KILN_RETURN_IF_ERROR(internal::check_arity(kOp, inputs, outputs, 2, 3, 1));
  KILN_ASSIGN_OR_RETURN(auto options,
                        internal::read_conv_attributes<ConvTransposeOptions>(kOp, attributes));
  KILN_ASSIGN_OR_RETURN(options.output_padding,
                        internal::ints_attribute(kOp, attributes, "output_padding"));
  KILN_ASSIGN_OR_RETURN(options.output_shape,
                        internal::ints_attribute(kOp, attributes, "output_shape"));
  KILN_ASSIGN_OR_RETURN(const Tensor* x, internal::input_tensor(kOp, inputs, 0));
  KILN_ASSIGN_OR_RETURN(const Tensor* w, internal::input_tensor(kOp, inputs, 1));
  KILN_ASSIGN_OR_RETURN(const Tensor* b, internal::optional_input(kOp, inputs, 2));
  KILN_RETURN_IF_ERROR(internal::check_float_conv_dtypes(kOp, *x, *w));
  KILN_ASSIGN_OR_RETURN(auto shape, conv_transpose_shape(x->sizes(), w->sizes(), options));
  KILN_ASSIGN_OR_RETURN(EValue * out, internal::output_tensor(kOp, outputs, 0, x->dtype()));
  KILN_RETURN_IF_ERROR(internal::resize_output(context, kOp, *out, shape));
  return conv_transpose(*x, *w, b, options, out->to_tensor());
}

const runtime::KernelRegistration kRegisterConvTranspose("ConvTranspose", conv_transpose_kernel);

}  // namespace
}  // namespace kiln::kernels
