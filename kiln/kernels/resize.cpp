// Resize: the plan (output sizes and scales), per-axis tables of taps (input index, weight)
// and one walk over the output that combines the taps of every axis. The taps follow the
// ONNX reference implementation: each axis maps an output coordinate to an input coordinate
// x, takes the window of input indices around it (with the ratio x - base in (0, 1], so an
// integer x sits at the right of a linear window), and repeats the edge values past the
// border.

#include <kiln/kernels/image_common.h>
#include <kiln/kernels/image_ops.h>
#include <kiln/kernels/kernels.h>
#include <kiln/kernels/layout.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <utility>
#include <string>
#include <type_traits>
#include <vector>

namespace kiln::kernels {

using runtime::Error;
using runtime::Result;
using runtime::Span;
using runtime::Status;
using runtime::Tensor;

namespace {

constexpr std::string_view kOp = "Resize";

using AxisTaps = ResizeTaps;

// Where output coordinate `o` of an axis of `in` elements reads (before the window).
double source_coordinate(const ResizeOptions& options, int64_t o, int64_t in, int64_t out,
                         double scale, double roi_start, double roi_end) {
  const double out_width = scale * static_cast<double>(in);  // not rounded, as the reference
  const double x = static_cast<double>(o);
  switch (options.coordinates) {
    case ResizeCoordinates::AlignCorners:
      return out_width == 1 ? 0.0 : x * static_cast<double>(in - 1) / (out_width - 1);
    case ResizeCoordinates::Asymmetric:
      return x / scale;
    case ResizeCoordinates::TfCropAndResize: {
      const double span = (roi_end - roi_start) * static_cast<double>(in - 1);
      const double start = roi_start * static_cast<double>(in - 1);
      return out_width == 1 ? start + span / 2 : start + x * span / (out_width - 1);
    }
    case ResizeCoordinates::PytorchHalfPixel:
      return out_width == 1 ? -0.5 : (x + 0.5) / scale - 0.5;
    case ResizeCoordinates::HalfPixelSymmetric: {
      const double offset = static_cast<double>(in) / 2 * (1 - static_cast<double>(out) / out_width);
      return offset + (x + 0.5) / scale - 0.5;
    }
    case ResizeCoordinates::TfHalfPixelForNn:
      return (x + 0.5) / scale;
    case ResizeCoordinates::HalfPixel:
      break;
  }
  return (x + 0.5) / scale - 0.5;
}

double cubic_weight(double x, double a) {
  x = std::abs(x);
  if (x <= 1) return ((a + 2) * x - (a + 3)) * x * x + 1;
  if (x < 2) return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a;
  return 0.0;
}

// The index mode Nearest picks for input coordinate `x` (base = ceil(x) - 1, ratio in (0, 1]).
int64_t nearest_index(ResizeNearest mode, double x, double scale) {
  const double base = std::ceil(x) - 1;
  const double ratio = x - base;
  if (ratio == 1.0) return static_cast<int64_t>(x);
  bool up = false;
  switch (mode) {
    case ResizeNearest::RoundPreferFloor: up = ratio > 0.5; break;
    case ResizeNearest::RoundPreferCeil: up = ratio >= 0.5; break;
    case ResizeNearest::Floor: up = false; break;
    case ResizeNearest::Ceil: up = true; break;
    case ResizeNearest::Simple: up = scale < 1.0; break;
  }
  return static_cast<int64_t>(base) + (up ? 1 : 0);
}

// The window offsets (relative to base) and the weights of Linear or Cubic at `ratio`.
int64_t window(const ResizeOptions& options, double ratio, double scale,
               std::vector<double>& weights) {
  const bool cubic = options.mode == ResizeMode::Cubic;
  // Antialias stretches the kernel by 1 / scale when downscaling; at scale >= 1 it is the
  // plain kernel (normalized, which changes nothing).
  const double s = options.antialias ? std::min(scale, 1.0) : 1.0;
  const int64_t start = static_cast<int64_t>(std::floor((cubic ? -2.0 : -1.0) / s)) + 1;
  const int64_t count = 2 - 2 * start;
  weights.assign(static_cast<size_t>(count), 0.0);
  double sum = 0;
  for (int64_t j = 0; j < count; ++j) {
    const double d = (static_cast<double>(start + j) - ratio) * s;
    const double w = cubic ? cubic_weight(d, options.cubic_coeff_a)
                           : std::clamp(1.0 - std::abs(d), 0.0, 1.0);
    weights[static_cast<size_t>(j)] = w;
    sum += w;
  }
  if (options.antialias && sum != 0) {
    for (double& w : weights) w /= sum;
  }
  return start;
}

AxisTaps axis_taps(const ResizeOptions& options, int64_t in, int64_t out, double scale,
                   double roi_start, double roi_end) {
  AxisTaps axis;
  axis.outside.assign(static_cast<size_t>(out), 0);
  std::vector<double> weights;
  const bool nearest = options.mode == ResizeMode::Nearest;
  if (!nearest) {
    (void)window(options, 1.0, scale, weights);
    axis.taps = static_cast<int64_t>(weights.size());
  }
  for (int64_t o = 0; o < out; ++o) {
    const double x = source_coordinate(options, o, in, out, scale, roi_start, roi_end);
    const bool outside = options.coordinates == ResizeCoordinates::TfCropAndResize &&
                         (x < 0 || x > static_cast<double>(in - 1));
    if (outside || !std::isfinite(x)) {
      // Extrapolated (or a degenerate coordinate): one tap on the edge, never read when outside.
      axis.outside[static_cast<size_t>(o)] = outside ? 1 : 0;
      for (int64_t t = 0; t < axis.taps; ++t) {
        axis.index.push_back(0);
        axis.weight.push_back(t == 0 ? 1.0 : 0.0);
      }
      continue;
    }
    int64_t base = 0;
    int64_t start = 0;
    if (nearest) {
      base = std::clamp<int64_t>(nearest_index(options.nearest, x, scale), 0, in - 1);
      weights.assign(1, 1.0);
    } else {
      base = static_cast<int64_t>(std::ceil(x)) - 1;
      start = window(options, x - static_cast<double>(base), scale, weights);
    }
    const auto count = static_cast<int64_t>(weights.size());
    if (options.exclude_outside && !nearest) {
      double sum = 0;
      for (int64_t j = 0; j < count; ++j) {
        const int64_t i = base + start + j;
        if (i < 0 || i >= in) weights[static_cast<size_t>(j)] = 0;
        sum += weights[static_cast<size_t>(j)];
      }
      if (sum != 0) {
        for (double& w : weights) w /= sum;
      }
    }
    for (int64_t j = 0; j < count; ++j) {
      axis.index.push_back(std::clamp<int64_t>(base + start + j, 0, in - 1));
      axis.weight.push_back(weights[static_cast<size_t>(j)]);
    }
  }
  // An axis whose every output reads one input element with weight 1 (scale 1 on N and C,
  // say) needs one tap, not a window.
  bool single = axis.taps > 1;
  for (int64_t o = 0; single && o < out; ++o) {
    int ones = 0;
    for (int64_t t = 0; t < axis.taps; ++t) {
      const double w = axis.weight[static_cast<size_t>(o * axis.taps + t)];
      ones += w == 1.0 ? 1 : 0;
      single = single && (w == 0.0 || w == 1.0);
    }
    single = single && ones == 1;
  }
  if (single) {
    std::vector<int64_t> index;
    std::vector<double> weight;
    for (int64_t o = 0; o < out; ++o) {
      int64_t pick = axis.index[static_cast<size_t>(o * axis.taps)];
      for (int64_t t = 0; t < axis.taps; ++t) {
        const auto k = static_cast<size_t>(o * axis.taps + t);
        if (axis.weight[k] == 1.0) pick = axis.index[k];
      }
      index.push_back(pick);
      weight.push_back(1.0);
    }
    axis.taps = 1;
    axis.index = std::move(index);
    axis.weight = std::move(weight);
  }
  return axis;
}

template <typename T>
T store_result(double value) {
  if constexpr (std::is_integral_v<T>) {
    if (std::isnan(value)) return T(0);
    const double rounded = std::round(value);
    if (rounded <= static_cast<double>(std::numeric_limits<T>::lowest())) {
      return std::numeric_limits<T>::lowest();
    }
    if (rounded >= static_cast<double>(std::numeric_limits<T>::max())) {
      return std::numeric_limits<T>::max();
    }
    return static_cast<T>(rounded);
  } else {
    return store<T>(static_cast<ComputeType<T>>(value));
  }
}

template <typename T>
void resize_typed(const Tensor& x, const std::vector<AxisTaps>& axes,
                  const ResizeOptions& options, Tensor& out) {
  const T* in = x.data_ptr<T>();
  T* dst = out.mutable_data_ptr<T>();
  const size_t rank = axes.size();
  const auto strides = internal::dense_strides(x.sizes());
  std::vector<size_t> windowed;  // axes with more than one tap
  for (size_t d = 0; d < rank; ++d) {
    if (axes[d].taps > 1) windowed.push_back(d);
  }
  std::vector<int64_t> coord(rank, 0);
  std::vector<int64_t> tap(windowed.size(), 0);
  const T extrapolated = store_result<T>(options.extrapolation_value);
  const int64_t numel = out.numel();
  for (int64_t e = 0; e < numel; ++e) {
    bool outside = false;
    int64_t fixed = 0;  // the offset from the one-tap axes
    for (size_t d = 0; d < rank; ++d) {
      const auto o = static_cast<size_t>(coord[d]);
      outside = outside || axes[d].outside[o] != 0;
      if (axes[d].taps == 1) fixed += axes[d].index[o] * strides[d];
    }
    if (outside) {
      dst[e] = extrapolated;
    } else {
      double sum = 0;
      std::fill(tap.begin(), tap.end(), 0);
      while (true) {
        int64_t offset = fixed;
        double weight = 1.0;
        for (size_t k = 0; k < windowed.size(); ++k) {
          const AxisTaps& axis = axes[windowed[k]];
          const auto at = static_cast<size_t>(coord[windowed[k]] * axis.taps + tap[k]);
          offset += axis.index[at] * strides[windowed[k]];
          weight *= axis.weight[at];
        }
        sum += weight * static_cast<double>(load(in[offset]));
        size_t k = windowed.size();
        while (k > 0 && ++tap[k - 1] == axes[windowed[k - 1]].taps) tap[--k] = 0;
        if (k == 0) break;
      }
      dst[e] = store_result<T>(sum);
    }
    for (size_t d = rank; d-- > 0;) {
      if (++coord[d] < out.size(static_cast<int64_t>(d))) break;
      coord[d] = 0;
    }
  }
}

// Exactly one of scales and sizes; an empty tensor counts as absent (opsets 11 and 13 pass
// "" or an empty initializer for the one not used).
Status read_resize_inputs(Span<runtime::EValue* const> inputs, size_t scales_index,
                          std::optional<std::vector<double>>& scales,
                          std::optional<std::vector<int64_t>>& sizes) {
  if (!internal::is_absent(inputs, scales_index)) {
    KILN_ASSIGN_OR_RETURN(auto values,
                          internal::read_float_list(kOp, inputs, scales_index, "scales"));
    if (!values.empty()) scales = std::move(values);
  }
  if (!internal::is_absent(inputs, scales_index + 1)) {
    KILN_ASSIGN_OR_RETURN(auto values,
                          internal::read_int_list(kOp, inputs, scales_index + 1, "sizes"));
    if (!values.empty()) sizes = std::move(values);
  }
  if (scales.has_value() == sizes.has_value()) {
    return internal::invalid_argument(
        kOp, std::string(scales.has_value() ? "both" : "neither") + " of input " +
                 std::to_string(scales_index) + " (scales) and input " +
                 std::to_string(scales_index + 1) + " (sizes) " +
                 (scales.has_value() ? "are" : "is") + " given (expected exactly one)");
  }
  return Status();
}

Result<ResizeOptions> read_resize_options(const runtime::Attributes& attributes) {
  ResizeOptions options;
  KILN_ASSIGN_OR_RETURN(auto mode, internal::string_attribute(kOp, attributes, "mode", "nearest"));
  KILN_ASSIGN_OR_RETURN(options.mode, parse_resize_mode(mode));
  KILN_ASSIGN_OR_RETURN(auto coordinates,
                        internal::string_attribute(kOp, attributes,
                                                   "coordinate_transformation_mode", "half_pixel"));
  KILN_ASSIGN_OR_RETURN(options.coordinates, parse_resize_coordinates(coordinates));
  KILN_ASSIGN_OR_RETURN(auto nearest, internal::string_attribute(kOp, attributes, "nearest_mode",
                                                                 "round_prefer_floor"));
  KILN_ASSIGN_OR_RETURN(options.nearest, parse_resize_nearest(nearest));
  KILN_ASSIGN_OR_RETURN(auto policy, internal::string_attribute(
                                         kOp, attributes, "keep_aspect_ratio_policy", "stretch"));
  KILN_ASSIGN_OR_RETURN(options.aspect, parse_resize_aspect(policy));
  KILN_ASSIGN_OR_RETURN(options.cubic_coeff_a,
                        internal::double_attribute(kOp, attributes, "cubic_coeff_a", -0.75));
  KILN_ASSIGN_OR_RETURN(options.extrapolation_value,
                        internal::double_attribute(kOp, attributes, "extrapolation_value", 0.0));
  KILN_ASSIGN_OR_RETURN(int64_t exclude,
                        internal::int_attribute(kOp, attributes, "exclude_outside", 0));
  KILN_ASSIGN_OR_RETURN(int64_t antialias, internal::int_attribute(kOp, attributes, "antialias", 0));
  options.exclude_outside = exclude != 0;
  options.antialias = antialias != 0;
  auto axes = attributes.get_ints("axes");
  if (!axes.ok()) return axes.status().with_context(internal::action(kOp));
  options.axes = std::move(*axes);
  return options;
}

Status run_resize(std::string_view op, runtime::KernelContext& context, const Tensor& x,
                  Span<runtime::EValue* const> outputs, const ResizeOptions& options,
                  const std::optional<std::vector<double>>& roi,
                  const std::optional<std::vector<double>>& scales,
                  const std::optional<std::vector<int64_t>>& sizes) {
  KILN_RETURN_IF_ERROR(check_dtype(op, "input 0", x.dtype(), kNumericDtypes));
  auto plan = resize_plan(x.sizes(), roi ? &*roi : nullptr, scales ? &*scales : nullptr,
                          sizes ? &*sizes : nullptr, options);
  if (!plan.ok()) return plan.status().with_context(internal::action(op));
  KILN_ASSIGN_OR_RETURN(runtime::EValue * out, internal::output_tensor(op, outputs, 0, x.dtype()));
  KILN_RETURN_IF_ERROR(internal::resize_output(context, op, *out, plan->sizes));
  return resize(x, *plan, options, out->to_tensor());
}

// Opset 10 has inputs (X, scales); opsets 11+ (X, roi, scales, sizes), roi and one of
// scales/sizes possibly "" or empty. Two inputs mean the opset-10 form, whose coordinates are
// asymmetric and whose nearest rounding is Upsample's.
Status resize_kernel(runtime::KernelContext& context, Span<runtime::EValue* const> inputs,
                     Span<runtime::EValue* const> outputs, const runtime::Attributes& attributes) {
  KILN_RETURN_IF_ERROR(internal::check_arity(kOp, inputs, outputs, 2, 4, 1));
  KILN_ASSIGN_OR_RETURN(const Tensor* x, internal::input_tensor(kOp, inputs, 0));
  KILN_ASSIGN_OR_RETURN(ResizeOptions options, read_resize_options(attributes));
  std::optional<std::vector<double>> roi, scales;
  std::optional<std::vector<int64_t>> sizes;
  if (inputs.size() == 2) {
    options.coordinates = ResizeCoordinates::Asymmetric;
    options.nearest = ResizeNearest::Simple;
    KILN_ASSIGN_OR_RETURN(scales, internal::read_float_list(kOp, inputs, 1, "scales"));
  } else {
    if (!internal::is_absent(inputs, 1)) {
      KILN_ASSIGN_OR_RETURN(auto values, internal::read_float_list(kOp, inputs, 1, "roi"));
      if (!values.empty()) roi = std::move(values);
    }
    KILN_RETURN_IF_ERROR(read_resize_inputs(inputs, 2, scales, sizes));
  }
  return run_resize(kOp, context, *x, outputs, options, roi, scales, sizes);
}

// Upsample (opsets 7 and 9, deprecated since 10): scales from input 1 (opset 9) or attribute
// 'scales' (opset 7); mode nearest or linear, asymmetric coordinates.
Status upsample_kernel(runtime::KernelContext& context, Span<runtime::EValue* const> inputs,
                       Span<runtime::EValue* const> outputs,
                       const runtime::Attributes& attributes) {
  constexpr std::string_view kUpsample = "Upsample";
  KILN_RETURN_IF_ERROR(internal::check_arity(kUpsample, inputs, outputs, 1, 2, 1));
  KILN_ASSIGN_OR_RETURN(const Tensor* x, internal::input_tensor(kUpsample, inputs, 0));
  KILN_ASSIGN_OR_RETURN(auto mode,
                        internal::string_attribute(kUpsample, attributes, "mode", "nearest"));
  ResizeOptions options;
  options.coordinates = ResizeCoordinates::Asymmetric;
  options.nearest = ResizeNearest::Simple;
  if (mode == "nearest") {
    options.mode = ResizeMode::Nearest;
  } else if (mode == "linear" || mode == "bilinear") {
    options.mode = ResizeMode::Linear;
  } else {
    return internal::invalid_argument(kUpsample, "attribute 'mode' is '" + mode +
                                                     "' (expected 'nearest' or 'linear')");
  }
  std::optional<std::vector<double>> scales;
  if (!internal::is_absent(inputs, 1)) {
    KILN_ASSIGN_OR_RETURN(scales, internal::read_float_list(kUpsample, inputs, 1, "scales"));
  } else if (attributes.has("scales")) {
    auto values = attributes.get_doubles("scales");
    if (!values.ok()) return values.status().with_context(internal::action(kUpsample));
    scales = std::move(*values);
  } else {
    return internal::invalid_argument(
        kUpsample, "scales are missing (expected input 1 or attribute 'scales')");
  }
  return run_resize(kUpsample, context, *x, outputs, options, std::nullopt, scales, std::nullopt);
}

const runtime::KernelRegistration kRegisterResize("Resize", resize_kernel);
const runtime::KernelRegistration kRegisterUpsample("Upsample", upsample_kernel);

}  // namespace

ResizeTaps resize_axis_taps(const ResizeOptions& options, const ResizePlan& plan,
                            Span<const int64_t> input, size_t axis) {
  const size_t rank = input.size();
  return axis_taps(options, input[axis], plan.sizes[axis], plan.scales[axis], plan.roi[axis],
                   plan.roi[rank + axis]);
}

Status resize(const Tensor& x, const ResizePlan& plan, const ResizeOptions& options,
              Tensor& out) {
  KILN_RETURN_IF_ERROR(check_dtype(kOp, "input 0", x.dtype(), kNumericDtypes));
  KILN_RETURN_IF_ERROR(internal::check_contiguous(kOp, "input 0", x));
  const auto rank = static_cast<size_t>(x.dim());
  if (plan.sizes.size() != rank || plan.scales.size() != rank || plan.roi.size() != 2 * rank) {
    return internal::invalid_argument(
        kOp, "the plan has " + std::to_string(plan.sizes.size()) + " sizes, " +
                 std::to_string(plan.scales.size()) + " scales and " +
                 std::to_string(plan.roi.size()) + " roi values (expected " +
                 std::to_string(rank) + ", " + std::to_string(rank) + " and " +
                 std::to_string(2 * rank) + " for input 0 of rank " + std::to_string(rank) + ")");
  }
  for (size_t d = 0; d < rank; ++d) {
    if (!(plan.scales[d] > 0) || !std::isfinite(plan.scales[d]) ||
        (x.size(static_cast<int64_t>(d)) == 0 && plan.sizes[d] > 0)) {
      return internal::invalid_argument(
          kOp, "the plan has scale " + std::to_string(plan.scales[d]) + " and size " +
                   std::to_string(plan.sizes[d]) + " on axis " + std::to_string(d) +
                   " (expected a finite scale > 0, and size 0 for an empty input axis)");
    }
  }
  KILN_RETURN_IF_ERROR(internal::check_output(kOp, out, x.dtype(), plan.sizes));
  if (out.numel() == 0) return Status();
  std::vector<AxisTaps> axes;
  for (size_t d = 0; d < rank; ++d) {
    axes.push_back(axis_taps(options, x.size(static_cast<int64_t>(d)), plan.sizes[d],
                             plan.scales[d], plan.roi[d], plan.roi[rank + d]));
  }
  return dispatch<DtypeGroup::Numeric>(kOp, "input 0", x.dtype(), [&](auto tag) {
    resize_typed<typename decltype(tag)::type>(x, axes, options, out);
    return Status();
  });
}

}  // namespace kiln::kernels
