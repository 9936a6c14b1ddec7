// ScatterElements, Scatter (its opset 9-10 name) and ScatterND.
#include <kiln/kernels/index_ops.h>
#include <kiln/kernels/index_util.h>
#include <kiln/kernels/layout.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

namespace kiln::kernels {

using runtime::Error;
using runtime::EValue;
using runtime::Result;
using runtime::Span;
using runtime::Status;
using runtime::Tensor;

namespace {

constexpr std::string_view kElementsOp = "ScatterElements";
constexpr std::string_view kNDOp = "ScatterND";

Result<ScatterReduction> reduction_attribute(std::string_view op,
                                             const runtime::Attributes& attributes) {
  auto name = attributes.get_string("reduction", "none");
  if (!name.ok()) return name.status().with_context(internal::action(op));
  auto reduction = scatter_reduction_from_string(*name);
  if (!reduction.ok()) return reduction.status().with_context(internal::action(op));
  return *reduction;
}

// ScatterElements and Scatter share this adapter; `op` names the one the model used.
Status scatter_elements_adapter(std::string_view op, runtime::KernelContext& context,
                                Span<EValue* const> inputs, Span<EValue* const> outputs,
                                const runtime::Attributes& attributes) {
  KILN_RETURN_IF_ERROR(internal::check_arity(op, inputs, outputs, 3, 3, 1));
  KILN_ASSIGN_OR_RETURN(int64_t axis, internal::int_attribute(op, attributes, "axis", 0));
  KILN_ASSIGN_OR_RETURN(ScatterReduction reduction, reduction_attribute(op, attributes));
  KILN_ASSIGN_OR_RETURN(const Tensor* data, internal::input_tensor(op, inputs, 0));
  KILN_ASSIGN_OR_RETURN(const Tensor* indices, internal::input_tensor(op, inputs, 1));
  KILN_ASSIGN_OR_RETURN(const Tensor* updates, internal::input_tensor(op, inputs, 2));
  KILN_RETURN_IF_ERROR(check_dtype(op, "input 1 (indices)", indices->dtype(), kIndexDtypes));
  KILN_RETURN_IF_ERROR(
      internal::check_same_dtype(op, "input 2 (updates)", updates->dtype(), data->dtype()));
  KILN_ASSIGN_OR_RETURN(axis, internal::normalize_axis(op, "attribute 'axis'", axis, data->dim()));
  KILN_ASSIGN_OR_RETURN(EValue * out, internal::output_tensor(op, outputs, 0, data->dtype()));
  KILN_RETURN_IF_ERROR(internal::resize_output(context, op, *out, data->sizes()));
  Status status = scatter_elements(*data, *indices, *updates, axis, reduction, out->to_tensor());
  if (status.ok() || op == kElementsOp) return status;
  return Status(status.code(), std::string(status.message()) + " (as Scatter)");
}

Status scatter_elements_kernel(runtime::KernelContext& context, Span<EValue* const> inputs,
                               Span<EValue* const> outputs, const runtime::Attributes& attributes) {
  return scatter_elements_adapter(kElementsOp, context, inputs, outputs, attributes);
}

Status scatter_kernel(runtime::KernelContext& context, Span<EValue* const> inputs,
                      Span<EValue* const> outputs, const runtime::Attributes& attributes) {
  return scatter_elements_adapter("Scatter", context, inputs, outputs, attributes);
}

Status scatter_nd_kernel(runtime::KernelContext& context, Span<EValue* const> inputs,
                         Span<EValue* const> outputs, const runtime::Attributes& attributes) {
  KILN_RETURN_IF_ERROR(internal::check_arity(kNDOp, inputs, outputs, 3, 3, 1));
  KILN_ASSIGN_OR_RETURN(ScatterReduction reduction, reduction_attribute(kNDOp, attributes));
  KILN_ASSIGN_OR_RETURN(const Tensor* data, internal::input_tensor(kNDOp, inputs, 0));
  KILN_ASSIGN_OR_RETURN(const Tensor* indices, internal::input_tensor(kNDOp, inputs, 1));
  KILN_ASSIGN_OR_RETURN(const Tensor* updates, internal::input_tensor(kNDOp, inputs, 2));
  KILN_ASSIGN_OR_RETURN(EValue * out, internal::output_tensor(kNDOp, outputs, 0, data->dtype()));
  KILN_RETURN_IF_ERROR(internal::resize_output(context, kNDOp, *out, data->sizes()));
  return scatter_nd(*data, *indices, *updates, reduction, out->to_tensor());
}

const runtime::KernelRegistration kRegisterScatterElements("ScatterElements",
                                                           scatter_elements_kernel);
const runtime::KernelRegistration kRegisterScatter("Scatter", scatter_kernel);
const runtime::KernelRegistration kRegisterScatterND("ScatterND", scatter_nd_kernel);

// Integer sums and products wrap (two's complement) instead of overflowing.
template <typename C>
C combine(ScatterReduction reduction, C a, C b) {
  if constexpr (std::is_integral_v<C>) {
    using Wide = std::make_unsigned_t<std::conditional_t<(sizeof(C) < 4), int32_t, C>>;
    if (reduction == ScatterReduction::Add) {
      return static_cast<C>(static_cast<Wide>(a) + static_cast<Wide>(b));
    }
    if (reduction == ScatterReduction::Mul) {
      return static_cast<C>(static_cast<Wide>(a) * static_cast<Wide>(b));
    }
  } else {
    if (reduction == ScatterReduction::Add) return a + b;
    if (reduction == ScatterReduction::Mul) return a * b;
  }
  if (reduction == ScatterReduction::Max) return std::max(a, b);
  if (reduction == ScatterReduction::Min) return std::min(a, b);
  return b;
}

// Copies `data` into `out`, then for each (target, source) pair from `visit` sets
// out[target] = combine(out[target], updates[source]), or updates[source] for None.
template <typename Visit>
Status apply_updates(std::string_view op, const Tensor& data, const Tensor& updates,
                     ScatterReduction reduction, Tensor& out, Visit&& visit) {
  if (out.mutable_data() != data.data() && data.nbytes() > 0) {
    std::memcpy(out.mutable_data(), data.data(), data.nbytes());
  }
  if (reduction == ScatterReduction::None) {
    return internal::dispatch_bytes(data.element_size(), [&](auto tag) {
      using U = typename decltype(tag)::type;
      U* target = out.mutable_data_ptr<U>();
      const U* source = updates.data_ptr<U>();
      visit([&](int64_t t, int64_t s) { target[t] = source[s]; });
      return Status();
    });
  }
  return dispatch<DtypeGroup::Numeric>(op, "input 0 (data)", data.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* target = out.mutable_data_ptr<T>();
    const T* source = updates.data_ptr<T>();
    visit([&](int64_t t, int64_t s) {
      target[t] = store<T>(combine(reduction, load(target[t]), load(source[s])));
    });
    return Status();
  });
}

}  // namespace

Result<ScatterReduction> scatter_reduction_from_string(std::string_view name) {
  if (name == "none") return ScatterReduction::None;
  if (name == "add") return ScatterReduction::Add;
  if (name == "mul") return ScatterReduction::Mul;
  if (name == "max") return ScatterReduction::Max;
  if (name == "min") return ScatterReduction::Min;
  return Status(Error::InvalidArgument, "attribute 'reduction' is '" + std::string(name) +
                                            "' (expected none, add, mul, max or min)");
}

Status scatter_elements(const Tensor& data, const Tensor& indices, const Tensor& updates,
                        int64_t axis, ScatterReduction reduction, Tensor& out) {
  constexpr std::string_view kOp = kElementsOp;
  KILN_RETURN_IF_ERROR(check_dtype(kOp, "input 1 (indices)", indices.dtype(), kIndexDtypes));
  KILN_RETURN_IF_ERROR(
      internal::check_same_dtype(kOp, "input 2 (updates)", updates.dtype(), data.dtype()));
  if (reduction != ScatterReduction::None) {
    KILN_RETURN_IF_ERROR(check_dtype(kOp, "input 0 (data)", data.dtype(), kNumericDtypes));
  }
  KILN_ASSIGN_OR_RETURN(axis, internal::normalize_axis(kOp, "attribute 'axis'", axis, data.dim()));
  KILN_RETURN_IF_ERROR(internal::check_contiguous(kOp, "input 0", data));
  KILN_RETURN_IF_ERROR(internal::check_contiguous(kOp, "input 1", indices));
  KILN_RETURN_IF_ERROR(internal::check_contiguous(kOp, "input 2", updates));
  KILN_RETURN_IF_ERROR(internal::check_output(kOp, out, data.dtype(), data.sizes()));
  bool fits = indices.dim() == data.dim();
  for (int64_t d = 0; fits && d < data.dim(); ++d) {
    fits = d == axis || indices.size(d) <= data.size(d);
  }
  if (!fits) {
    return internal::invalid_argument(
        kOp, "input 1 (indices) has shape " + runtime::shape_to_string(indices.sizes()) +
                 " (expected rank " + std::to_string(data.dim()) +
                 " and sizes no larger than those of " + internal::describe_input(0, data.sizes()) +
                 " outside axis " + std::to_string(axis) + ")");
  }
  KILN_RETURN_IF_ERROR(internal::check_shape(kOp, "input 2 (updates)", updates.sizes(),
                                             indices.sizes(), "the shape of input 1 (indices)"));
  const int64_t dim = data.size(axis);
  for (int64_t i = 0; i < indices.numel(); ++i) {
    KILN_RETURN_IF_ERROR(internal::check_index(
        kOp, "input 1 (indices)", internal::index_at(indices, i), i, -dim, dim - 1,
        "for axis " + std::to_string(axis) + " of size " + std::to_string(dim)));
  }
  const auto strides = internal::dense_strides(data.sizes());
  const auto rank = static_cast<size_t>(data.dim());
  return apply_updates(kOp, data, updates, reduction, out, [&](auto&& update) {
    std::vector<int64_t> position(rank, 0);
    for (int64_t i = 0; i < indices.numel(); ++i) {
      int64_t index = internal::index_at(indices, i);
      if (index < 0) index += dim;
      int64_t offset = 0;
      for (size_t d = 0; d < rank; ++d) {
        offset += (static_cast<int64_t>(d) == axis ? index : position[d]) * strides[d];
      }
      update(offset, i);
      for (size_t d = rank; d-- > 0;) {
        if (++position[d] < indices.size(static_cast<int64_t>(d))) break;
        position[d] = 0;
      }
    }
  });
}

Status scatter_nd(const Tensor& data, const Tensor& indices, const Tensor& updates,
                  ScatterReduction reduction, Tensor& out) {
  constexpr std::string_view kOp = kNDOp;
  KILN_RETURN_IF_ERROR(check_dtype(kOp, "input 1 (indices)", indices.dtype(), kIndexDtypes));
  KILN_RETURN_IF_ERROR(
      internal::check_same_dtype(kOp, "input 2 (updates)", updates.dtype(), data.dtype()));
  if (reduction != ScatterReduction::None) {
    KILN_RETURN_IF_ERROR(check_dtype(kOp, "input 0 (data)", data.dtype(), kNumericDtypes));
  }
  KILN_RETURN_IF_ERROR(internal::check_contiguous(kOp, "input 0", data));
  KILN_RETURN_IF_ERROR(internal::check_contiguous(kOp, "input 1", indices));
  KILN_RETURN_IF_ERROR(internal::check_contiguous(kOp, "input 2", updates));
  KILN_RETURN_IF_ERROR(internal::check_output(kOp, out, data.dtype(), data.sizes()));
  if (indices.dim() < 1 || indices.sizes().back() < 1 || indices.sizes().back() > data.dim()) {
    return internal::invalid_argument(
        kOp, "input 1 (indices) has shape " + runtime::shape_to_string(indices.sizes()) +
                 " (expected rank at least 1 and a last dimension 1.." +
                 std::to_string(data.dim()) + ", the rank of input 0 (data))");
  }
  const auto k = static_cast<size_t>(indices.sizes().back());
  std::vector<int64_t> expected(indices.sizes().begin(), indices.sizes().end() - 1);
  expected.insert(expected.end(), data.sizes().begin() + static_cast<ptrdiff_t>(k),
                  data.sizes().end());
  KILN_RETURN_IF_ERROR(internal::check_shape(kOp, "input 2 (updates)", updates.sizes(), expected,
                                             "indices[:-1] + data[" + std::to_string(k) + ":]"));
  for (int64_t i = 0; i < indices.numel(); ++i) {
    const size_t d = static_cast<size_t>(i) % k;
    const int64_t dim = data.size(static_cast<int64_t>(d));
    KILN_RETURN_IF_ERROR(internal::check_index(
        kOp, "input 1 (indices)", internal::index_at(indices, i), i, -dim, dim - 1,
        "for dimension " + std::to_string(d) + " of input 0 (data) of size " +
            std::to_string(dim)));
  }
  const auto strides = internal::dense_strides(data.sizes());
  const int64_t slice = internal::product(data.sizes(), k, data.sizes().size());
  const int64_t tuples = indices.numel() / static_cast<int64_t>(k);
  return apply_updates(kOp, data, updates, reduction, out, [&](auto&& update) {
    for (int64_t t = 0; t < tuples; ++t) {
      int64_t offset = 0;
      for (size_t j = 0; j < k; ++j) {
        int64_t index =
            internal::index_at(indices, t * static_cast<int64_t>(k) + static_cast<int64_t>(j));
        if (index < 0) index += data.size(static_cast<int64_t>(j));
        offset += index * strides[j];
      }
      for (int64_t e = 0; e < slice; ++e) update(offset + e, t * slice + e);
    }
  });
}

}  // namespace kiln::kernels
