#include <kiln/kernels/kernels.h>
#include <kiln/kernels/norm_helpers.h>

#include <cmath>
#include <string>
#include <vector>

namespace kiln::kernels {

using runtime::EValue;
using runtime::Span;
using runtime::Status;
using runtime::Tensor;

namespace {

constexpr std::string_view kOp = "MeanVarianceNormalization";
// ONNX's function body adds this to the standard deviation (not the variance).
constexpr double kEpsilon = 1e-9;

Status mvn_kernel(runtime::KernelContext& context, Span<EValue* const> inputs,
                  Span<EValue* const> outputs, const runtime::Attributes& attributes) {
  KILN_RETURN_IF_ERROR(internal::check_arity(kOp, inputs, outputs, 1, 1, 1));
  auto axes = attributes.get_ints("axes", {0, 2, 3});
  if (!axes.ok()) return axes.status().with_context(internal::action(kOp));
  KILN_ASSIGN_OR_RETURN(const Tensor* x, internal::input_tensor(kOp, inputs, 0));
  KILN_RETURN_IF_ERROR(check_dtype(kOp, "input 0", x->dtype(), kFloatDtypes));
  KILN_RETURN_IF_ERROR(internal::normalize_axes(kOp, "attribute 'axes'", *axes, x->dim()).status());
  KILN_ASSIGN_OR_RETURN(EValue * out, internal::output_tensor(kOp, outputs, 0, x->dtype()));
  KILN_RETURN_IF_ERROR(internal::resize_output(context, kOp, *out, x->sizes()));
  return mean_variance_normalization(*x, *axes, out->to_tensor());
}

const runtime::KernelRegistration kRegisterMvn("MeanVarianceNormalization", mvn_kernel);

}  // namespace

Status mean_variance_normalization(const Tensor& x, Span<const int64_t> axes, Tensor& out) {
  KILN_RETURN_IF_ERROR(check_dtype(kOp, "input 0", x.dtype(), kFloatDtypes));
  KILN_ASSIGN_OR_RETURN(
      std::vector<int64_t> reduced,
      internal::normalize_axes(kOp, "attribute 'axes'",
                               std::vector<int64_t>(axes.begin(), axes.end()), x.dim()));
  KILN_RETURN_IF_ERROR(internal::check_contiguous(kOp, "input 0", x));
  KILN_RETURN_IF_ERROR(internal::check_output(kOp, out, x.dtype(), x.sizes()));
  // Each element belongs to the group of elements that agree on every kept axis: its group
  // id is its index over the kept axes alone (reduced axes get group stride 0).
  const auto rank = static_cast<size_t>(x.dim());
  std::vector<int64_t> group_strides(rank, 0);
  int64_t groups = 1;
  for (size_t d = rank; d-- > 0;) {
    bool is_reduced = false;
    for (int64_t axis : reduced) is_reduced = is_reduced || axis == static_cast<int64_t>(d);
    if (is_reduced) continue;
    group_strides[d] = groups;
    groups *= x.size(static_cast<int64_t>(d));
  }
  const int64_t numel = x.numel();
  if (numel == 0) return Status();
  const std::vector<int64_t> group = internal::strided_offsets(group_strides, x.sizes());
  const double count = static_cast<double>(numel / groups);
  std::vector<double> mean(static_cast<size_t>(groups), 0.0);
  std::vector<double> squares(static_cast<size_t>(groups), 0.0);
  return dispatch<DtypeGroup::Float>(kOp, "input 0", x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = ComputeType<T>;
    const T* in = x.data_ptr<T>();
    T* result = out.mutable_data_ptr<T>();
    for (int64_t i = 0; i < numel; ++i) mean[group[i]] += load(in[i]);
    for (double& m : mean) m /= count;
    for (int64_t i = 0; i < numel; ++i) {
      const double d = load(in[i]) - mean[group[i]];
      squares[group[i]] += d * d;
    }
    for (int64_t i = 0; i < numel; ++i) {
      const auto g = static_cast<size_t>(group[i]);
      const double std_dev = std::sqrt(squares[g] / count);
      result[i] = store<T>(static_cast<C>((load(in[i]) - mean[g]) / (std_dev + kEpsilon)));
    }
    return Status();
  });
}

}  // namespace kiln::kernels
