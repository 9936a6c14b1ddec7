#pragma once

// The loops behind the element-wise ops: each op's .cpp supplies a functor and gets its typed
// function and adapter from these templates. Internal to kiln/kernels.

#include <kiln/kernels/adapter.h>
#include <kiln/kernels/broadcast.h>
#include <kiln/kernels/dispatch.h>

#include <array>
#include <cstdint>
#include <string_view>
#include <type_traits>

namespace kiln::kernels::internal {

/// Applies `fn` to integers as unsigned values and converts back, so overflow wraps (two's
/// complement) instead of being undefined behaviour.
template <typename T, typename Fn>
T wrapping(T a, T b, Fn fn) {
  // At least `unsigned`, so that i8 and i16 operands are not promoted to (overflowing) int.
  using U = std::common_type_t<std::make_unsigned_t<T>, unsigned>;
  return static_cast<T>(fn(static_cast<U>(a), static_cast<U>(b)));
}

/// out = fn(x) element by element; `Fn` has `template <typename T> T operator()(T) const` on
/// storage types (it loads and stores itself). `out` may be `x`.
template <DtypeGroup Group, typename Fn>
runtime::Status unary_elementwise(std::string_view op, const runtime::Tensor& x,
                                  runtime::Tensor& out, Fn fn) {
  KILN_RETURN_IF_ERROR(check_contiguous(op, "input 0", x));
  KILN_RETURN_IF_ERROR(check_output(op, out, x.dtype(), x.sizes()));
  return dispatch<Group>(op, "input 0", x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* in = x.data_ptr<T>();
    T* result = out.mutable_data_ptr<T>();
    const int64_t n = x.numel();
    for (int64_t i = 0; i < n; ++i) result[i] = fn(in[i]);
    return runtime::Status();
  });
}

/// The row loop of a broadcast binary op, specialized for the common stride patterns so the
/// compiler can vectorize same-shape and scalar-operand rows.
template <typename T, typename R, typename Fn>
void binary_rows(const T* a, const T* b, R* out, const BroadcastLoop<2>& loop, Fn fn) {
  for_each_broadcast_row(loop, [&](int64_t out_offset, std::array<int64_t, 2> in, int64_t count,
                                   std::array<int64_t, 2> stride) {
    const T* pa = a + in[0];
    const T* pb = b + in[1];
    R* po = out + out_offset;
    if (stride[0] == 1 && stride[1] == 1) {
      for (int64_t i = 0; i < count; ++i) po[i] = fn(pa[i], pb[i]);
    } else if (stride[0] == 1 && stride[1] == 0) {
      const T vb = pb[0];
      for (int64_t i = 0; i < count; ++i) po[i] = fn(pa[i], vb);
    } else if (stride[0] == 0 && stride[1] == 1) {
      const T va = pa[0];
      for (int64_t i = 0; i < count; ++i) po[i] = fn(va, pb[i]);
    } else {
      for (int64_t i = 0; i < count; ++i) po[i] = fn(pa[i * stride[0]], pb[i * stride[1]]);
    }
  });
}

/// out = fn(a, b) with numpy broadcasting, for dtypes f32, f64, f16, bf16, i8, u8, i16, i32,
/// i64. `Fn` has
/// `template <typename T> T operator()(T, T) const` on storage types. `Check` is called as
/// `check(TypeTag<T>{}, const T* b, int64_t numel_b)` before anything is written and returns
/// a Status (Div rejects integer zeros there).
template <typename Fn, typename Check>
runtime::Status binary_elementwise(std::string_view op, const runtime::Tensor& a,
                                   const runtime::Tensor& b, runtime::Tensor& out, Fn fn,
                                   Check check) {
  KILN_RETURN_IF_ERROR(check_dtype(op, "input 0", a.dtype(), kNumericDtypes));
  KILN_RETURN_IF_ERROR(check_same_dtype(op, "input 1", b.dtype(), a.dtype()));
  KILN_RETURN_IF_ERROR(check_contiguous(op, "input 0", a));
  KILN_RETURN_IF_ERROR(check_contiguous(op, "input 1", b));
  auto shape = broadcast_shape(a.sizes(), b.sizes());
  if (!shape.ok()) return shape.status().with_context(action(op));
  KILN_RETURN_IF_ERROR(check_output(op, out, a.dtype(), *shape));
  const auto loop = make_broadcast_loop<2>(
      *shape, {broadcast_strides(a.sizes(), *shape), broadcast_strides(b.sizes(), *shape)});
  if (loop.numel == 0) return runtime::Status();
  return dispatch<DtypeGroup::Numeric>(op, "input 0", a.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    KILN_RETURN_IF_ERROR(check(tag, b.data_ptr<T>(), b.numel()));
    binary_rows(a.data_ptr<T>(), b.data_ptr<T>(), out.mutable_data_ptr<T>(), loop, fn);
    return runtime::Status();
  });
}

/// out = fn(a, b) with numpy broadcasting, where `a` and `b` share a dtype of `Group` and `out`
/// has dtype `out_dtype`. `Fn` has `template <typename T> R operator()(T, T) const` on storage
/// types, `R` being the storage type of `out_dtype` (`T` itself, or `bool` for comparisons).
template <DtypeGroup Group, typename Fn>
runtime::Status binary_map(std::string_view op, const runtime::Tensor& a, const runtime::Tensor& b,
                           runtime::Tensor& out, runtime::ScalarType out_dtype, Fn fn) {
  KILN_RETURN_IF_ERROR(check_dtype(op, "input 0", a.dtype(), dtypes_of(Group)));
  KILN_RETURN_IF_ERROR(check_same_dtype(op, "input 1", b.dtype(), a.dtype()));
  KILN_RETURN_IF_ERROR(check_contiguous(op, "input 0", a));
  KILN_RETURN_IF_ERROR(check_contiguous(op, "input 1", b));
  auto shape = broadcast_shape(a.sizes(), b.sizes());
  if (!shape.ok()) return shape.status().with_context(action(op));
  KILN_RETURN_IF_ERROR(check_output(op, out, out_dtype, *shape));
  const auto loop = make_broadcast_loop<2>(
      *shape, {broadcast_strides(a.sizes(), *shape), broadcast_strides(b.sizes(), *shape)});
  if (loop.numel == 0) return runtime::Status();
  return dispatch<Group>(op, "input 0", a.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    using R = decltype(fn(T{}, T{}));
    binary_rows(a.data_ptr<T>(), b.data_ptr<T>(), out.mutable_data_ptr<R>(), loop, fn);
    return runtime::Status();
  });
}

/// An op with two broadcast tensor inputs of one dtype and one output.
struct BinaryOp {
  std::string_view name;                            ///< ONNX op type, e.g. "Equal".
  runtime::Span<const runtime::ScalarType> dtypes;  ///< Accepted dtypes of input 0.
  bool bool_output;  ///< The output is bool (comparisons); otherwise input 0's dtype.
  runtime::Status (*typed)(const runtime::Tensor&, const runtime::Tensor&, runtime::Tensor&);
};

/// The checked operands of a binary op, output 0 already resized.
struct BinaryArgs {
  const runtime::Tensor* a = nullptr;
  const runtime::Tensor* b = nullptr;
  runtime::Tensor* out = nullptr;
};

/// Checks arity, tags and dtypes as `op` declares (`typed` is not called) and resizes output 0
/// to the broadcast shape: for adapters whose typed function takes attributes too.
runtime::Result<BinaryArgs> prepare_binary(const BinaryOp& op, runtime::KernelContext& context,
                                           runtime::Span<runtime::EValue* const> inputs,
                                           runtime::Span<runtime::EValue* const> outputs);

/// The adapter of a `BinaryOp`: `prepare_binary`, then the typed function.
runtime::Status run_binary_op_kernel(const BinaryOp& op, runtime::KernelContext& context,
                                     runtime::Span<runtime::EValue* const> inputs,
                                     runtime::Span<runtime::EValue* const> outputs);

/// A `Check` for `binary_elementwise` that accepts everything.
struct NoCheck {
  template <typename Tag>
  runtime::Status operator()(Tag, const void*, int64_t) const {
    return runtime::Status();
  }
};

/// The adapter of a binary broadcast op: checks arity, tags and dtypes, resizes output 0 to
/// the broadcast shape and calls `typed`.
runtime::Status run_binary_kernel(
    std::string_view op, runtime::KernelContext& context,
    runtime::Span<runtime::EValue* const> inputs, runtime::Span<runtime::EValue* const> outputs,
    runtime::Status (*typed)(const runtime::Tensor&, const runtime::Tensor&, runtime::Tensor&));

}  // namespace kiln::kernels::internal
