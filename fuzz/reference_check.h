#pragma once
// The engine fuzzer's differential check: a function the engine ran is run again on the
// reference kernels (`compile::run_reference`), and the two must agree.
//
// Rounding differs between the engine's kernels (oneDNN's, kiln's own loops, fused and
// re-laid-out) and the reference ones, and a fuzzed graph can amplify it without bound. So the
// check compares only where the results are well conditioned:
// - every node's op is one whose result moves continuously, and no more than its inputs' scale,
//   with its inputs (`continuous_op`): no comparisons, rounding, casts, logarithms or roots,
//   whose results jump or blow up when an input moves by a rounding error. A division is
//   compared only by a constant float divisor of magnitude at least 1 / kMaxScale everywhere
//   (its result keeps its dividend's relative error; a divisor near zero would not);
// - every float the reference run reads or makes (inputs, the weights the function uses, each
//   node's outputs) is finite and at most kMaxScale in magnitude.
// There, each float output must be within 1e-3 relative plus kAbsPerScale2 x scale^2 absolute
// of the reference's (a product of two values of the scale carries their rounding, and
// accumulations of a few thousand terms stay well inside it), and every other output must be
// equal; shapes and dtypes always.

#include <kiln/engine/ir/graph.h>
#include <kiln/runtime/core/span.h>
#include <kiln/runtime/core/tensor.h>

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::fuzz {

/// Whether `op`'s result moves continuously with its inputs (see above).
bool continuous_op(const std::string& op);

/// What the check found.
enum class ReferenceVerdict {
  Agree,     ///< compared, and every output agrees
  Skipped,   ///< not compared: an op outside the set, a reference run error, a scale out of range
  Disagree,  ///< compared, and an output differs (a finding)
};

/// Runs `function` of `model` on the reference kernels with the same `inputs` the engine ran
/// and compares its outputs with the engine's `outputs`. `weight_data` as for
/// `compile::run_reference`. On Disagree, `detail` says which output and element, and both
/// values.
ReferenceVerdict check_against_reference(
    const engine::ir::Model& model, const engine::ir::Graph& function,
    const std::vector<runtime::Span<const uint8_t>>& weight_data,
    const std::vector<const runtime::Tensor*>& inputs, const std::vector<runtime::Tensor*>& outputs,
    std::string& detail);

}  // namespace kiln::fuzz
