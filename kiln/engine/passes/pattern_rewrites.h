#pragma once

#include <kiln/engine/ir/graph.h>

#include <cstddef>

namespace kiln::engine::passes {

/// Rewrites decomposed patterns of a graph's top-level nodes into the ops they spell, so the
/// engine can run (and fuse) them as one:
/// - GELU (erf form) as exporters write it: `x * 0.5 * (1 + erf(x / sqrt(2)))` with the two
///   multiplications in either order, or `x * (1 / sqrt(2))` inside the erf → `Gelu(x)`;
/// - a division by a constant float scalar → a multiplication by its reciprocal (within an ulp;
///   oneDNN runs Mul, and fuses it);
/// - `Pow(x, 2)` with f32 `x` and the exponent a constant f32 scalar exactly 2 → `Mul(x, x)`
///   (exact; no powf per element);
/// - layer normalization decomposed into ReduceMean, Sub, Pow, Sqrt, Div... →
///   `LayerNormalization`, and RMS normalization (Pow, ReduceMean, Sqrt, Reciprocal, Mul...) →
///   `RMSNormalization`, and PyTorch's GroupNorm export (Reshape, InstanceNormalization,
///   Reshape, Mul, Add) → `GroupNormalization` (normalization_patterns.h);
/// - a Conv followed by an inference BatchNormalization, or by a Mul, Div, Add or Sub of
///   per-channel constants → the Conv with them folded into its weights (conv_folding.h).
/// Intermediate values must be read by the pattern only (not by other nodes, regions or the
/// graph's outputs); constants must be f32 scalars (one element) within 1e-6 of the value.
/// Returns how many patterns were rewritten. Never fails: what does not match is left as is.
size_t rewrite_patterns(ir::Model& model, ir::Graph& graph);

}  // namespace kiln::engine::passes
