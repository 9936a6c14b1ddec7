#pragma once

#include <kiln/runtime/core/result.h>
#include <kiln/runtime/core/span.h>
#include <kiln/runtime/core/status.h>
#include <kiln/runtime/core/tensor.h>

#include <cstdint>
#include <vector>

/// Element-wise binary, comparison, logical and variadic operators with numpy broadcasting
/// (ONNX "multidirectional broadcasting"), plus Where, PRelu and Clip. Part of the typed API
/// that `kernels.h` includes; its conventions hold here. `out` has the broadcast shape of the
/// inputs (`broadcast_shape`) and must not overlap an input, except that the element-wise ops
/// may write into input 0 when it already has the output shape.
namespace kiln::kernels {

// ---- Arithmetic: output dtype = input 0's ------------------------------------------------------

/// out = a ^ b (ONNX Pow); f32, f64, f16, bf16, i8, u8, i16, i32, i64. Operands of one dtype, or
/// (ONNX's T and T1) a base and an exponent each of f32, f64, f16, bf16, i32, i64. Integer powers
/// of one dtype are exact and wrap on overflow; a negative integer exponent gives the truncated
/// quotient (0 unless |a| = 1). An integer base with a float exponent is computed in double,
/// then truncated and saturated.
runtime::Status pow(const runtime::Tensor& a, const runtime::Tensor& b, runtime::Tensor& out);
/// out = a mod b (ONNX Mod); f32, f64, f16, bf16, i8, u8, i16, i32, i64. With `fmod` the result
/// takes the sign of a (C fmod); without it the sign of b (Python %). An integer divisor of 0 gives
/// InvalidArgument naming the element.
runtime::Status mod(const runtime::Tensor& a, const runtime::Tensor& b, bool fmod,
                    runtime::Tensor& out);
/// out = x < 0 ? slope * x : x (ONNX PRelu); f32, f64, f16, bf16, i32, i64; `slope` broadcasts to
/// `x` (unidirectionally) and `out` has `x`'s shape. Errors: InvalidArgument naming both shapes
/// when it does not.
runtime::Status prelu(const runtime::Tensor& x, const runtime::Tensor& slope, runtime::Tensor& out);

// ---- Comparisons and logic: output bool -------------------------------------------------------

/// out = (a == b); any dtype (f32, f64, f16, bf16, i8, u8, i16, i32, i64, bool).
runtime::Status equal(const runtime::Tensor& a, const runtime::Tensor& b, runtime::Tensor& out);
/// out = (a > b); every dtype but bool. As for the rest: nan compares false.
runtime::Status greater(const runtime::Tensor& a, const runtime::Tensor& b, runtime::Tensor& out);
/// out = (a < b).
runtime::Status less(const runtime::Tensor& a, const runtime::Tensor& b, runtime::Tensor& out);
/// out = (a >= b).
runtime::Status greater_or_equal(const runtime::Tensor& a, const runtime::Tensor& b,
                                 runtime::Tensor& out);
/// out = (a <= b).
runtime::Status less_or_equal(const runtime::Tensor& a, const runtime::Tensor& b,
                              runtime::Tensor& out);
/// out = a && b; bool inputs (ONNX And).
runtime::Status logical_and(const runtime::Tensor& a, const runtime::Tensor& b,
                            runtime::Tensor& out);
/// out = a || b (ONNX Or).
runtime::Status logical_or(const runtime::Tensor& a, const runtime::Tensor& b,
                           runtime::Tensor& out);
/// out = a != b (ONNX Xor).
runtime::Status logical_xor(const runtime::Tensor& a, const runtime::Tensor& b,
                            runtime::Tensor& out);

// ---- Variadic: one or more inputs of one dtype -----------------------------------------------

/// The shape all of `inputs` broadcast to. Errors as `broadcast_shape`.
runtime::Result<std::vector<int64_t>> broadcast_shapes(
    runtime::Span<const runtime::Tensor* const> inputs);
/// Element-wise maximum over `inputs` (ONNX Max); f32, f64, f16, bf16, i8, u8, i16, i32, i64.
/// A nan in any input gives nan. `out` must not overlap any input but input 0.
runtime::Status maximum(runtime::Span<const runtime::Tensor* const> inputs, runtime::Tensor& out);
/// Element-wise minimum (ONNX Min); as `maximum`.
runtime::Status minimum(runtime::Span<const runtime::Tensor* const> inputs, runtime::Tensor& out);
/// Element-wise sum (ONNX Sum); f32, f64, f16, bf16, i32, i64 (integers wrap).
runtime::Status sum(runtime::Span<const runtime::Tensor* const> inputs, runtime::Tensor& out);
/// Element-wise mean (ONNX Mean); f32, f64, f16, bf16.
runtime::Status mean(runtime::Span<const runtime::Tensor* const> inputs, runtime::Tensor& out);

// ---- Where and Clip -------------------------------------------------------------------------

/// out = condition ? x : y with three-way broadcasting (ONNX Where). `condition` is bool; `x`
/// and `y` share any dtype, which is `out`'s.
runtime::Status where(const runtime::Tensor& condition, const runtime::Tensor& x,
                      const runtime::Tensor& y, runtime::Tensor& out);
/// out = min(max(x, lo), hi) (ONNX Clip); f32, f64, f16, bf16, i8, u8, i16, i32, i64. `min` and
/// `max` are optional (null: no bound) one-element tensors of `x`'s dtype, or of f64 (the opset 6
/// attribute form, converted to `x`'s dtype). When min > max every element becomes max, as
/// ONNX specifies; nan stays nan.
runtime::Status clip(const runtime::Tensor& x, const runtime::Tensor* min,
                     const runtime::Tensor* max, runtime::Tensor& out);

}  // namespace kiln::kernels
