// HannWindow, HammingWindow, BlackmanWindow, DFT and STFT (ONNX opset 17).
#include <kiln/kernels/adapter.h>
#include <kiln/kernels/dispatch.h>
#include <kiln/kernels/kernels.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <numbers>
#include <string>

namespace kiln::kernels {

using runtime::EValue;
using runtime::Result;
using runtime::ScalarType;
using runtime::Span;
using runtime::Status;
using runtime::Tensor;

namespace {

constexpr std::array<ScalarType, 2> kSignalDtypes = {ScalarType::Float32, ScalarType::Float64};

// A scalar (or one-element) i32/i64 input's value.
Result<int64_t> integer_input(std::string_view op, std::string_view subject, const Tensor& t) {
  if (t.dtype() != ScalarType::Int32 && t.dtype() != ScalarType::Int64) {
    return Status(runtime::Error::InvalidType,
                  internal::action(op) + ": " + std::string(subject) + " has dtype " +
                      std::string(runtime::to_string(t.dtype())) + " (expected i32 or i64)");
  }
  if (t.numel() != 1) {
    return internal::invalid_argument(op, std::string(subject) + " has shape " +
                                              runtime::shape_to_string(t.sizes()) +
                                              " (expected one element)");
  }
  return t.dtype() == ScalarType::Int32 ? int64_t{t.data_ptr<int32_t>()[0]}
                                        : t.data_ptr<int64_t>()[0];
}

// The complex value at flat element `index` of a tensor whose last dim is `channels` (1: real).
template <typename T>
void read_complex(const T* data, int64_t index, int64_t channels, double& re, double& im) {
  re = static_cast<double>(data[index * channels]);
  im = channels == 2 ? static_cast<double>(data[index * channels + 1]) : 0.0;
}

// out[k] = scale * sum_n x[n] exp(sign 2πi k n / length), n over the first `count` samples;
// `x` yields (re, im) of sample n.
template <typename Sample>
void transform(int64_t count, int64_t length, int64_t bins, double sign, double scale,
               const Sample& x, double* out_re, double* out_im) {
  for (int64_t k = 0; k < bins; ++k) {
    double re = 0.0, im = 0.0;
    for (int64_t n = 0; n < count; ++n) {
      double angle = sign * 2.0 * std::numbers::pi * static_cast<double>((k * n) % length) /
                     static_cast<double>(length);
      double xr, xi;
      x(n, xr, xi);
      double c = std::cos(angle), s = std::sin(angle);
      re += xr * c - xi * s;
      im += xr * s + xi * c;
    }
    out_re[k] = re * scale;
    out_im[k] = im * scale;
  }
}

Status check_signal(std::string_view op, const Tensor& t, int64_t min_rank) {
  KILN_RETURN_IF_ERROR(check_dtype(op, "input 0", t.dtype(), kSignalDtypes));
  KILN_RETURN_IF_ERROR(internal::check_contiguous(op, "input 0", t));
  int64_t last = t.dim() == 0 ? 0 : t.size(t.dim() - 1);
  if (t.dim() < min_rank || (last != 1 && last != 2)) {
    return internal::invalid_argument(
        op, "input 0 has shape " + runtime::shape_to_string(t.sizes()) + " (expected rank >= " +
                std::to_string(min_rank) + " with a last dim of 1 (real) or 2 (complex))");
  }
  return Status();
}

}  // namespace

Status window(WindowKind kind, bool periodic, Tensor& out) {
  constexpr std::string_view kOp = "window";
  KILN_RETURN_IF_ERROR(internal::check_contiguous(kOp, "output 0", out));
  if (out.dim() != 1) {
    return internal::invalid_argument(
        kOp, "output 0 has rank " + std::to_string(out.dim()) + " (expected 1)");
  }
  const int64_t size = out.size(0);
  const double n_1 = static_cast<double>(periodic ? size : size - 1);
  return dispatch<DtypeGroup::Float>(kOp, "output 0", out.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* y = out.mutable_data_ptr<T>();
    for (int64_t n = 0; n < size; ++n) {
      double phase = n_1 == 0.0 ? 0.0 : 2.0 * std::numbers::pi * static_cast<double>(n) / n_1;
      double v = 0.0;
      switch (kind) {
        case WindowKind::Hann:
          v = 0.5 - 0.5 * std::cos(phase);
          break;
        case WindowKind::Hamming:
          v = 25.0 / 46.0 - (21.0 / 46.0) * std::cos(phase);
          break;
        case WindowKind::Blackman:
          v = 0.42 - 0.5 * std::cos(phase) + 0.08 * std::cos(2.0 * phase);
          break;
      }
      y[n] = store<T>(static_cast<ComputeType<T>>(v));
    }
    return Status();
  });
}

Result<std::vector<int64_t>> dft_shape(const Tensor& input, const DftOptions& options) {
  constexpr std::string_view kOp = "DFT";
  KILN_RETURN_IF_ERROR(check_signal(kOp, input, 2));
  const int64_t rank = input.dim();
  int64_t axis = options.axis < 0 ? options.axis + rank : options.axis;
  if (axis < 0 || axis >= rank - 1) {
    return internal::invalid_argument(
        kOp, "axis " + std::to_string(options.axis) + " for input of rank " + std::to_string(rank) +
                 " (expected a signal axis in [" + std::to_string(-rank) + ", " +
                 std::to_string(rank - 2) + "], not the last)");
  }
  int64_t length = options.length.value_or(input.size(axis));
  if (length < 1) {
    return internal::invalid_argument(
        kOp, "dft_length " + std::to_string(length) + " (expected at least 1)");
  }
  if (options.onesided && input.size(rank - 1) == 2) {
    return internal::invalid_argument(kOp,
                                      "onesided is 1 for a complex input (expected a real "
                                      "input, last dim 1)");
  }
  std::vector<int64_t> sizes(input.sizes().begin(), input.sizes().end());
  sizes[axis] = options.onesided ? length / 2 + 1 : length;
  sizes[rank - 1] = 2;
  return sizes;
}

Status dft(const Tensor& input, const DftOptions& options, Tensor& out) {
  constexpr std::string_view kOp = "DFT";
  KILN_ASSIGN_OR_RETURN(auto sizes, dft_shape(input, options));
  KILN_RETURN_IF_ERROR(internal::check_output(kOp, out, input.dtype(), sizes));
  const int64_t rank = input.dim();
  const int64_t axis = options.axis < 0 ? options.axis + rank : options.axis;
  const int64_t channels = input.size(rank - 1);
  const int64_t n_in = input.size(axis);
  const int64_t length = options.length.value_or(n_in);
  const int64_t bins = sizes[axis];
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= input.size(d);
  for (int64_t d = axis + 1; d < rank - 1; ++d) inner *= input.size(d);
  const double sign = options.inverse ? 1.0 : -1.0;
  const double scale = options.inverse ? 1.0 / static_cast<double>(length) : 1.0;
  std::vector<double> re(static_cast<size_t>(bins)), im(static_cast<size_t>(bins));
  auto run = [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* x = input.data_ptr<T>();
    T* y = out.mutable_data_ptr<T>();
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t i = 0; i < inner; ++i) {
        auto sample = [&](int64_t n, double& xr, double& xi) {
          read_complex(x, (o * n_in + n) * inner + i, channels, xr, xi);
        };
        transform(std::min(n_in, length), length, bins, sign, scale, sample, re.data(), im.data());
        for (int64_t k = 0; k < bins; ++k) {
          int64_t at = ((o * bins + k) * inner + i) * 2;
          y[at] = static_cast<T>(re[static_cast<size_t>(k)]);
          y[at + 1] = static_cast<T>(im[static_cast<size_t>(k)]);
        }
      }
    }
    return Status();
  };
  return input.dtype() == ScalarType::Float32 ? run(TypeTag<float>{}) : run(TypeTag<double>{});
}

Result<std::vector<int64_t>> stft_shape(const Tensor& signal, int64_t step, int64_t frame_length,
                                        bool onesided) {
  constexpr std::string_view kOp = "STFT";
  KILN_RETURN_IF_ERROR(check_signal(kOp, signal, 3));
  if (signal.dim() != 3) {
    return internal::invalid_argument(kOp, "signal has shape " +
                                               runtime::shape_to_string(signal.sizes()) +
                                               " (expected [batch, length, 1 or 2])");
  }
  if (step < 1 || frame_length < 1 || frame_length > signal.size(1)) {
    return internal::invalid_argument(
        kOp, "frame_step " + std::to_string(step) + " and frame_length " +
                 std::to_string(frame_length) + " for a signal of length " +
                 std::to_string(signal.size(1)) +
                 " (expected a step >= 1 and 1 <= frame_length <= length)");
  }
  if (onesided && signal.size(2) == 2) {
    return internal::invalid_argument(kOp,
                                      "onesided is 1 for a complex signal (expected a real "
                                      "signal, last dim 1)");
  }
  int64_t frames = (signal.size(1) - frame_length) / step + 1;
  int64_t bins = onesided ? frame_length / 2 + 1 : frame_length;
  return std::vector<int64_t>{signal.size(0), frames, bins, 2};
}

Status stft(const Tensor& signal, int64_t step, const Tensor* window, int64_t frame_length,
            bool onesided, Tensor& out) {
  constexpr std::string_view kOp = "STFT";
  KILN_ASSIGN_OR_RETURN(auto sizes, stft_shape(signal, step, frame_length, onesided));
  KILN_RETURN_IF_ERROR(internal::check_output(kOp, out, signal.dtype(), sizes));
  if (window != nullptr) {
    KILN_RETURN_IF_ERROR(
        internal::check_same_dtype(kOp, "input 2 (window)", window->dtype(), signal.dtype()));
    KILN_RETURN_IF_ERROR(internal::check_contiguous(kOp, "input 2 (window)", *window));
    if (window->dim() != 1 || window->size(0) != frame_length) {
      return internal::invalid_argument(
          kOp, "input 2 (window) has shape " + runtime::shape_to_string(window->sizes()) +
                   " (expected [" + std::to_string(frame_length) + "], the frame length)");
    }
  }
  const int64_t length = signal.size(1), channels = signal.size(2);
  const int64_t frames = sizes[1], bins = sizes[2];
  std::vector<double> re(static_cast<size_t>(bins)), im(static_cast<size_t>(bins));
  auto run = [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* x = signal.data_ptr<T>();
    const T* w = window != nullptr ? window->data_ptr<T>() : nullptr;
    T* y = out.mutable_data_ptr<T>();
    for (int64_t b = 0; b < signal.size(0); ++b) {
      for (int64_t f = 0; f < frames; ++f) {
        auto sample = [&](int64_t n, double& xr, double& xi) {
          read_complex(x, b * length + f * step + n, channels, xr, xi);
          double weight = w != nullptr ? static_cast<double>(w[n]) : 1.0;
          xr *= weight;
          xi *= weight;
        };
        transform(frame_length, frame_length, bins, -1.0, 1.0, sample, re.data(), im.data());
        for (int64_t k = 0; k < bins; ++k) {
          int64_t at = ((b * frames + f) * bins + k) * 2;
          y[at] = static_cast<T>(re[static_cast<size_t>(k)]);
          y[at + 1] = static_cast<T>(im[static_cast<size_t>(k)]);
        }
      }
    }
    return Status();
  };
  return signal.dtype() == ScalarType::Float32 ? run(TypeTag<float>{}) : run(TypeTag<double>{});
}

namespace {

template <WindowKind Kind>
Status window_kernel(runtime::KernelContext& context, Span<EValue* const> inputs,
                     Span<EValue* const> outputs, const runtime::Attributes& attributes) {
  constexpr std::string_view kOp = Kind == WindowKind::Hann      ? "HannWindow"
                                   : Kind == WindowKind::Hamming ? "HammingWindow"
                                                                 : "BlackmanWindow";
  KILN_RETURN_IF_ERROR(internal::check_arity(kOp, inputs, outputs, 1, 1, 1));
  KILN_ASSIGN_OR_RETURN(const Tensor* size_input, internal::input_tensor(kOp, inputs, 0));
  KILN_ASSIGN_OR_RETURN(int64_t size, integer_input(kOp, "input 0 (size)", *size_input));
  if (size < 0) {
    return internal::invalid_argument(kOp, "size " + std::to_string(size) + " (expected >= 0)");
  }
  KILN_ASSIGN_OR_RETURN(int64_t onnx_type, attributes.get_int("output_datatype", 1));
  KILN_ASSIGN_OR_RETURN(int64_t periodic, attributes.get_int("periodic", 1));
  auto dtype = scalar_type_from_onnx(onnx_type);
  if (!dtype.ok()) return dtype.status().with_context(internal::action(kOp));
  KILN_RETURN_IF_ERROR(check_dtype(kOp, "output_datatype", *dtype, kFloatDtypes));
  KILN_ASSIGN_OR_RETURN(EValue * out, internal::output_tensor_of_dtype(kOp, outputs, 0, *dtype));
  KILN_RETURN_IF_ERROR(internal::resize_output(context, kOp, *out, std::vector<int64_t>{size}));
  return window(Kind, periodic != 0, out->to_tensor());
}

Status dft_kernel(runtime::KernelContext& context, Span<EValue* const> inputs,
                  Span<EValue* const> outputs, const runtime::Attributes& attributes) {
  constexpr std::string_view kOp = "DFT";
  KILN_RETURN_IF_ERROR(internal::check_arity(kOp, inputs, outputs, 1, 2, 1));
  KILN_ASSIGN_OR_RETURN(const Tensor* input, internal::input_tensor(kOp, inputs, 0));
  DftOptions options;
  KILN_ASSIGN_OR_RETURN(options.axis, attributes.get_int("axis", 1));
  KILN_ASSIGN_OR_RETURN(int64_t inverse, attributes.get_int("inverse", 0));
  KILN_ASSIGN_OR_RETURN(int64_t onesided, attributes.get_int("onesided", 0));
  options.inverse = inverse != 0;
  options.onesided = onesided != 0;
  if (!internal::is_absent(inputs, 1)) {
    KILN_ASSIGN_OR_RETURN(const Tensor* length, internal::input_tensor(kOp, inputs, 1));
    KILN_ASSIGN_OR_RETURN(options.length, integer_input(kOp, "input 1 (dft_length)", *length));
  }
  KILN_ASSIGN_OR_RETURN(auto sizes, dft_shape(*input, options));
  KILN_ASSIGN_OR_RETURN(EValue * out, internal::output_tensor(kOp, outputs, 0, input->dtype()));
  KILN_RETURN_IF_ERROR(internal::resize_output(context, kOp, *out, sizes));
  return dft(*input, options, out->to_tensor());
}

Status stft_kernel(runtime::KernelContext& context, Span<EValue* const> inputs,
                   Span<EValue* const> outputs, const runtime::Attributes& attributes) {
  constexpr std::string_view kOp = "STFT";
  KILN_RETURN_IF_ERROR(internal::check_arity(kOp, inputs, outputs, 2, 4, 1));
  KILN_ASSIGN_OR_RETURN(const Tensor* signal, internal::input_tensor(kOp, inputs, 0));
  KILN_ASSIGN_OR_RETURN(const Tensor* step_input, internal::input_tensor(kOp, inputs, 1));
  KILN_ASSIGN_OR_RETURN(int64_t step, integer_input(kOp, "input 1 (frame_step)", *step_input));
  const Tensor* window_input = nullptr;
  if (!internal::is_absent(inputs, 2)) {
    KILN_ASSIGN_OR_RETURN(window_input, internal::input_tensor(kOp, inputs, 2));
  }
  int64_t frame_length = -1;
  if (!internal::is_absent(inputs, 3)) {
    KILN_ASSIGN_OR_RETURN(const Tensor* length, internal::input_tensor(kOp, inputs, 3));
    KILN_ASSIGN_OR_RETURN(frame_length, integer_input(kOp, "input 3 (frame_length)", *length));
  } else if (window_input != nullptr && window_input->dim() == 1) {
    frame_length = window_input->size(0);
  } else {
    return internal::invalid_argument(kOp,
                                      "neither input 2 (window) nor input 3 "
                                      "(frame_length) is given (expected one of them)");
  }
  KILN_ASSIGN_OR_RETURN(int64_t onesided, attributes.get_int("onesided", 1));
  KILN_ASSIGN_OR_RETURN(auto sizes, stft_shape(*signal, step, frame_length, onesided != 0));
  KILN_ASSIGN_OR_RETURN(EValue * out, internal::output_tensor(kOp, outputs, 0, signal->dtype()));
  KILN_RETURN_IF_ERROR(internal::resize_output(context, kOp, *out, sizes));
  return stft(*signal, step, window_input, frame_length, onesided != 0, out->to_tensor());
}

const runtime::KernelRegistration kRegisterHann("HannWindow", window_kernel<WindowKind::Hann>);
const runtime::KernelRegistration kRegisterHamming("HammingWindow",
                                                   window_kernel<WindowKind::Hamming>);
const runtime::KernelRegistration kRegisterBlackman("BlackmanWindow",
                                                    window_kernel<WindowKind::Blackman>);
const runtime::KernelRegistration kRegisterDft("DFT", dft_kernel);
const runtime::KernelRegistration kRegisterStft("STFT", stft_kernel);

}  // namespace

}  // namespace kiln::kernels
