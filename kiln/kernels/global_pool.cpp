// GlobalAveragePool, GlobalMaxPool and GlobalLpPool: one reduction over each (n, c) plane.

#include <kiln/kernels/adapter.h>
#include <kiln/kernels/conv_geometry.h>
#include <kiln/kernels/dispatch.h>
#include <kiln/kernels/kernels.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

namespace kiln::kernels {

using runtime::EValue;
using runtime::Result;
using runtime::Span;
using runtime::Status;
using runtime::Tensor;

namespace {

enum class GlobalKind { Average, Max, Lp };

constexpr std::string_view op_name(GlobalKind kind) {
  return kind == GlobalKind::Average ? "GlobalAveragePool"
         : kind == GlobalKind::Max   ? "GlobalMaxPool"
                                     : "GlobalLpPool";
}

Result<std::vector<int64_t>> shape_for(std::string_view op, Span<const int64_t> x) {
  if (x.size() < 3) {
    return internal::invalid_argument(op, "input 0 of shape " + runtime::shape_to_string(x) +
                                              " has rank " + std::to_string(x.size()) +
                                              " (expected N, C and at least 1 spatial axis)");
  }
  std::vector<int64_t> shape(x.size(), 1);
  shape[0] = x[0];
  shape[1] = x[1];
  return shape;
}

// Reduces each plane of `x` to one value of `out`: the mean, the maximum or the p-norm.
Status global_pool(GlobalKind kind, const Tensor& x, int64_t p, Tensor& out) {
  const std::string_view op = op_name(kind);
  KILN_RETURN_IF_ERROR(check_dtype(op, "input 0", x.dtype(), kFloatDtypes));
  KILN_ASSIGN_OR_RETURN(auto shape, shape_for(op, x.sizes()));
  if (kind == GlobalKind::Lp && p < 1) {
    return internal::invalid_argument(op,
                                      "attribute 'p' is " + std::to_string(p) + " (expected >= 1)");
  }
  KILN_RETURN_IF_ERROR(internal::check_contiguous(op, "input 0", x));
  KILN_RETURN_IF_ERROR(internal::check_output(op, out, x.dtype(), shape));
  const int64_t planes = x.size(0) * x.size(1);
  const int64_t plane = planes == 0 ? 0 : x.numel() / planes;
  return dispatch<DtypeGroup::Float>(op, "input 0", x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = ComputeType<T>;
    const T* in = x.data_ptr<T>();
    T* result = out.mutable_data_ptr<T>();
    for (int64_t i = 0; i < planes; ++i) {
      const T* src = in + i * plane;
      double acc = kind == GlobalKind::Max ? -std::numeric_limits<double>::infinity() : 0.0;
      for (int64_t j = 0; j < plane; ++j) {
        const double v = static_cast<double>(load(src[j]));
        if (kind == GlobalKind::Max) {
          if (v > acc) acc = v;
        } else if (kind == GlobalKind::Average) {
          acc += v;
        } else {
          acc += p == 1 ? std::fabs(v) : p == 2 ? v * v : std::pow(std::fabs(v), double(p));
        }
      }
      if (kind == GlobalKind::Average) acc /= static_cast<double>(plane);
      if (kind == GlobalKind::Lp) {
        acc = p == 1 ? acc : p == 2 ? std::sqrt(acc) : std::pow(acc, 1.0 / double(p));
      }
      result[i] = store<T>(static_cast<C>(acc));
    }
    return Status();
  });
}

template <GlobalKind kKind>
Status global_pool_kernel(runtime::KernelContext& context, Span<EValue* const> inputs,
                          Span<EValue* const> outputs, const runtime::Attributes& attributes) {
  constexpr std::string_view kOp = op_name(kKind);
  KILN_RETURN_IF_ERROR(internal::check_arity(kOp, inputs, outputs, 1, 1, 1));
  int64_t p = 2;
  if constexpr (kKind == GlobalKind::Lp) {
    KILN_ASSIGN_OR_RETURN(p, internal::int_attribute(kOp, attributes, "p", 2));
  }
  KILN_ASSIGN_OR_RETURN(const Tensor* x, internal::input_tensor(kOp, inputs, 0));
  KILN_RETURN_IF_ERROR(check_dtype(kOp, "input 0", x->dtype(), kFloatDtypes));
  KILN_ASSIGN_OR_RETURN(auto shape, shape_for(kOp, x->sizes()));
  KILN_ASSIGN_OR_RETURN(EValue * out, internal::output_tensor(kOp, outputs, 0, x->dtype()));
  KILN_RETURN_IF_ERROR(internal::resize_output(context, kOp, *out, shape));
  return global_pool(kKind, *x, p, out->to_tensor());
}

const runtime::KernelRegistration kRegisterGlobalAveragePool(
    "GlobalAveragePool", global_pool_kernel<GlobalKind::Average>);
const runtime::KernelRegistration kRegisterGlobalMaxPool("GlobalMaxPool",
                                                         global_pool_kernel<GlobalKind::Max>);
const runtime::KernelRegistration kRegisterGlobalLpPool("GlobalLpPool",
                                                        global_pool_kernel<GlobalKind::Lp>);

}  // namespace

Result<std::vector<int64_t>> global_pool_shape(Span<const int64_t> x) {
  return shape_for("GlobalAveragePool", x);
}

Status global_average_pool(const Tensor& x, Tensor& out) {
  return global_pool(GlobalKind::Average, x, 2, out);
}

Status global_max_pool(const Tensor& x, Tensor& out) {
  return global_pool(GlobalKind::Max, x, 2, out);
}

Status global_lp_pool(const Tensor& x, int64_t p, Tensor& out) {
  return global_pool(GlobalKind::Lp, x, p, out);
}

}  // namespace kiln::kernels
