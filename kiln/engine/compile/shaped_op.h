#pragma once
// Internal to kiln/engine/compile: a step of a shape-generic plan that runs a Conv, ConvTranspose,
// pool, Resize or Concat (a Conv with its fused bias and activations) on CPU ops made for each
// input shape the step meets.

#include <kiln/engine/cpu/cpu_op.h>
#include <kiln/engine/ir/graph.h>
#include <kiln/runtime/core/result.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace kiln::engine::compile {

class CompiledFunctionImpl;
struct Step;

/// A step of a shape-generic plan (`specialize_generic`) whose op oneDNN has no run-time-shape
/// form of, run on kiln's loops made for each input shape met: a `cpu::CpuOp` made from the
/// step's `OpDesc` with that call's sizes (`OpDesc::avoid_generated_code`: kiln's Conv, pool,
/// ConvTranspose and Resize loops, which generate no code and take the weights the model's
/// `cpu::PackedConstants` already holds packed), kept for the next calls of those sizes (the
/// `kShapesKept` most recent). Making one costs about 10-50 us; no plan is built again.
///
/// Values between such steps stay in a native layout (`cpu::HandOver`: nChw16c, nhwc) where
/// the op made for a shape computes its output so and every reader of the value is such a step
/// (the plan says so: `native_output`); a reader whose op for its shape reads another layout
/// converts the value to plain first. Every other step sees plain tensors.
///
/// Shapes no op is made for (sizes that fit no output shape, or an op that refuses them: a
/// kernel larger than the padded image, a residual that broadcasts) run on the reference
/// kernels of the node and of the nodes fused after it (`fallback`), which compute them or
/// report exactly what does not fit.
class ShapedOp {
 public:
  static constexpr size_t kShapesKept = 8;

  /// `desc` gives every input but the computed ones' sizes (filled in at each call) and no
  /// output sizes; its constants (weights, bias views) must outlive the step. `node` is the
  /// node whose output shapes the step computes (the fused group's anchor); `desc_input_of`
  /// maps each of the node's inputs to the desc's input (-1: none). `native_output`: every
  /// reader of the result is a ShapedOp step and it is no function output.
  ShapedOp(cpu::OpDesc desc, const ir::Node& node, std::vector<int> desc_input_of,
           bool native_output);
  ~ShapedOp();
  ShapedOp(const ShapedOp&) = delete;
  ShapedOp& operator=(const ShapedOp&) = delete;

  /// Makes the op once for input 0 of `probe` sizes (the other inputs as the desc gives them),
  /// so that its weights are packed at the build (and stored with the plan's artifact), and
  /// checks that the desc makes an op at all. Errors: `cpu::CpuOp::create`'s.
  runtime::Status probe(const std::vector<int64_t>& probe);

  /// Whether the result may be left in a native layout (see the constructor).
  void set_native_output(bool native) { native_output_ = native; }

  /// The reference kernels' steps, in order, for shapes no op takes (empty: none; the op's
  /// error is then the call's).
  void set_fallback(std::vector<std::unique_ptr<Step>> fallback);

  /// Runs the step: `step.inputs` (slots, in the desc's order) into `step.outputs`.
  runtime::Status run(CompiledFunctionImpl& impl, Step& step);

  /// "kiln ops made for each input shape (Conv ...)", after the probe's op.
  std::string describe() const;
  /// The probe op's provider ("kiln", "onednn"), or "kiln" before a probe.
  std::string provider() const;
  /// Ops made so far (for tests: a shape seen again makes none).
  uint64_t ops_made() const { return ops_made_; }

 private:
  struct Made;
  runtime::Result<Made*> made_for(CompiledFunctionImpl& impl, Step& step);
  runtime::Status settle_layouts(Made& made);
  runtime::Status run_fallback(CompiledFunctionImpl& impl, Step& step, Made& made);

  cpu::OpDesc desc_;
  const ir::Node& node_;
  std::vector<int> desc_input_of_;
  bool native_output_;
  std::vector<std::unique_ptr<Made>> made_;  ///< Most recent first.
  std::vector<std::unique_ptr<Step>> fallback_;
  std::string probe_describe_, probe_provider_ = "kiln";
  uint64_t ops_made_ = 0;
  /// Plain copies of natively held inputs an op reads plain (per desc input).
  std::vector<std::vector<float>> plain_;
  // Per call (kept to spare allocations): the computed inputs' sizes and layouts, the op's
  // inputs and outputs, views of plain copies.
  std::vector<std::vector<int64_t>> sizes_;
  std::vector<std::optional<cpu::HandOver>> held_;
  std::vector<const runtime::Tensor*> inputs_;
  std::vector<runtime::Tensor*> outputs_;
  std::vector<runtime::Tensor> views_;
};

}  // namespace kiln::engine::compile
