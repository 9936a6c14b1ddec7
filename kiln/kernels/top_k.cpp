#include <kiln/kernels/kernels.h>
#include <kiln/kernels/layout.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <type_traits>
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

constexpr std::string_view kOp = "TopK";

// Opset 10+ passes k as input 1 (a 1-element i64 tensor); opset 1 as attribute `k`.
Result<int64_t> read_k(Span<EValue* const> inputs, const runtime::Attributes& attributes) {
  if (internal::is_absent(inputs, 1)) {
    if (!attributes.has("k")) {
      return internal::invalid_argument(kOp,
                                        "input 1 (K) and attribute 'k' are both missing "
                                        "(expected one of them)");
    }
    return internal::int_attribute(kOp, attributes, "k", 0);
  }
  KILN_ASSIGN_OR_RETURN(auto k, internal::read_int_list(kOp, inputs, 1, "K"));
  if (k.size() != 1) {
    return internal::invalid_argument(
        kOp, "input 1 (K) has " + std::to_string(k.size()) + " elements (expected 1)");
  }
  return k[0];
}

Status top_k_kernel(runtime::KernelContext& context, Span<EValue* const> inputs,
                    Span<EValue* const> outputs, const runtime::Attributes& attributes) {
  KILN_RETURN_IF_ERROR(internal::check_arity(kOp, inputs, outputs, 1, 2, 2));
  TopKOptions options;
  KILN_ASSIGN_OR_RETURN(options.axis, internal::int_attribute(kOp, attributes, "axis", -1));
  KILN_ASSIGN_OR_RETURN(int64_t largest, internal::int_attribute(kOp, attributes, "largest", 1));
  KILN_ASSIGN_OR_RETURN(int64_t sorted, internal::int_attribute(kOp, attributes, "sorted", 1));
  options.largest = largest != 0;
  options.sorted = sorted != 0;
  KILN_ASSIGN_OR_RETURN(int64_t k, read_k(inputs, attributes));
  KILN_ASSIGN_OR_RETURN(const Tensor* x, internal::input_tensor(kOp, inputs, 0));
  KILN_RETURN_IF_ERROR(check_dtype(kOp, "input 0", x->dtype(), kNumericDtypes));
  auto shape = top_k_shape(x->sizes(), k, options.axis);
  if (!shape.ok()) return shape.status().with_context(internal::action(kOp));
  KILN_ASSIGN_OR_RETURN(EValue * values, internal::output_tensor(kOp, outputs, 0, x->dtype()));
  KILN_ASSIGN_OR_RETURN(EValue * indices,
                        internal::output_tensor_of_dtype(kOp, outputs, 1, ScalarType::Int64));
  KILN_RETURN_IF_ERROR(internal::resize_output(context, kOp, *values, *shape));
  KILN_RETURN_IF_ERROR(internal::resize_output(context, kOp, *indices, *shape));
  return top_k(*x, k, options, values->to_tensor(), indices->to_tensor());
}

const runtime::KernelRegistration kRegisterTopK("TopK", top_k_kernel);

// True when `a` ranks before `b`: larger first (or smaller, without `largest`), nan counting
// as larger than every number. Ties are left to the stable sort, which keeps index order.
template <typename C>
bool ranks_before(C a, C b, bool largest) {
  if constexpr (std::is_floating_point_v<C>) {
    if (std::isnan(a) || std::isnan(b)) {
      return largest ? std::isnan(a) && !std::isnan(b) : std::isnan(b) && !std::isnan(a);
    }
  }
  return largest ? a > b : a < b;
}

}  // namespace

Result<std::vector<int64_t>> top_k_shape(Span<const int64_t> x, int64_t k, int64_t axis) {
  const auto rank = static_cast<int64_t>(x.size());
  if (rank == 0 || axis < -rank || axis >= rank) {
    return Status(Error::InvalidArgument, "attribute 'axis' is " + std::to_string(axis) +
                                              " (expected " + std::to_string(-rank) + ".." +
                                              std::to_string(rank - 1) + " for input 0 of rank " +
                                              std::to_string(rank) + ")");
  }
  if (axis < 0) axis += rank;
  if (k < 0 || k > x[static_cast<size_t>(axis)]) {
    return Status(Error::InvalidArgument, "k is " + std::to_string(k) + " (expected 0.." +
                                              std::to_string(x[static_cast<size_t>(axis)]) +
                                              ", the size of axis " + std::to_string(axis) +
                                              " of input 0 " + runtime::shape_to_string(x) + ")");
  }
  std::vector<int64_t> shape(x.begin(), x.end());
  shape[static_cast<size_t>(axis)] = k;
  return shape;
}

Status top_k(const Tensor& x, int64_t k, const TopKOptions& options, Tensor& values,
             Tensor& indices) {
  KILN_RETURN_IF_ERROR(check_dtype(kOp, "input 0", x.dtype(), kNumericDtypes));
  auto shape = top_k_shape(x.sizes(), k, options.axis);
  if (!shape.ok()) return shape.status().with_context(internal::action(kOp));
  KILN_RETURN_IF_ERROR(internal::check_contiguous(kOp, "input 0", x));
  KILN_RETURN_IF_ERROR(internal::check_output(kOp, values, x.dtype(), *shape));
  KILN_RETURN_IF_ERROR(
      internal::check_same_dtype(kOp, "output 1 (Indices)", indices.dtype(), ScalarType::Int64));
  KILN_RETURN_IF_ERROR(internal::check_contiguous(kOp, "output 1 (Indices)", indices));
  KILN_RETURN_IF_ERROR(internal::check_output_shape(kOp, indices, *shape));
  const int64_t axis = options.axis < 0 ? options.axis + x.dim() : options.axis;
  const int64_t n = x.size(axis);
  int64_t inner = 1;
  for (int64_t d = axis + 1; d < x.dim(); ++d) inner *= x.size(d);
  const int64_t outer = n * inner == 0 ? 0 : x.numel() / (n * inner);
  return dispatch<DtypeGroup::Numeric>(kOp, "input 0", x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = ComputeType<T>;
    const T* in = x.data_ptr<T>();
    T* top = values.mutable_data_ptr<T>();
    int64_t* where = indices.mutable_data_ptr<int64_t>();
    std::vector<int64_t> order(static_cast<size_t>(n));
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t i = 0; i < inner; ++i) {
        const T* line = in + o * n * inner + i;
        std::iota(order.begin(), order.end(), int64_t{0});
        std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
          return ranks_before<C>(load(line[a * inner]), load(line[b * inner]), options.largest);
        });
        for (int64_t j = 0; j < k; ++j) {
          const int64_t at = (o * k + j) * inner + i;
          top[at] = line[order[static_cast<size_t>(j)] * inner];
          where[at] = order[static_cast<size_t>(j)];
        }
      }
    }
    return Status();
  });
}

}  // namespace kiln::kernels
