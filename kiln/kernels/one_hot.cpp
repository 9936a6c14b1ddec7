#include <kiln/kernels/index_ops.h>
#include <kiln/kernels/index_util.h>
#include <kiln/kernels/layout.h>

#include <cmath>
#include <limits>
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

constexpr std::string_view kOp = "OneHot";

Status one_hot_kernel(runtime::KernelContext& context, Span<EValue* const> inputs,
                      Span<EValue* const> outputs, const runtime::Attributes& attributes) {
  KILN_RETURN_IF_ERROR(internal::check_arity(kOp, inputs, outputs, 3, 3, 1));
  KILN_ASSIGN_OR_RETURN(int64_t axis, internal::int_attribute(kOp, attributes, "axis", -1));
  KILN_ASSIGN_OR_RETURN(const Tensor* indices, internal::input_tensor(kOp, inputs, 0));
  KILN_ASSIGN_OR_RETURN(const Tensor* depth_tensor, internal::input_tensor(kOp, inputs, 1));
  KILN_ASSIGN_OR_RETURN(const Tensor* values, internal::input_tensor(kOp, inputs, 2));
  KILN_RETURN_IF_ERROR(check_dtype(kOp, "input 0 (indices)", indices->dtype(), kNumericDtypes));
  auto depth = one_hot_depth(*depth_tensor);
  if (!depth.ok()) return depth.status().with_context(internal::action(kOp));
  auto shape = one_hot_shape(indices->sizes(), *depth, axis);
  if (!shape.ok()) return shape.status().with_context(internal::action(kOp));
  KILN_ASSIGN_OR_RETURN(EValue * out,
                        internal::output_tensor_of_dtype(kOp, outputs, 0, values->dtype()));
  KILN_RETURN_IF_ERROR(internal::resize_output(context, kOp, *out, *shape));
  return one_hot(*indices, *depth, *values, axis, out->to_tensor());
}

const runtime::KernelRegistration kRegisterOneHot("OneHot", one_hot_kernel);

// A numeric element as int64, truncating floats; nan, infinities and floats beyond the int64
// range map to int64 min, which no depth accepts.
template <typename T>
int64_t truncate_to_int64(T stored) {
  const auto value = load(stored);
  if constexpr (std::is_floating_point_v<decltype(value)>) {
    if (!(std::abs(value) < 9.2e18)) return std::numeric_limits<int64_t>::min();
  }
  return static_cast<int64_t>(value);
}

Result<std::vector<int64_t>> numeric_as_int64(const Tensor& tensor, std::string_view subject) {
  std::vector<int64_t> out(static_cast<size_t>(tensor.numel()));
  Status status = dispatch<DtypeGroup::Numeric>(kOp, subject, tensor.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* data = tensor.data_ptr<T>();
    for (size_t i = 0; i < out.size(); ++i) out[i] = truncate_to_int64(data[i]);
    return Status();
  });
  if (!status.ok()) return status;
  return out;
}

}  // namespace

Result<int64_t> one_hot_depth(const Tensor& depth) {
  if (depth.numel() != 1) {
    return Status(Error::InvalidArgument, "input 1 (depth) has shape " +
                                              runtime::shape_to_string(depth.sizes()) +
                                              " (expected one element)");
  }
  auto value = numeric_as_int64(depth, "input 1 (depth)");
  if (!value.ok()) return value.status();
  if ((*value)[0] < 1) {
    return Status(Error::InvalidArgument,
                  "input 1 (depth) is " + std::to_string((*value)[0]) + " (expected at least 1)");
  }
  return (*value)[0];
}

Result<std::vector<int64_t>> one_hot_shape(Span<const int64_t> indices, int64_t depth,
                                           int64_t axis) {
  const auto rank = static_cast<int64_t>(indices.size()) + 1;
  if (axis < -rank || axis >= rank) {
    return Status(Error::InvalidArgument, "attribute 'axis' is " + std::to_string(axis) +
                                              " (expected " + std::to_string(-rank) + ".." +
                                              std::to_string(rank - 1) + " for an output of rank " +
                                              std::to_string(rank) + ")");
  }
  if (axis < 0) axis += rank;
  std::vector<int64_t> shape(indices.begin(), indices.end());
  shape.insert(shape.begin() + axis, depth);
  return shape;
}

Status one_hot(const Tensor& indices, int64_t depth, const Tensor& values, int64_t axis,
               Tensor& out) {
  KILN_RETURN_IF_ERROR(check_dtype(kOp, "input 0 (indices)", indices.dtype(), kNumericDtypes));
  auto shape = one_hot_shape(indices.sizes(), depth, axis);
  if (!shape.ok()) return shape.status().with_context(internal::action(kOp));
  if (axis < 0) axis += indices.dim() + 1;
  if (values.numel() != 2) {
    return internal::invalid_argument(kOp, "input 2 (values) has shape " +
                                               runtime::shape_to_string(values.sizes()) +
                                               " (expected two elements: off, on)");
  }
  KILN_RETURN_IF_ERROR(internal::check_contiguous(kOp, "input 0", indices));
  KILN_RETURN_IF_ERROR(internal::check_contiguous(kOp, "input 2", values));
  KILN_RETURN_IF_ERROR(internal::check_output(kOp, out, values.dtype(), *shape));
  KILN_ASSIGN_OR_RETURN(auto index_values, numeric_as_int64(indices, "input 0 (indices)"));
  const int64_t outer = internal::product(indices.sizes(), 0, static_cast<size_t>(axis));
  const int64_t inner =
      internal::product(indices.sizes(), static_cast<size_t>(axis), indices.sizes().size());
  return internal::dispatch_bytes(values.element_size(), [&](auto tag) {
    using U = typename decltype(tag)::type;
    const U off = values.data_ptr<U>()[0];
    const U on = values.data_ptr<U>()[1];
    U* target = out.mutable_data_ptr<U>();
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t d = 0; d < depth; ++d) {
        for (int64_t i = 0; i < inner; ++i) {
          int64_t index = index_values[static_cast<size_t>(o * inner + i)];
          if (index < 0 && index >= -depth) index += depth;
          *target++ = index == d ? on : off;
        }
      }
    }
    return Status();
  });
}

}  // namespace kiln::kernels
