#pragma once

#include <kiln/runtime/core/status.h>
#include <kiln/runtime/core/tensor.h>

#include <string_view>

/// Element-wise unary operators (ONNX semantics). Part of the typed API that `kernels.h`
/// includes; the conventions written there hold here: `out` has `x`'s shape and dtype, may be
/// `x` itself, and the functions return InvalidType for a dtype outside the list given.
/// f16 and bf16 are computed in f32 and rounded once on store.
namespace kiln::kernels {

// ---- Unary math: f32, f64, f16, bf16 (Abs, Neg and Sign also i32, i64) ------------------------

/// |x|. Integers wrap: |INT_MIN| is INT_MIN.
runtime::Status abs(const runtime::Tensor& x, runtime::Tensor& out);
/// -x. Integers wrap: -INT_MIN is INT_MIN.
runtime::Status neg(const runtime::Tensor& x, runtime::Tensor& out);
/// -1, 0 or 1 by the sign of x (nan stays nan).
runtime::Status sign(const runtime::Tensor& x, runtime::Tensor& out);
/// e^x.
runtime::Status exp(const runtime::Tensor& x, runtime::Tensor& out);
/// Natural logarithm (IEEE: log(0) = -inf, log(x < 0) = nan).
runtime::Status log(const runtime::Tensor& x, runtime::Tensor& out);
/// Square root (nan for x < 0).
runtime::Status sqrt(const runtime::Tensor& x, runtime::Tensor& out);
/// 1 / x (IEEE: 1 / 0 = inf).
runtime::Status reciprocal(const runtime::Tensor& x, runtime::Tensor& out);
/// Rounds toward -inf.
runtime::Status floor(const runtime::Tensor& x, runtime::Tensor& out);
/// Rounds toward +inf.
runtime::Status ceil(const runtime::Tensor& x, runtime::Tensor& out);
/// Rounds to the nearest integer, halves to even (2.5 -> 2, -1.5 -> -2), as ONNX Round.
runtime::Status round(const runtime::Tensor& x, runtime::Tensor& out);
/// sin(x), x in radians.
runtime::Status sin(const runtime::Tensor& x, runtime::Tensor& out);
/// cos(x), x in radians.
runtime::Status cos(const runtime::Tensor& x, runtime::Tensor& out);
/// The Gauss error function.
runtime::Status erf(const runtime::Tensor& x, runtime::Tensor& out);
/// log(1 + e^x), computed without overflow for large x.
runtime::Status softplus(const runtime::Tensor& x, runtime::Tensor& out);
/// x * max(0, min(1, x / 6 + 1 / 2)).
runtime::Status hard_swish(const runtime::Tensor& x, runtime::Tensor& out);
/// Logical not of a bool tensor (ONNX Not); `out` is bool.
runtime::Status logical_not(const runtime::Tensor& x, runtime::Tensor& out);

// ---- Activations with attributes: f32, f64, f16, bf16 -----------------------------------------

/// x for x >= 0, alpha * (e^x - 1) below (ONNX Elu; attribute `alpha`, default 1).
runtime::Status elu(const runtime::Tensor& x, double alpha, runtime::Tensor& out);
/// gamma * x for x > 0, gamma * alpha * (e^x - 1) otherwise (ONNX Selu; defaults
/// alpha = 1.67326319217681884765625, gamma = 1.05070102214813232421875).
runtime::Status selu(const runtime::Tensor& x, double alpha, double gamma, runtime::Tensor& out);
/// x for x >= 0, alpha * x below (ONNX LeakyRelu; default alpha 0.01).
runtime::Status leaky_relu(const runtime::Tensor& x, double alpha, runtime::Tensor& out);
/// x for x > alpha, else 0 (ONNX ThresholdedRelu; default alpha 1).
runtime::Status thresholded_relu(const runtime::Tensor& x, double alpha, runtime::Tensor& out);
/// max(0, min(1, alpha * x + beta)) (ONNX HardSigmoid; defaults alpha 0.2, beta 0.5).
runtime::Status hard_sigmoid(const runtime::Tensor& x, double alpha, double beta,
                             runtime::Tensor& out);
/// The approximations of ONNX Gelu's `approximate` attribute.
enum class GeluApproximation {
  None,  ///< "none": x / 2 * (1 + erf(x / sqrt(2))).
  Tanh,  ///< "tanh": x / 2 * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 x^3))).
};
/// Gaussian error linear unit (ONNX Gelu, opset 20).
runtime::Status gelu(const runtime::Tensor& x, GeluApproximation approximation,
                     runtime::Tensor& out);

}  // namespace kiln::kernels
