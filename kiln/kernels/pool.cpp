// MaxPool, AveragePool and LpPool: for each output position, the window's kernel offsets that
// land inside the input are found per axis (no per-element bounds test), then visited.

#include <kiln/kernels/adapter.h>
#include <kiln/kernels/conv_geometry.h>
#include <kiln/kernels/dispatch.h>
#include <kiln/kernels/kernels.h>

#include <array>
#include <cmath>
#include <limits>
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

enum class PoolKind { Max, Average, Lp };

constexpr std::string_view op_name(PoolKind kind) {
  return kind == PoolKind::Max ? "MaxPool" : kind == PoolKind::Average ? "AveragePool" : "LpPool";
}

constexpr std::array<ScalarType, 6> kMaxPoolDtypes = {ScalarType::Float32, ScalarType::Float64,
                                                      ScalarType::Float16, ScalarType::BFloat16,
                                                      ScalarType::Int8,    ScalarType::UInt8};

Span<const ScalarType> dtypes_for(PoolKind kind) {
  if (kind == PoolKind::Max) return kMaxPoolDtypes;
  return kFloatDtypes;
}

Result<internal::Window> pool_window(PoolKind kind, Span<const int64_t> x,
                                     const PoolOptions& options) {
  const std::string_view op = op_name(kind);
  KILN_RETURN_IF_ERROR(internal::check_spatial_rank(op, "input 0", x));
  const size_t rank = x.size() - 2;
  if (options.kernel_shape.empty()) {
    return internal::invalid_argument(op, "attribute 'kernel_shape' is missing (expected " +
                                              std::to_string(rank) + " window sizes)");
  }
  KILN_ASSIGN_OR_RETURN(
      auto kernel, internal::axis_values(op, "kernel_shape", options.kernel_shape, rank, 1, 1));
  if (kind == PoolKind::Max && options.storage_order != 0 && options.storage_order != 1) {
    return internal::invalid_argument(op, "attribute 'storage_order' is " +
                                              std::to_string(options.storage_order) +
                                              " (expected 0 or 1)");
  }
  if (kind == PoolKind::Lp && options.p < 1) {
    return internal::invalid_argument(
        op, "attribute 'p' is " + std::to_string(options.p) + " (expected >= 1)");
  }
  return internal::forward_window(op, x, kernel, options.strides, options.dilations, options.pads,
                                  options.auto_pad, options.ceil_mode);
}

// The kernel offsets [first, last) of each axis that fall inside the input (`limit` = in) or,
// for count_include_pad, inside the padded extent.
struct WindowRanges {
  std::array<internal::Span1d, internal::kMaxSpatialRank> axis;
  int64_t count() const {
    int64_t n = 1;
    for (const auto& r : axis) n *= r.last - r.first;
    return n;
  }
};

WindowRanges ranges_at(const internal::Window& w, const std::array<int64_t, 3>& o, bool padded) {
  WindowRanges r;
  for (size_t s = 0; s < internal::kMaxSpatialRank; ++s) {
    const int64_t start = o[s] * w.stride[s] - w.pad_begin[s];
    r.axis[s] = padded ? internal::valid_range(w.kernel[s], w.in[s] + w.pad_begin[s] + w.pad_end[s],
                                               w.dilation[s], start + w.pad_begin[s])
                       : internal::valid_range(w.kernel[s], w.in[s], w.dilation[s], start);
  }
  return r;
}

// Calls `fn(plane, o, out_index)` for every output position o of every (n, c) plane, with
// `out_index` the position's flat index in the output.
template <typename Fn>
void for_each_window(const internal::Window& w, int64_t planes, Fn&& fn) {
  std::array<int64_t, 3> o{};
  int64_t out_index = 0;
  for (int64_t plane = 0; plane < planes; ++plane) {
    for (o[0] = 0; o[0] < w.out[0]; ++o[0]) {
      for (o[1] = 0; o[1] < w.out[1]; ++o[1]) {
        for (o[2] = 0; o[2] < w.out[2]; ++o[2], ++out_index) {
          fn(plane, o, out_index);
        }
      }
    }
  }
}

// Calls `visit(spatial_index, d, h, w)` for each window element inside the input.
template <typename Visit>
void visit_window(const internal::Window& w, const std::array<int64_t, 3>& o, const WindowRanges& r,
                  Visit&& visit) {
  std::array<int64_t, 3> start;
  for (size_t s = 0; s < 3; ++s) start[s] = o[s] * w.stride[s] - w.pad_begin[s];
  for (int64_t kd = r.axis[0].first; kd < r.axis[0].last; ++kd) {
    const int64_t id = start[0] + kd * w.dilation[0];
    for (int64_t kh = r.axis[1].first; kh < r.axis[1].last; ++kh) {
      const int64_t ih = start[1] + kh * w.dilation[1];
      for (int64_t kw = r.axis[2].first; kw < r.axis[2].last; ++kw) {
        const int64_t iw = start[2] + kw * w.dilation[2];
        visit((id * w.in[1] + ih) * w.in[2] + iw, id, ih, iw);
      }
    }
  }
}

Status check_pool_io(PoolKind kind, const Tensor& x, const internal::Window& w, const Tensor& out) {
  const std::string_view op = op_name(kind);
  KILN_RETURN_IF_ERROR(check_dtype(op, "input 0", x.dtype(), dtypes_for(kind)));
  KILN_RETURN_IF_ERROR(internal::check_contiguous(op, "input 0", x));
  return internal::check_output(op, out, x.dtype(),
                                internal::window_output_shape(x.size(0), x.size(1), w));
}

}  // namespace

Result<std::vector<int64_t>> pool_shape(Span<const int64_t> x, const PoolOptions& options) {
  KILN_ASSIGN_OR_RETURN(auto w, pool_window(PoolKind::Average, x, options));
  return internal::window_output_shape(x[0], x[1], w);
}

Status max_pool(const Tensor& x, const PoolOptions& options, Tensor& out, Tensor* indices) {
  constexpr std::string_view kOp = "MaxPool";
  KILN_ASSIGN_OR_RETURN(auto w, pool_window(PoolKind::Max, x.sizes(), options));
  KILN_RETURN_IF_ERROR(check_pool_io(PoolKind::Max, x, w, out));
  if (indices != nullptr) {
    constexpr std::array<ScalarType, 1> kI64 = {ScalarType::Int64};
    KILN_RETURN_IF_ERROR(check_dtype(kOp, "output 1 (Indices)", indices->dtype(), kI64));
    KILN_RETURN_IF_ERROR(internal::check_contiguous(kOp, "output 1 (Indices)", *indices));
    if (indices->numel() != out.numel() || indices->dim() != out.dim()) {
      return internal::invalid_argument(
          kOp, "output 1 (Indices) has shape " + runtime::shape_to_string(indices->sizes()) +
                   " (expected " + runtime::shape_to_string(out.sizes()) + ", output 0's)");
    }
  }
  const int64_t in_plane = w.in_size();
  const bool column_major = options.storage_order == 1;
  int64_t* index_out = indices != nullptr ? indices->mutable_data_ptr<int64_t>() : nullptr;
  return dispatch<DtypeGroup::Numeric>(kOp, "input 0", x.dtype(), [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    using C = ComputeType<T>;
    if constexpr (std::is_same_v<T, int16_t> || std::is_same_v<T, int32_t> ||
                  std::is_same_v<T, int64_t>) {
      return check_dtype(kOp, "input 0", x.dtype(), kMaxPoolDtypes);
    } else {
      const T* in = x.data_ptr<T>();
      T* result = out.mutable_data_ptr<T>();
      const C lowest = std::numeric_limits<C>::has_infinity ? -std::numeric_limits<C>::infinity()
                                                            : std::numeric_limits<C>::lowest();
      for_each_window(w, x.size(0) * x.size(1), [&](int64_t plane, const auto& o, int64_t at) {
        const T* src = in + plane * in_plane;
        C best = lowest;
        int64_t best_index = -1;
        int64_t best_d = 0, best_h = 0, best_w = 0;
        visit_window(w, o, ranges_at(w, o, false),
                     [&](int64_t i, int64_t d, int64_t h, int64_t wi) {
                       const C value = load(src[i]);
                       if (value > best || best_index < 0) {
                         if (value != value) return;  // nan never wins
                         best = value;
                         best_index = i;
                         best_d = d, best_h = h, best_w = wi;
                       }
                     });
        result[at] = store<T>(best);
        if (index_out != nullptr) {
          if (best_index >= 0 && column_major) {
            best_index = best_d + best_h * w.in[0] + best_w * w.in[0] * w.in[1];
          }
          index_out[at] = best_index < 0 ? -1 : plane * in_plane + best_index;
        }
      });
      return Status();
    }
  });
}

namespace {

// AveragePool (kind Average) and LpPool: a sum over the window in double, then finished.
Status sum_pool(PoolKind kind, const Tensor& x, const PoolOptions& options, Tensor& out) {
  const std::string_view op = op_name(kind);
  KILN_ASSIGN_OR_RETURN(auto w, pool_window(kind, x.sizes(), options));
  KILN_RETURN_IF_ERROR(check_pool_io(kind, x, w, out));
  const int64_t in_plane = w.in_size();
  const double p = static_cast<double>(options.p);
  return dispatch<DtypeGroup::Float>(op, "input 0", x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = ComputeType<T>;
    const T* in = x.data_ptr<T>();
    T* result = out.mutable_data_ptr<T>();
    for_each_window(w, x.size(0) * x.size(1), [&](int64_t plane, const auto& o, int64_t at) {
      const T* src = in + plane * in_plane;
      const WindowRanges ranges = ranges_at(w, o, false);
      double sum = 0;
      if (kind == PoolKind::Average) {
        visit_window(w, o, ranges,
                     [&](int64_t i, int64_t, int64_t, int64_t) { sum += load(src[i]); });
        const int64_t count =
            options.count_include_pad ? ranges_at(w, o, true).count() : ranges.count();
        result[at] = store<T>(static_cast<C>(sum / static_cast<double>(count)));
      } else {
        visit_window(w, o, ranges, [&](int64_t i, int64_t, int64_t, int64_t) {
          const double v = std::fabs(static_cast<double>(load(src[i])));
          sum += options.p == 1 ? v : options.p == 2 ? v * v : std::pow(v, p);
        });
        const double norm = options.p == 1   ? sum
                            : options.p == 2 ? std::sqrt(sum)
                                             : std::pow(sum, 1.0 / p);
        result[at] = store<T>(static_cast<C>(norm));
      }
    });
    return Status();
  });
}

}  // namespace

Status average_pool(const Tensor& x, const PoolOptions& options, Tensor& out) {
  return sum_pool(PoolKind::Average, x, options, out);
}

Status lp_pool(const Tensor& x, const PoolOptions& options, Tensor& out) {
  return sum_pool(PoolKind::Lp, x, options, out);
}

namespace {

Result<PoolOptions> read_pool_options(PoolKind kind, const runtime::Attributes& attributes) {
  const std::string_view op = op_name(kind);
  KILN_ASSIGN_OR_RETURN(auto window, internal::read_window_attributes(op, attributes));
  PoolOptions options;
  options.kernel_shape = std::move(window.kernel_shape);
  options.strides = std::move(window.strides);
  options.dilations = std::move(window.dilations);
  options.pads = std::move(window.pads);
  options.auto_pad = window.auto_pad;
  KILN_ASSIGN_OR_RETURN(int64_t ceil_mode, internal::int_attribute(op, attributes, "ceil_mode", 0));
  KILN_ASSIGN_OR_RETURN(int64_t include_pad,
                        internal::int_attribute(op, attributes, "count_include_pad", 0));
  KILN_ASSIGN_OR_RETURN(options.storage_order,
                        internal::int_attribute(op, attributes, "storage_order", 0));
  KILN_ASSIGN_OR_RETURN(options.p, internal::int_attribute(op, attributes, "p", 2));
  options.ceil_mode = ceil_mode != 0;
  options.count_include_pad = include_pad != 0;
  return options;
}

template <PoolKind kKind>
Status pool_kernel(runtime::KernelContext& context, Span<EValue* const> inputs,
                   Span<EValue* const> outputs, const runtime::Attributes& attributes) {
  constexpr std::string_view kOp = op_name(kKind);
  const size_t num_outputs = kKind == PoolKind::Max && outputs.size() == 2 ? 2 : 1;
  KILN_RETURN_IF_ERROR(internal::check_arity(kOp, inputs, outputs, 1, 1, num_outputs));
  KILN_ASSIGN_OR_RETURN(auto options, read_pool_options(kKind, attributes));
  KILN_ASSIGN_OR_RETURN(const Tensor* x, internal::input_tensor(kOp, inputs, 0));
  KILN_RETURN_IF_ERROR(check_dtype(kOp, "input 0", x->dtype(), dtypes_for(kKind)));
  KILN_ASSIGN_OR_RETURN(auto w, pool_window(kKind, x->sizes(), options));
  const auto shape = internal::window_output_shape(x->size(0), x->size(1), w);
  KILN_ASSIGN_OR_RETURN(EValue * out, internal::output_tensor(kOp, outputs, 0, x->dtype()));
  EValue* indices = nullptr;
  if (num_outputs == 2) {
    KILN_ASSIGN_OR_RETURN(indices,
                          internal::output_tensor_of_dtype(kOp, outputs, 1, ScalarType::Int64));
  }
  KILN_RETURN_IF_ERROR(internal::resize_output(context, kOp, *out, shape));
  if (indices != nullptr) {
    Status status = context.resize(*indices, shape);
    if (!status.ok()) {
      return status.with_context(internal::action(kOp) + ": resize output 1 to " +
                                 runtime::shape_to_string(shape));
    }
  }
  if constexpr (kKind == PoolKind::Max) {
    return max_pool(*x, options, out->to_tensor(),
                    indices != nullptr ? &indices->to_tensor() : nullptr);
  } else if constexpr (kKind == PoolKind::Average) {
    return average_pool(*x, options, out->to_tensor());
  } else {
    return lp_pool(*x, options, out->to_tensor());
  }
}

const runtime::KernelRegistration kRegisterMaxPool("MaxPool", pool_kernel<PoolKind::Max>);
const runtime::KernelRegistration kRegisterAveragePool("AveragePool",
                                                       pool_kernel<PoolKind::Average>);
const runtime::KernelRegistration kRegisterLpPool("LpPool", pool_kernel<PoolKind::Lp>);

}  // namespace
}  // namespace kiln::kernels
