#pragma once

#include <kiln/engine/ir/graph.h>

#include <cstdint>
#include <string_view>
#include <vector>

namespace kiln::engine::compile {

/// The arithmetic work of one call of `node`, counting 2 per multiply-add (the convention of
/// GFLOP/s figures and of a core's FMA peak), from the sizes its inputs and first output have
/// in that call:
/// - Conv: each output pixel meets every weight of its output channel, 2 x |Y| x |W| / M
///   (M = W's first dimension; padded positions count: they are the op's defined work);
/// - ConvTranspose: each input pixel meets every weight of its input channel,
///   2 x |X| x |W| / C (C = W's first dimension);
/// - MatMul: 2 x M x K x N over the broadcast batch (NumPy rules; 1-D operands promoted);
/// - Gemm: 2 x M x K x N, with `transA` and `transB` (C's addition is not counted).
/// 0 for every other op, and for sizes that do not fit the op (an input missing, a rank too
/// small), which a profile reports as no work rather than as a guess.
double work_flops(const ir::Node& node, const std::vector<std::vector<int64_t>>& inputs,
                  const std::vector<int64_t>& output);

/// Whether `work_flops` counts the work of op `op` (Conv, ConvTranspose, MatMul, Gemm).
bool counts_work(std::string_view op);

}  // namespace kiln::engine::compile
