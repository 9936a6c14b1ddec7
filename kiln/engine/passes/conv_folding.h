#pragma once

#include <kiln/engine/passes/rewrite_context.h>

#include <cstddef>

namespace kiln::engine::passes {

/// A `Conv(x, W[, b])` or `ConvTranspose(x, W[, b])` (node `n`) whose output goes through
/// per-output-channel affine steps, each value read by the next step alone:
/// - an inference `BatchNormalization` (constant scale, B, mean and variance of one element per
///   output channel): y = (y - mean) * s + B with s = scale / sqrt(var + epsilon);
/// - a `Mul` or `Div` by, an `Add` of, or a `Sub` (y first) of a constant that broadcasts along
///   the channel axis only (one value, or one per output channel: [M, 1, 1], [1, M, 1, 1], ...)
/// has those steps folded into its weights and bias, computed in double:
///   y = a[m] * Conv(x) + d[m]  →  W'[m] = W[m] * a[m]; b'[m] = b[m] * a[m] + d[m]
/// (a ConvTranspose's W [C, M / group, k...] scales column j of input channel c by
/// a[(c / (C / group)) * (M / group) + j]),
/// and writes the last step's output. W, b and every constant must be f32; each factor finite
/// (a division by zero, a negative variance: the chain stops before that step). The chain
/// stops at the first node that is none of these. Returns true when a step was folded.
bool fold_conv_affine(RewriteContext& c, size_t n);

/// A `Mul` (node `n`) of a value x by, or a `Div` of x by, a constant that broadcasts along the
/// channel axis only (one value, or one per input channel), read by a `Conv` alone as its X:
/// the scale is folded into W, computed in double, and the Conv reads x:
///   Conv(x * s, W)  →  Conv(x, W') with W'[m][j] = W[m][j] * s[(m / (M / group)) * (C / group) + j]
/// Exact but for rounding whatever the padding, since the zeros a Conv pads with scale to zeros
/// (an Add would not: it is left as written). An input normalization (x / 255) before a first
/// Conv is the common case. W and the constant must be f32, each factor finite. Returns true
/// when it folded.
bool fold_conv_input_scale(RewriteContext& c, size_t n);

}  // namespace kiln::engine::passes
