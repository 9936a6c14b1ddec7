#pragma once

#include <kiln/runtime/core/result.h>
#include <kiln/runtime/core/span.h>
#include <kiln/runtime/core/status.h>
#include <kiln/runtime/core/tensor.h>

#include <cstdint>
#include <vector>

/// Linear quantization (ONNX QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear) and
/// integer matrix products (MatMulInteger, QLinearMatMul). Part of the typed API that
/// `kernels.h` includes; its conventions hold here.
///
/// Quantized values are u8 or i8. A scale or zero point is per tensor (a scalar, or a 1-D
/// tensor of one element) or per axis (a 1-D tensor with one value per index along `axis`).
/// Rounding is half to even, and results saturate to the quantized type's range.
namespace kiln::kernels {

/// y = saturate(round(x / scale) + zero_point) (QuantizeLinear, opset 10-19 forms). `x` is
/// f32, f64, f16, bf16 or i32; `scale` f32, f64, f16 or bf16; `zero_point` (optional, null:
/// 0) u8 or i8 with `scale`'s shape. `out` has `x`'s shape and the zero point's dtype, or
/// without a zero point u8 or i8 (the adapter picks u8 unless `output_dtype` says i8). `axis` in
/// [-rank, rank) picks the per-axis dimension; it is ignored for per-tensor parameters. nan
/// gives the zero point. Errors: InvalidType for dtypes, InvalidArgument for a bad axis or a
/// scale/zero point whose shape fits neither form.
runtime::Status quantize_linear(const runtime::Tensor& x, const runtime::Tensor& scale,
                                const runtime::Tensor* zero_point, int64_t axis,
                                runtime::Tensor& out);

/// y = (x - zero_point) * scale (DequantizeLinear, opset 10-19 forms). `x` is u8, i8 or i32
/// (i32 takes no zero point, or a zero one); `zero_point` (optional) has `x`'s dtype and
/// `scale`'s shape; `out` has `x`'s shape and `scale`'s dtype (f32, f64, f16 or bf16).
/// Errors as `quantize_linear`.
runtime::Status dequantize_linear(const runtime::Tensor& x, const runtime::Tensor& scale,
                                  const runtime::Tensor* zero_point, int64_t axis,
                                  runtime::Tensor& out);

/// DynamicQuantizeLinear of f32 `x`: the range [min(0, min x), max(0, max x)] maps onto
/// [0, 255]; `y_scale` (f32, shape []) = range / 255 (1 for an all-zero input), `y_zero_point`
/// (u8, shape []) = saturate(round(-min / scale)), and `y` (u8, `x`'s shape) is `x` quantized
/// with them. Errors: InvalidType for dtypes, InvalidArgument for output shapes.
runtime::Status dynamic_quantize_linear(const runtime::Tensor& x, runtime::Tensor& y,
                                        runtime::Tensor& y_scale, runtime::Tensor& y_zero_point);

/// out = (a - a_zero_point) x (b - b_zero_point) as numpy matmul (MatMulInteger), exactly, in
/// i32 (wrapping on overflow). `a` and `b` are u8 or i8; a zero point (optional, null: 0) has
/// its operand's dtype and is per tensor, or for a 2-D operand 1-D per row of `a` ([M]) or per
/// column of `b` ([N]). `out` has shape `matmul_shape(a, b)`. Errors: InvalidType for dtypes,
/// InvalidArgument for shapes, NotSupported for other zero-point shapes.
runtime::Status matmul_integer(const runtime::Tensor& a, const runtime::Tensor& b,
                               const runtime::Tensor* a_zero_point,
                               const runtime::Tensor* b_zero_point, runtime::Tensor& out);

/// The eight inputs of QLinearMatMul, in ONNX order.
struct QLinearMatMulInputs {
  const runtime::Tensor* a = nullptr;
  const runtime::Tensor* a_scale = nullptr;
  const runtime::Tensor* a_zero_point = nullptr;
  const runtime::Tensor* b = nullptr;
  const runtime::Tensor* b_scale = nullptr;
  const runtime::Tensor* b_zero_point = nullptr;
  const runtime::Tensor* y_scale = nullptr;
  const runtime::Tensor* y_zero_point = nullptr;
};

/// y = saturate(round((a - a_zp) x (b - b_zp) * a_scale * b_scale / y_scale) + y_zp)
/// (QLinearMatMul): the integer product as `matmul_integer`, then requantized in double.
/// Scales are f32 (or f64, f16, bf16); `a_scale`/`a_zero_point` are per tensor or per row of
/// a 2-D `a`, `b_scale`/`b_zero_point` per tensor or per column of a 2-D `b`, `y_scale` and
/// `y_zero_point` per tensor. `out` has shape `matmul_shape(a, b)` and `y_zero_point`'s dtype
/// (u8 or i8). Errors as `matmul_integer`.
runtime::Status qlinear_matmul(const QLinearMatMulInputs& inputs, runtime::Tensor& out);

}  // namespace kiln::kernels
