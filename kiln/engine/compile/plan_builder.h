#pragma once
// Internal to kiln/engine/compile: the builder behind specialize() and specialize_generic().
// Its work is in four files: specialize.cpp (the order of the phases, placement and the memory
// plan), folding.cpp (constant folding and shapes the model left symbolic), op_choice.cpp
// (which op runs a node: oneDNN's, kiln's run-time-shape loops) and shaped_op_choice.cpp (a
// shape-generic plan's ops made for each shape).

#include <kiln/engine/compile/function_plan.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace kiln::engine::compile {

/// `node`'s name and op, as placement reports and errors give it: "name (Op)".
inline std::string describe_node(const ir::Node& node) { return node.name + " (" + node.op + ")"; }

/// Builds one function's plan: shapes → folding → fusion and placement → layouts → memory plan.
/// One builder builds one plan.
class PlanBuilder {
 public:
  /// `frequent_reshapes`: the specialization expects frequent reshapes
  /// (`SpecializationOptions::expect_frequent_reshapes`), so kernels that generate code for each
  /// shape are avoided where kiln's loops take the op (Winograd's Convs).
  PlanBuilder(const ir::Model& model, const ir::Graph& graph, std::vector<runtime::Tensor> weights,
              const CompileOptions& options, bool frequent_reshapes)
      : model_(model),
        graph_(graph),
        weights_(std::move(weights)),
        options_(options),
        frequent_reshapes_(frequent_reshapes),
        impl_(std::make_unique<CompiledFunctionImpl>()) {}

  /// Builds the plan for `input_sizes`, or (nullopt) a shape-generic one: no value but the
  /// constants has a known shape, so every step is placed for any shape.
  runtime::Result<std::unique_ptr<CompiledFunctionImpl>> build(
      const std::optional<std::vector<std::vector<int64_t>>>& input_sizes);

 private:
  Slot& slot(int value) { return *impl_->slots[static_cast<size_t>(value)]; }

  // --- slots (specialize.cpp) ---
  void make_slots();
  /// A slot that holds whatever a reference kernel writes (storage grows on demand).
  void make_dynamic(Slot& s);
  /// A scratch slot for an optional output nobody reads.
  int add_scratch(const std::string& name);
  /// The node's outputs without the trailing ones nobody reads (LayerNormalization's Mean,
  /// ...), which an op is not asked for.
  std::vector<int> read_outputs(const ir::Node& node);
  /// The node's outputs, with a scratch slot for each one the model leaves out.
  std::vector<int> outputs_of(const ir::Node& node);
  void count_uses();
  bool shapes_static(const std::vector<int>& values);

  // --- folding and shapes (folding.cpp) ---
  /// Shape and Size of a value whose shape is known: a constant.
  runtime::Result<bool> fold_shape_of(const ir::Node& node);
  /// Evaluates a node whose inputs are all constant with its reference kernel, once.
  runtime::Result<bool> fold(const ir::Node& node);
  /// Learns output shapes the model left symbolic (by a rule, or by running the reference
  /// kernel once on zeros) and checks declared ones by the rule, when the node's output shape
  /// cannot depend on the values of its non-constant inputs.
  runtime::Status probe_shapes(const ir::Node& node);
  /// Checks the weights among `node`'s inputs before a reference kernel reads them.
  runtime::Status verify_inputs(const ir::Node& node) {
    return verify_node_weights(graph_, node, options_);
  }

  // --- placement (specialize.cpp) ---
  runtime::Status place(size_t n);
  runtime::Status place_node(size_t n);
  /// A Transpose whose result a oneDNN MatMul can read as B in place
  /// (`matmul_reading_transposed`): not placed now; the MatMul tries that, else places it first.
  bool defer_to_matmul(size_t n);

  // --- the op that runs a node (op_choice.cpp, shaped_op_choice.cpp) ---
  /// The desc of a CPU op for `node`: its op, attributes and the compile options.
  cpu::OpDesc op_desc(const ir::Node& node) const;
  /// A oneDNN op (or kiln's loops behind cpu::CpuOp) for a node of known shapes, with the ops
  /// of `group` fused when given.
  runtime::Result<std::unique_ptr<cpu::CpuOp>> try_cpu_op(const ir::Node& node,
                                                          const FusionGroup* group, Step& step,
                                                          std::string& why);
  /// A MatMul of a shape-generic plan by a constant 2-D B, with the bias Add and activations
  /// that follow it fused (`find_generic_fusion`), or of two computed inputs.
  runtime::Result<std::unique_ptr<cpu::RuntimeMatMul>> try_runtime_matmul(size_t n, Step& step,
                                                                          std::string& why);
  /// A Softmax, LogSoftmax or LayerNormalization of a shape-generic plan.
  runtime::Result<std::unique_ptr<cpu::RuntimeRows>> try_runtime_rows(size_t n, Step& step,
                                                                      std::string& why);
  /// An Add, Sub, Mul, Div, Where or Transpose of a shape-generic plan.
  runtime::Result<std::unique_ptr<cpu::RuntimeElementwise>> try_runtime_elementwise(
      size_t n, Step& step, std::string& why);
  /// Whether a node of a shape-generic plan runs on a `ShapedOp` (kiln's loops made for each
  /// shape): a 2-D Conv or ConvTranspose of constant weights, a pool, a Resize of constant
  /// scales or sizes, a Concat; f32, on a CPU where kiln's loops run.
  bool shaped_op_takes(const ir::Node& node);
  /// Such a node (a Conv with its bias and activations fused) on a `ShapedOp`.
  runtime::Result<std::unique_ptr<ShapedOp>> try_shaped_op(size_t n, Step& step, std::string& why);
  /// Shape-generic plans: lets each `ShapedOp` step leave its result in a native layout when
  /// every reader is one too and it is no function output.
  void plan_shaped_layouts();
  /// Records that a step runs on `num_threads` intra-op threads (0: OpenMP's count).
  void note_threads(int num_threads);

  // --- memory (specialize.cpp) ---
  runtime::Status plan_memory();
  /// Refuses a value whose resolved sizes need more bytes than `memory_limit` (or overflow),
  /// before any op is made for it (oneDNN allocates an op's scratch memory, sized by its
  /// shapes, when the op is made).
  runtime::Status check_value_sizes() const;
  /// `CompileOptions::max_arena_bytes`, else the machine's physical memory (0: unknown).
  uint64_t memory_limit() const;
  /// Shape-generic plans: each Dynamic value goes back to the pool after the last step that
  /// reads or writes it (function outputs are read after the run: never).
  void plan_releases();

  const ir::Model& model_;
  const ir::Graph& graph_;
  std::vector<runtime::Tensor> weights_;
  const CompileOptions& options_;
  const bool frequent_reshapes_;
  std::unique_ptr<CompiledFunctionImpl> impl_;
  std::vector<bool> folded_, absorbed_;
  /// Per MatMul node: the Transpose node deferred to it (`defer_to_matmul`), or -1.
  std::vector<int> b_transpose_;
  /// While a MatMul with a deferred Transpose is placed: the Transpose's input, which
  /// `try_cpu_op` gives the op as B read transposed; `read_transposed_` says whether it did.
  int transposed_b_ = -1;
  bool read_transposed_ = false;
  bool blocked_convs_ = false;         ///< Convs in ActivationLayout::Blocked.
  bool winograd_convs_ = false;        ///< And on Winograd where it fits.
  bool avoid_generated_code_ = false;  ///< kiln's loops rather than oneDNN's generated kernels.
  bool own_winograd_ = false;          ///< kiln's Winograd loops take large images' Convs.
  std::vector<int> num_uses_, consumer_, producer_;
};

}  // namespace kiln::engine::compile
