// GridSample: for each output position the grid gives one normalized coordinate per spatial
// axis (last axis first); each axis turns it into taps (index, weight), padding decides the
// value of a tap outside the input, and the taps of all axes combine as a tensor product.
// Follows the ONNX reference (itself PyTorch's grid_sampler): out-of-range coordinates are
// first clamped (border) or reflected (reflection), then the taps read with the same rule.

#include <kiln/kernels/image_common.h>
#include <kiln/kernels/image_ops.h>
#include <kiln/kernels/kernels.h>
#include <kiln/kernels/layout.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

namespace kiln::kernels {

using runtime::Error;
using runtime::Result;
using runtime::Span;
using runtime::Status;
using runtime::Tensor;

namespace {

constexpr std::string_view kOp = "GridSample";

// One tap of one axis: an input index, or -1 for a zero (padding 'zeros' outside the input).
struct Tap {
  int64_t index;
  double weight;
};

double keys_cubic(double x) {
  constexpr double a = -0.75;
  x = std::abs(x);
  if (x <= 1) return ((a + 2) * x - (a + 3)) * x * x + 1;
  if (x < 2) return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a;
  return 0.0;
}

// Reflects `x` at `lo` and `hi` until it lies between them.
double reflect(double x, double lo, double hi) {
  const double range = hi - lo;
  if (range <= 0) return lo;
  if (x >= lo && x <= hi) return x;
  const double dx = x < lo ? lo - x : x - hi;
  const double flips = std::floor(dx / range);
  const double rest = dx - flips * range;
  const bool even = std::fmod(flips, 2.0) == 0.0;
  if (x < lo) return even ? lo + rest : hi - rest;
  return even ? hi - rest : lo + rest;
}

class AxisSampler {
 public:
  AxisSampler(const GridSampleOptions& options, int64_t size)
      : options_(options),
        size_(size),
        lo_(options.align_corners ? 0.0 : -0.5),
        hi_(options.align_corners ? static_cast<double>(size) - 1 : static_cast<double>(size) - 0.5) {}

  // The taps of normalized coordinate `g` (not nan) on an input of `spatial_rank` axes.
  void taps(double g, size_t spatial_rank, std::vector<Tap>& out) const {
    const auto d = static_cast<double>(size_);
    double x = options_.align_corners ? (g + 1) / 2 * (d - 1) : ((g + 1) * d - 1) / 2;
    // Bound x so the index arithmetic stays in range: far outside, every tap is a zero, and
    // reflection (exact for any finite x) only needs x finite.
    x = options_.padding == GridSamplePadding::Zeros ? std::clamp(x, -8.0 - 2 * d, 8.0 + 3 * d)
                                                     : std::clamp(x, -1.0e15, 1.0e15);
    if (options_.mode == GridSampleMode::Nearest) {
      x = spatial_rank == 3 ? std::round(x) : std::nearbyint(x);  // as PyTorch 3-D / 2-D
    }
    if (x < lo_ || x > hi_) {
      if (options_.padding == GridSamplePadding::Border) x = std::clamp(x, 0.0, d - 1);
      if (options_.padding == GridSamplePadding::Reflection) x = reflect(x, lo_, hi_);
    }
    out.clear();
    if (options_.mode == GridSampleMode::Nearest) {
      out.push_back(Tap{read(static_cast<int64_t>(x)), 1.0});
      return;
    }
    const double base = std::floor(x);
    const double t = x - base;
    const auto i = static_cast<int64_t>(base);
    if (options_.mode == GridSampleMode::Linear) {
      out.push_back(Tap{read(i), 1 - t});
      out.push_back(Tap{read(i + 1), t});
      return;
    }
    out.push_back(Tap{read(i - 1), keys_cubic(t + 1)});
    out.push_back(Tap{read(i), keys_cubic(t)});
    out.push_back(Tap{read(i + 1), keys_cubic(1 - t)});
    out.push_back(Tap{read(i + 2), keys_cubic(2 - t)});
  }

 private:
  // The input index tap `i` reads, or -1 for a zero.
  int64_t read(int64_t i) const {
    if (i >= 0 && i < size_) return i;
    switch (options_.padding) {
      case GridSamplePadding::Zeros:
        return -1;
      case GridSamplePadding::Border:
        return std::clamp<int64_t>(i, 0, size_ - 1);
      case GridSamplePadding::Reflection:
        break;
    }
    const auto r = static_cast<int64_t>(reflect(static_cast<double>(i), lo_, hi_));
    return std::clamp<int64_t>(r, 0, size_ - 1);
  }

  GridSampleOptions options_;
  int64_t size_;
  double lo_;
  double hi_;
};

template <typename T, typename G>
void grid_sample_typed(const Tensor& x, const Tensor& grid, const GridSampleOptions& options,
                       Tensor& out) {
  const size_t k = static_cast<size_t>(x.dim()) - 2;
  const int64_t batch = x.size(0);
  const int64_t channels = x.size(1);
  const auto in_strides = internal::dense_strides(x.sizes());
  const int64_t in_plane = channels > 0 ? in_strides[1] : 0;
  int64_t positions = 1;
  for (size_t i = 0; i < k; ++i) positions *= grid.size(static_cast<int64_t>(i + 1));
  std::vector<AxisSampler> axes;
  for (size_t i = 0; i < k; ++i) axes.emplace_back(options, x.size(static_cast<int64_t>(i + 2)));
  const T* in = x.data_ptr<T>();
  const G* g = grid.data_ptr<G>();
  T* dst = out.mutable_data_ptr<T>();
  std::vector<std::vector<Tap>> taps(k);
  std::vector<std::pair<int64_t, double>> combined;  // (offset in a plane or -1, weight)
  for (int64_t n = 0; n < batch; ++n) {
    for (int64_t p = 0; p < positions; ++p) {
      const G* coords = g + (n * positions + p) * static_cast<int64_t>(k);
      bool has_nan = false;
      for (size_t i = 0; i < k; ++i) {
        const double c = static_cast<double>(load(coords[k - 1 - i]));
        has_nan = has_nan || std::isnan(c);
        if (!has_nan) axes[i].taps(c, k, taps[i]);
      }
      combined.assign(1, {0, 1.0});
      for (size_t i = 0; i < k && !has_nan; ++i) {
        std::vector<std::pair<int64_t, double>> next;
        for (const auto& [offset, weight] : combined) {
          for (const Tap& tap : taps[i]) {
            const bool zero = offset < 0 || tap.index < 0;
            next.emplace_back(zero ? -1 : offset + tap.index * in_strides[i + 2],
                              weight * tap.weight);
          }
        }
        combined = std::move(next);
      }
      for (int64_t c = 0; c < channels; ++c) {
        double sum = has_nan ? std::numeric_limits<double>::quiet_NaN() : 0.0;
        const T* plane = in + (n * channels + c) * in_plane;
        for (size_t t = 0; t < combined.size() && !has_nan; ++t) {
          if (combined[t].first >= 0) {
            sum += combined[t].second * static_cast<double>(load(plane[combined[t].first]));
          }
        }
        dst[(n * channels + c) * positions + p] = store<T>(static_cast<ComputeType<T>>(sum));
      }
    }
  }
}

Result<GridSampleOptions> read_options(const runtime::Attributes& attributes) {
  GridSampleOptions options;
  KILN_ASSIGN_OR_RETURN(auto mode, internal::string_attribute(kOp, attributes, "mode", "bilinear"));
  KILN_ASSIGN_OR_RETURN(auto padding,
                        internal::string_attribute(kOp, attributes, "padding_mode", "zeros"));
  KILN_ASSIGN_OR_RETURN(int64_t align, internal::int_attribute(kOp, attributes, "align_corners", 0));
  if (mode == "bilinear" || mode == "linear") {
    options.mode = GridSampleMode::Linear;
  } else if (mode == "nearest") {
    options.mode = GridSampleMode::Nearest;
  } else if (mode == "bicubic" || mode == "cubic") {
    options.mode = GridSampleMode::Cubic;
  } else {
    return internal::invalid_argument(
        kOp, "attribute 'mode' is '" + mode +
                 "' (expected 'bilinear', 'linear', 'nearest', 'bicubic' or 'cubic')");
  }
  if (padding == "zeros") {
    options.padding = GridSamplePadding::Zeros;
  } else if (padding == "border") {
    options.padding = GridSamplePadding::Border;
  } else if (padding == "reflection") {
    options.padding = GridSamplePadding::Reflection;
  } else {
    return internal::invalid_argument(kOp, "attribute 'padding_mode' is '" + padding +
                                               "' (expected 'zeros', 'border' or 'reflection')");
  }
  options.align_corners = align != 0;
  return options;
}

Status grid_sample_kernel(runtime::KernelContext& context, Span<runtime::EValue* const> inputs,
                          Span<runtime::EValue* const> outputs,
                          const runtime::Attributes& attributes) {
  KILN_RETURN_IF_ERROR(internal::check_arity(kOp, inputs, outputs, 2, 2, 1));
  KILN_ASSIGN_OR_RETURN(const Tensor* x, internal::input_tensor(kOp, inputs, 0));
  KILN_ASSIGN_OR_RETURN(const Tensor* grid, internal::input_tensor(kOp, inputs, 1));
  KILN_RETURN_IF_ERROR(check_dtype(kOp, "input 0", x->dtype(), kFloatDtypes));
  KILN_RETURN_IF_ERROR(check_dtype(kOp, "input 1 (grid)", grid->dtype(), kFloatDtypes));
  KILN_ASSIGN_OR_RETURN(GridSampleOptions options, read_options(attributes));
  auto shape = grid_sample_shape(x->sizes(), grid->sizes());
  if (!shape.ok()) return shape.status().with_context(internal::action(kOp));
  KILN_ASSIGN_OR_RETURN(runtime::EValue * out, internal::output_tensor(kOp, outputs, 0, x->dtype()));
  KILN_RETURN_IF_ERROR(internal::resize_output(context, kOp, *out, *shape));
  return grid_sample(*x, *grid, options, out->to_tensor());
}

const runtime::KernelRegistration kRegisterGridSample("GridSample", grid_sample_kernel);

}  // namespace

Result<std::vector<int64_t>> grid_sample_shape(Span<const int64_t> x, Span<const int64_t> grid) {
  const size_t rank = x.size();
  if (rank < 3 || grid.size() != rank || grid[0] != x[0] ||
      grid[rank - 1] != static_cast<int64_t>(rank - 2)) {
    return Status(Error::InvalidArgument,
                  "input 0 has shape " + runtime::shape_to_string(x) + " and input 1 (grid) " +
                      runtime::shape_to_string(grid) +
                      " (expected [N, C, D1, ..., Dk] and [N, D1_out, ..., Dk_out, k], k >= 1)");
  }
  std::vector<int64_t> shape = {x[0], x[1]};
  shape.insert(shape.end(), grid.begin() + 1, grid.end() - 1);
  return shape;
}

Status grid_sample(const Tensor& x, const Tensor& grid, const GridSampleOptions& options,
                   Tensor& out) {
  KILN_RETURN_IF_ERROR(check_dtype(kOp, "input 0", x.dtype(), kFloatDtypes));
  KILN_RETURN_IF_ERROR(check_dtype(kOp, "input 1 (grid)", grid.dtype(), kFloatDtypes));
  auto shape = grid_sample_shape(x.sizes(), grid.sizes());
  if (!shape.ok()) return shape.status().with_context(internal::action(kOp));
  KILN_RETURN_IF_ERROR(internal::check_contiguous(kOp, "input 0", x));
  KILN_RETURN_IF_ERROR(internal::check_contiguous(kOp, "input 1 (grid)", grid));
  KILN_RETURN_IF_ERROR(internal::check_output(kOp, out, x.dtype(), *shape));
  if (out.numel() == 0) return Status();
  for (int64_t d = 2; d < x.dim(); ++d) {
    if (x.size(d) == 0) {
      return internal::invalid_argument(kOp, "input 0 has shape " +
                                                 runtime::shape_to_string(x.sizes()) +
                                                 " (expected non-empty spatial axes)");
    }
  }
  return dispatch<DtypeGroup::Float>(kOp, "input 0", x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    return dispatch<DtypeGroup::Float>(kOp, "input 1 (grid)", grid.dtype(), [&](auto grid_tag) {
      grid_sample_typed<T, typename decltype(grid_tag)::type>(x, grid, options, out);
      return Status();
    });
  });
}

}  // namespace kiln::kernels
