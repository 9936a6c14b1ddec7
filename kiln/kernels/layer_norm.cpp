#include <kiln/kernels/kernels.h>
#include <kiln/kernels/norm_helpers.h>

#include <cmath>
#include <string>
#include <vector>

namespace kiln::kernels {

using runtime::Error;
using runtime::EValue;
using runtime::Result;
using runtime::ScalarType;
using runtime::Span;
using runtime::Status;
using runtime::Tensor;

namespace {

constexpr std::string_view kOp = "LayerNormalization";

// Checks the dtypes, the axis and that Scale and B broadcast to x.shape[axis:]; returns the
// shape of the Mean and InvStdDev outputs.
Result<std::vector<int64_t>> check_inputs(const Tensor& x, const Tensor& scale, const Tensor* bias,
                                          int64_t axis) {
  KILN_RETURN_IF_ERROR(check_dtype(kOp, "input 0", x.dtype(), kFloatDtypes));
  KILN_RETURN_IF_ERROR(
      internal::check_same_dtype(kOp, "input 1 (Scale)", scale.dtype(), x.dtype()));
  if (bias != nullptr) {
    KILN_RETURN_IF_ERROR(internal::check_same_dtype(kOp, "input 2 (B)", bias->dtype(), x.dtype()));
  }
  auto stats_shape = layer_norm_stats_shape(x.sizes(), axis);
  if (!stats_shape.ok()) return stats_shape.status().with_context(internal::action(kOp));
  if (axis < 0) axis += x.dim();
  const Span<const int64_t> normalized(x.sizes().data() + axis,
                                       static_cast<size_t>(x.dim() - axis));
  KILN_RETURN_IF_ERROR(
      internal::check_broadcasts_to(kOp, "input 1 (Scale)", scale.sizes(), normalized));
  if (bias != nullptr) {
    KILN_RETURN_IF_ERROR(
        internal::check_broadcasts_to(kOp, "input 2 (B)", bias->sizes(), normalized));
  }
  return stats_shape;
}

Status layer_norm_kernel(runtime::KernelContext& context, Span<EValue* const> inputs,
                         Span<EValue* const> outputs, const runtime::Attributes& attributes) {
  KILN_RETURN_IF_ERROR(internal::check_arity(kOp, inputs, outputs, 2, 3, outputs.size()));
  if (outputs.empty() || outputs.size() > 3) {
    return internal::invalid_argument(
        kOp, "got " + std::to_string(outputs.size()) + " outputs (expected 1 to 3)");
  }
  LayerNormOptions options;
  KILN_ASSIGN_OR_RETURN(options.axis, internal::int_attribute(kOp, attributes, "axis", -1));
  KILN_ASSIGN_OR_RETURN(options.epsilon,
                        internal::double_attribute(kOp, attributes, "epsilon", 1e-5));
  KILN_RETURN_IF_ERROR(internal::check_stash_type(kOp, attributes));
  KILN_ASSIGN_OR_RETURN(const Tensor* x, internal::input_tensor(kOp, inputs, 0));
  KILN_ASSIGN_OR_RETURN(const Tensor* scale, internal::input_tensor(kOp, inputs, 1));
  const Tensor* bias = nullptr;
  if (!internal::is_absent(inputs, 2)) {
    KILN_ASSIGN_OR_RETURN(bias, internal::input_tensor(kOp, inputs, 2));
  }
  auto stats_shape = check_inputs(*x, *scale, bias, options.axis);
  if (!stats_shape.ok()) return stats_shape.status();
  KILN_ASSIGN_OR_RETURN(EValue * out, internal::output_tensor(kOp, outputs, 0, x->dtype()));
  KILN_ASSIGN_OR_RETURN(EValue * mean, internal::optional_float_output(kOp, outputs, 1));
  KILN_ASSIGN_OR_RETURN(EValue * inv_std, internal::optional_float_output(kOp, outputs, 2));
  KILN_RETURN_IF_ERROR(internal::resize_output(context, kOp, *out, x->sizes()));
  if (mean != nullptr) {
    KILN_RETURN_IF_ERROR(internal::resize_output(context, kOp, *mean, *stats_shape));
  }
  if (inv_std != nullptr) {
    KILN_RETURN_IF_ERROR(internal::resize_output(context, kOp, *inv_std, *stats_shape));
  }
  return layer_norm(*x, *scale, bias, options, out->to_tensor(),
                    mean != nullptr ? &mean->to_tensor() : nullptr,
                    inv_std != nullptr ? &inv_std->to_tensor() : nullptr);
}

const runtime::KernelRegistration kRegisterLayerNorm("LayerNormalization", layer_norm_kernel);

Status check_stats_output(const Tensor* t, std::string_view subject,
                          const std::vector<int64_t>& shape) {
  if (t == nullptr) return Status();
  KILN_RETURN_IF_ERROR(check_dtype(kOp, subject, t->dtype(), kFloatDtypes));
  KILN_RETURN_IF_ERROR(internal::check_contiguous(kOp, subject, *t));
  if (std::equal(t->sizes().begin(), t->sizes().end(), shape.begin(), shape.end())) {
    return Status();
  }
  return internal::invalid_argument(kOp, std::string(subject) + " has shape " +
                                             runtime::shape_to_string(t->sizes()) + " (expected " +
                                             runtime::shape_to_string(shape) + ")");
}

}  // namespace

Result<std::vector<int64_t>> layer_norm_stats_shape(Span<const int64_t> x, int64_t axis) {
  const auto rank = static_cast<int64_t>(x.size());
  if (rank == 0 || axis < -rank || axis >= rank) {
    return Status(Error::InvalidArgument, "attribute 'axis' is " + std::to_string(axis) +
                                              " (expected " + std::to_string(-rank) + ".." +
                                              std::to_string(rank - 1) + " for input 0 of rank " +
                                              std::to_string(rank) + ")");
  }
  if (axis < 0) axis += rank;
  std::vector<int64_t> shape(x.begin(), x.begin() + axis);
  shape.resize(x.size(), 1);
  return shape;
}

Status layer_norm(const Tensor& x, const Tensor& scale, const Tensor* bias,
                  const LayerNormOptions& options, Tensor& out, Tensor* mean, Tensor* inv_std_dev) {
  auto stats_shape = check_inputs(x, scale, bias, options.axis);
  if (!stats_shape.ok()) return stats_shape.status();
  const int64_t axis = options.axis < 0 ? options.axis + x.dim() : options.axis;
  const Span<const int64_t> normalized(x.sizes().data() + axis,
                                       static_cast<size_t>(x.dim() - axis));
  KILN_RETURN_IF_ERROR(internal::check_contiguous(kOp, "input 0", x));
  KILN_RETURN_IF_ERROR(internal::check_contiguous(kOp, "input 1 (Scale)", scale));
  if (bias != nullptr) KILN_RETURN_IF_ERROR(internal::check_contiguous(kOp, "input 2 (B)", *bias));
  KILN_RETURN_IF_ERROR(internal::check_output(kOp, out, x.dtype(), x.sizes()));
  KILN_RETURN_IF_ERROR(check_stats_output(mean, "output 1 (Mean)", *stats_shape));
  KILN_RETURN_IF_ERROR(check_stats_output(inv_std_dev, "output 2 (InvStdDev)", *stats_shape));

  int64_t inner = 1;
  for (int64_t size : normalized) inner *= size;
  const int64_t outer = inner == 0 ? 0 : x.numel() / inner;
  const std::vector<int64_t> scale_at = internal::broadcast_offsets(scale.sizes(), normalized);
  const std::vector<int64_t> bias_at = bias != nullptr
                                           ? internal::broadcast_offsets(bias->sizes(), normalized)
                                           : std::vector<int64_t>();
  return dispatch<DtypeGroup::Float>(kOp, "input 0", x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = ComputeType<T>;
    const T* in = x.data_ptr<T>();
    const T* gamma = scale.data_ptr<T>();
    const T* beta = bias != nullptr ? bias->data_ptr<T>() : nullptr;
    T* result = out.mutable_data_ptr<T>();
    for (int64_t o = 0; o < outer; ++o) {
      const T* row = in + o * inner;
      double sum = 0;
      for (int64_t j = 0; j < inner; ++j) sum += static_cast<double>(load(row[j]));
      const double mu = sum / static_cast<double>(inner);
      double squares = 0;
      for (int64_t j = 0; j < inner; ++j) {
        const double d = static_cast<double>(load(row[j])) - mu;
        squares += d * d;
      }
      const double inv_std =
          1.0 / std::sqrt(squares / static_cast<double>(inner) + options.epsilon);
      for (int64_t j = 0; j < inner; ++j) {
        const auto k = static_cast<size_t>(j);
        double y = (static_cast<double>(load(row[j])) - mu) * inv_std *
                   static_cast<double>(load(gamma[scale_at[k]]));
        if (beta != nullptr) y += static_cast<double>(load(beta[bias_at[k]]));
        result[o * inner + j] = store<T>(static_cast<C>(y));
      }
      if (mean != nullptr) internal::write_float(*mean, o, mu);
      if (inv_std_dev != nullptr) internal::write_float(*inv_std_dev, o, inv_std);
    }
    return Status();
  });
}

}  // namespace kiln::kernels
