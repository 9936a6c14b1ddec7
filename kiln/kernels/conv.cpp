// Conv and ConvInteger: per batch item and group, the input patches are unrolled into a
// column matrix (im2col) and multiplied by the group's filters with the shared gemm row loop,
// whose innermost loop runs over output positions with unit stride. A 1x1 kernel with stride 1
// and no padding reads the input directly.

#include <kiln/kernels/adapter.h>
#include <kiln/kernels/conv_geometry.h>
#include <kiln/kernels/dispatch.h>
#include <kiln/kernels/gemm_rows.h>
#include <kiln/kernels/kernels.h>

#include <algorithm>
#include <array>
#include <string>
#include <type_traits>
#include <vector>

namespace kiln::kernels {

using runtime::EValue;
using runtime::Result;
using runtime::ScalarType;
using runtime::Span;
using runtime::Status;
using runtime::Tensor;

namespace {

// Sizes of one convolution, validated.
struct ConvProblem {
  internal::Window window;
  int64_t batch = 0;
  int64_t channels = 0;      // C
  int64_t out_channels = 0;  // M
  int64_t group = 1;
  int64_t group_channels = 0;      // C / group
  int64_t group_out_channels = 0;  // M / group

  // Rows of the column matrix: (C / group) * prod(kernel).
  int64_t patch_size() const { return group_channels * window.kernel_size(); }
  bool pointwise() const {
    const auto& w = window;
    for (size_t s = 0; s < internal::kMaxSpatialRank; ++s) {
      if (w.kernel[s] != 1 || w.stride[s] != 1 || w.out[s] != w.in[s]) return false;
    }
    return true;
  }
};

Result<ConvProblem> conv_problem(std::string_view op, Span<const int64_t> x, Span<const int64_t> w,
                                 const ConvOptions& options) {
  KILN_RETURN_IF_ERROR(internal::check_conv_ranks(op, x, w, options.group));
  ConvProblem p;
  p.batch = x[0];
  p.channels = x[1];
  p.out_channels = w[0];
  p.group = options.group;
  if (w[1] * p.group != p.channels || p.out_channels % p.group != 0) {
    return internal::invalid_argument(
        op, "input 1 (W) of shape " + runtime::shape_to_string(w) + " does not fit input 0 of " +
                "shape " + runtime::shape_to_string(x) + " with group " + std::to_string(p.group) +
                " (expected W[1] * group = C and M divisible by group)");
  }
  p.group_channels = w[1];
  p.group_out_channels = p.out_channels / p.group;
  KILN_ASSIGN_OR_RETURN(auto kernel, internal::conv_kernel_sizes(op, w, options.kernel_shape));
  KILN_ASSIGN_OR_RETURN(p.window,
                        internal::forward_window(op, x, kernel, options.strides, options.dilations,
                                                 options.pads, options.auto_pad, false));
  return p;
}

// Output positions a pass of the column matrix covers: at most this many bytes of it (a large
// output's patches unrolled at once once asked for gigabytes), at least one position.
constexpr int64_t kColumnBytes = int64_t{16} << 20;

// Unrolls `channels` input planes (starting at `x`) into `col`, one row per (channel, kernel
// offset) and one column per output position in [begin, end) (positions numbered over the
// output's spatial axes, the last fastest); positions in the padding read `pad`.
template <typename T, typename D, typename Convert>
void im2col(const T* x, int64_t channels, const internal::Window& w, D* col, D pad, Convert convert,
            int64_t begin, int64_t end) {
  const int64_t in_plane = w.in_size();
  const int64_t width = w.out[2];
  D* dst = col;
  for (int64_t c = 0; c < channels; ++c) {
    const T* plane = x + c * in_plane;
    for (int64_t kd = 0; kd < w.kernel[0]; ++kd) {
      for (int64_t kh = 0; kh < w.kernel[1]; ++kh) {
        for (int64_t kw = 0; kw < w.kernel[2]; ++kw) {
          const int64_t offset_w = kw * w.dilation[2] - w.pad_begin[2];
          const auto cols = internal::valid_range(w.out[2], w.in[2], w.stride[2], offset_w);
          for (int64_t pos = begin; pos < end;) {
            const int64_t row = pos / width, ow0 = pos % width;
            const int64_t ow1 = std::min(width, ow0 + (end - pos));
            const int64_t od = row / w.out[1], oh = row % w.out[1];
            const int64_t id = od * w.stride[0] - w.pad_begin[0] + kd * w.dilation[0];
            const int64_t ih = oh * w.stride[1] - w.pad_begin[1] + kh * w.dilation[1];
            const int64_t count = ow1 - ow0;
            if (id < 0 || id >= w.in[0] || ih < 0 || ih >= w.in[1]) {
              std::fill(dst, dst + count, pad);
            } else {
              const T* src = plane + (id * w.in[1] + ih) * w.in[2];
              const int64_t lo = std::clamp(cols.first, ow0, ow1);
              const int64_t hi = std::clamp(cols.last, lo, ow1);
              std::fill(dst, dst + (lo - ow0), pad);
              for (int64_t ow = lo; ow < hi; ++ow) {
                dst[ow - ow0] = convert(src[ow * w.stride[2] + offset_w]);
              }
              std::fill(dst + (hi - ow0), dst + count, pad);
            }
            dst += count;
            pos += count;
          }
        }
      }
    }
  }
}

// Runs the convolution of `p` over operands already in the compute layout: `weights` is
// [M, patch] of type D, `x` the input of type T. `write(channel_plane_index, first, acc,
// count)` stores `count` accumulators of one output channel plane of batch item n, from
// position `first`: the output positions go in passes of at most kColumnBytes of columns.
template <typename T, typename D, typename Convert, typename Write>
void run_conv(const ConvProblem& p, const T* x, const D* weights, D pad, Convert convert,
              Write&& write) {
  const int64_t in_plane = p.window.in_size();
  const int64_t out_plane = p.window.out_size();
  // The column matrix of a pointwise conv is the input itself, when no conversion is needed.
  constexpr bool kSameType = std::is_same_v<T, D>;
  const bool direct = kSameType && p.pointwise();
  const int64_t patch = std::max<int64_t>(p.patch_size(), 1);
  const int64_t pass =
      direct ? out_plane
             : std::max<int64_t>(
                   std::min<int64_t>(kColumnBytes / static_cast<int64_t>(sizeof(D)) / patch,
                                     out_plane),
                   1);
  std::vector<D> col(direct ? 0 : static_cast<size_t>(p.patch_size() * pass));
  std::vector<ComputeType<D>> row(static_cast<size_t>(pass));
  internal::GemmProblem gemm;
  gemm.m = p.group_out_channels;
  gemm.k = p.patch_size();
  for (int64_t n = 0; n < p.batch; ++n) {
    for (int64_t g = 0; g < p.group; ++g) {
      const T* x_group = x + (n * p.channels + g * p.group_channels) * in_plane;
      const D* a = weights + g * p.group_out_channels * p.patch_size();
      const int64_t first_index = n * p.out_channels + g * p.group_out_channels;
      for (int64_t first = 0; first < out_plane; first += pass) {
        const int64_t count = std::min(pass, out_plane - first);
        const D* b = nullptr;
        if constexpr (kSameType) {
          if (direct) b = x_group;
        }
        if (b == nullptr) {
          im2col(x_group, p.group_channels, p.window, col.data(), pad, convert, first,
                 first + count);
          b = col.data();
        }
        gemm.n = count;
        internal::gemm_rows(gemm, a, b, row.data(), [&](int64_t i, const ComputeType<D>* acc) {
          write(first_index + i, first, acc, count);
        });
      }
    }
  }
}

}  // namespace

Result<std::vector<int64_t>> conv_shape(Span<const int64_t> x, Span<const int64_t> w,
                                        const ConvOptions& options) {
  KILN_ASSIGN_OR_RETURN(auto p, conv_problem("Conv", x, w, options));
  return internal::window_output_shape(p.batch, p.out_channels, p.window);
}

Status conv(const Tensor& x, const Tensor& w, const Tensor* b, const ConvOptions& options,
            Tensor& out) {
  constexpr std::string_view kOp = "Conv";
  KILN_RETURN_IF_ERROR(internal::check_float_conv_dtypes(kOp, x, w));
  KILN_ASSIGN_OR_RETURN(auto p, conv_problem(kOp, x.sizes(), w.sizes(), options));
  KILN_RETURN_IF_ERROR(internal::check_conv_tensors(
      kOp, x, w, b, p.out_channels, out,
      internal::window_output_shape(p.batch, p.out_channels, p.window)));
  return dispatch<DtypeGroup::Float>(kOp, "input 0", x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = ComputeType<T>;
    const T* bias = b != nullptr ? b->data_ptr<T>() : nullptr;
    T* result = out.mutable_data_ptr<T>();
    const int64_t plane = p.window.out_size();
    run_conv(
        p, x.data_ptr<T>(), w.data_ptr<T>(), T{}, [](T v) { return v; },
        [&](int64_t index, int64_t first, const C* acc, int64_t count) {
          const C add = bias != nullptr ? load(bias[index % p.out_channels]) : C{0};
          T* dst = result + index * plane + first;
          for (int64_t j = 0; j < count; ++j) dst[j] = store<T>(acc[j] + add);
        });
    return Status();
  });
}

namespace {

constexpr std::array<ScalarType, 2> kConvIntegerDtypes = {ScalarType::UInt8, ScalarType::Int8};

// The zero point of an 8-bit tensor as int64 values: a scalar (one value) or, when
// `per_channel` > 0, a 1-D tensor of that many values.
Result<std::vector<int64_t>> zero_points(std::string_view op, const char* subject, const Tensor* zp,
                                         ScalarType dtype, int64_t per_channel) {
  if (zp == nullptr) return std::vector<int64_t>{0};
  KILN_RETURN_IF_ERROR(internal::check_same_dtype(op, subject, zp->dtype(), dtype));
  KILN_RETURN_IF_ERROR(internal::check_contiguous(op, subject, *zp));
  const bool scalar = zp->numel() == 1 && zp->dim() <= 1;
  const bool channels = per_channel > 0 && zp->dim() == 1 && zp->size(0) == per_channel;
  if (!scalar && !channels) {
    std::string expected = "a scalar";
    if (per_channel > 0) expected += " or [" + std::to_string(per_channel) + "]";
    return internal::invalid_argument(op, std::string(subject) + " has shape " +
                                              runtime::shape_to_string(zp->sizes()) +
                                              " (expected " + expected + ")");
  }
  std::vector<int64_t> values(static_cast<size_t>(zp->numel()));
  for (size_t i = 0; i < values.size(); ++i) {
    values[i] = dtype == ScalarType::UInt8 ? zp->data_ptr<uint8_t>()[i] : zp->data_ptr<int8_t>()[i];
  }
  return values;
}

// W - w_zero_point as int64, row m using zero point m (or the one scalar).
std::vector<int64_t> centered_weights(const Tensor& w, const std::vector<int64_t>& zp) {
  const int64_t rows = w.size(0);
  const int64_t row_size = rows == 0 ? 0 : w.numel() / rows;
  std::vector<int64_t> out(static_cast<size_t>(w.numel()));
  for (int64_t m = 0; m < rows; ++m) {
    const int64_t z = zp[zp.size() == 1 ? 0 : static_cast<size_t>(m)];
    for (int64_t j = 0; j < row_size; ++j) {
      const size_t i = static_cast<size_t>(m * row_size + j);
      out[i] = (w.dtype() == ScalarType::UInt8 ? int64_t{w.data_ptr<uint8_t>()[i]}
                                               : int64_t{w.data_ptr<int8_t>()[i]}) -
               z;
    }
  }
  return out;
}

}  // namespace

Status conv_integer(const Tensor& x, const Tensor& w, const Tensor* x_zero_point,
                    const Tensor* w_zero_point, const ConvOptions& options, Tensor& out) {
  constexpr std::string_view kOp = "ConvInteger";
  KILN_RETURN_IF_ERROR(check_dtype(kOp, "input 0", x.dtype(), kConvIntegerDtypes));
  KILN_RETURN_IF_ERROR(check_dtype(kOp, "input 1 (w)", w.dtype(), kConvIntegerDtypes));
  KILN_ASSIGN_OR_RETURN(auto p, conv_problem(kOp, x.sizes(), w.sizes(), options));
  KILN_ASSIGN_OR_RETURN(auto x_zp,
                        zero_points(kOp, "input 2 (x_zero_point)", x_zero_point, x.dtype(), 0));
  KILN_ASSIGN_OR_RETURN(auto w_zp, zero_points(kOp, "input 3 (w_zero_point)", w_zero_point,
                                               w.dtype(), p.out_channels));
  KILN_RETURN_IF_ERROR(internal::check_contiguous(kOp, "input 0", x));
  KILN_RETURN_IF_ERROR(internal::check_contiguous(kOp, "input 1 (w)", w));
  KILN_RETURN_IF_ERROR(
      internal::check_output(kOp, out, ScalarType::Int32,
                             internal::window_output_shape(p.batch, p.out_channels, p.window)));
  // Centered operands in int64: the products of 8-bit values cannot overflow the accumulator,
  // and the result wraps to int32 as ONNX's int32 arithmetic would.
  const auto weights = centered_weights(w, w_zp);
  int32_t* result = out.mutable_data_ptr<int32_t>();
  const int64_t plane = p.window.out_size();
  const int64_t zx = x_zp[0];
  auto write = [&](int64_t index, int64_t first, const int64_t* acc, int64_t count) {
    int32_t* dst = result + index * plane + first;
    for (int64_t j = 0; j < count; ++j) {
      dst[j] = static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint64_t>(acc[j])));
    }
  };
  auto center = [zx](auto v) { return static_cast<int64_t>(v) - zx; };
  if (x.dtype() == ScalarType::UInt8) {
    run_conv(p, x.data_ptr<uint8_t>(), weights.data(), int64_t{0}, center, write);
  } else {
    run_conv(p, x.data_ptr<int8_t>(), weights.data(), int64_t{0}, center, write);
  }
  return Status();
}

namespace {

Status conv_kernel(runtime::KernelContext& context, Span<EValue* const> inputs,
                   Span<EValue* const> outputs, const runtime::Attributes& attributes) {
  constexpr std::string_view kOp = "Conv";
  KILN_RETURN_IF_ERROR(internal::check_arity(kOp, inputs, outputs, 2, 3, 1));
  KILN_ASSIGN_OR_RETURN(auto options, internal::read_conv_attributes<ConvOptions>(kOp, attributes));
  KILN_ASSIGN_OR_RETURN(const Tensor* x, internal::input_tensor(kOp, inputs, 0));
  KILN_ASSIGN_OR_RETURN(const Tensor* w, internal::input_tensor(kOp, inputs, 1));
  KILN_ASSIGN_OR_RETURN(const Tensor* b, internal::optional_input(kOp, inputs, 2));
  KILN_RETURN_IF_ERROR(internal::check_float_conv_dtypes(kOp, *x, *w));
  KILN_ASSIGN_OR_RETURN(auto p, conv_problem(kOp, x->sizes(), w->sizes(), options));
  KILN_ASSIGN_OR_RETURN(EValue * out, internal::output_tensor(kOp, outputs, 0, x->dtype()));
  KILN_RETURN_IF_ERROR(internal::resize_output(
      context, kOp, *out, internal::window_output_shape(p.batch, p.out_channels, p.window)));
  return conv(*x, *w, b, options, out->to_tensor());
}

Status conv_integer_kernel(runtime::KernelContext& context, Span<EValue* const> inputs,
                           Span<EValue* const> outputs, const runtime::Attributes& attributes) {
  constexpr std::string_view kOp = "ConvInteger";
  KILN_RETURN_IF_ERROR(internal::check_arity(kOp, inputs, outputs, 2, 4, 1));
  KILN_ASSIGN_OR_RETURN(auto options, internal::read_conv_attributes<ConvOptions>(kOp, attributes));
  KILN_ASSIGN_OR_RETURN(const Tensor* x, internal::input_tensor(kOp, inputs, 0));
  KILN_ASSIGN_OR_RETURN(const Tensor* w, internal::input_tensor(kOp, inputs, 1));
  KILN_ASSIGN_OR_RETURN(const Tensor* x_zp, internal::optional_input(kOp, inputs, 2));
  KILN_ASSIGN_OR_RETURN(const Tensor* w_zp, internal::optional_input(kOp, inputs, 3));
  KILN_RETURN_IF_ERROR(check_dtype(kOp, "input 0", x->dtype(), kConvIntegerDtypes));
  KILN_RETURN_IF_ERROR(check_dtype(kOp, "input 1 (w)", w->dtype(), kConvIntegerDtypes));
  KILN_ASSIGN_OR_RETURN(auto p, conv_problem(kOp, x->sizes(), w->sizes(), options));
  KILN_ASSIGN_OR_RETURN(EValue * out,
                        internal::output_tensor_of_dtype(kOp, outputs, 0, ScalarType::Int32));
  KILN_RETURN_IF_ERROR(internal::resize_output(
      context, kOp, *out, internal::window_output_shape(p.batch, p.out_channels, p.window)));
  return conv_integer(*x, *w, x_zp, w_zp, options, out->to_tensor());
}

const runtime::KernelRegistration kRegisterConv("Conv", conv_kernel);
const runtime::KernelRegistration kRegisterConvInteger("ConvInteger", conv_integer_kernel);

}  // namespace
}  // namespace kiln::kernels
