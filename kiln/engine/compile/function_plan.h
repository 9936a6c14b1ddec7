#pragma once
// Internal to kiln/engine/compile: the parts a compiled function is made of.

#include <kiln/engine/compile/compiled_function.h>
#include <kiln/engine/compile/shaped_op.h>
#include <kiln/engine/cpu/cpu_op.h>
#include <kiln/engine/cpu/runtime_elementwise.h>
#include <kiln/engine/cpu/runtime_matmul.h>
#include <kiln/engine/cpu/runtime_rows.h>
#include <kiln/runtime/core/aligned_buffer.h>
#include <kiln/runtime/core/evalue.h>
#include <kiln/runtime/executor/kernel_registry.h>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

namespace kiln::engine::compile {

/// An allocator whose `resize` leaves new bytes uninitialized (value-initialization zeroes
/// them, which for storage a kernel is about to write only costs time: a shape-generic plan
/// grows such storage on its first runs).
template <typename T>
struct DefaultInitAllocator : std::allocator<T> {
  template <typename U>
  struct rebind {
    using other = DefaultInitAllocator<U>;
  };
  DefaultInitAllocator() = default;
  template <typename U>
  DefaultInitAllocator(const DefaultInitAllocator<U>& /*other*/) noexcept {}  // NOLINT
  template <typename U>
  void construct(U* p) noexcept {
    ::new (static_cast<void*>(p)) U;
  }
  template <typename U, typename... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
};

/// One value of the function at run time.
struct Slot {
  enum class Kind {
    Unused,    ///< Never materialized (fused away, or read by no step).
    Input,     ///< A function input: points at the caller's data during `run`.
    Constant,  ///< A weight (model bytes) or a folded value (bytes in `storage`).
    Planned,   ///< Static shape: a fixed place in the arena.
    Dynamic,   ///< Shape known at run time only: `storage` grows on demand.
  };
  Kind kind = Kind::Unused;
  std::string name;
  runtime::ScalarType dtype = runtime::ScalarType::Float32;
  std::optional<std::vector<int64_t>> sizes;  ///< Resolved at compile time.
  uint64_t offset = 0;                        ///< Planned only.
  /// Planned only: when non-zero, the value is held in its producer's native layout (e.g.
  /// oneDNN's blocked nChw16c), which needs this many bytes; every step reading it reads that
  /// layout (see `propagate_layouts`). Its Tensor keeps the plain sizes.
  uint64_t native_bytes = 0;
  /// Dynamic only, during a run: the native layout the value is held in (`cpu::HandOver`), as
  /// the `ShapedOp` step computing it left it for the ShapedOp steps reading it; none: plain.
  std::optional<cpu::HandOver> held;
  runtime::EValue value;  ///< Holds the Tensor steps read and write.
  /// Dynamic values and folded constants (new bytes are not zeroed).
  std::vector<uint8_t, DefaultInitAllocator<uint8_t>> storage;

  runtime::Tensor& tensor() { return value.to_tensor(); }
};

/// One step: a oneDNN op (possibly fused), a run-time-shape MatMul, row op or element-wise op
/// (shape-generic plans) or a reference kernel call.
struct Step {
  PlacementEntry placement;
  /// The graph node the step runs (the first of a fused group), for profiles; -1 for none.
  int node = -1;
  std::vector<int> inputs;   ///< Slot indices (-1: absent), as the implementation takes them.
  std::vector<int> outputs;  ///< Slot indices.

  /// Shape-generic plans: reads slot `inputs[0]` (any rows), writes the Dynamic slot
  /// `outputs[0]`, sized at each run.
  std::unique_ptr<cpu::RuntimeMatMul> runtime_matmul;
  /// Shape-generic plans: a Softmax, LogSoftmax or LayerNormalization of slot `inputs[0]`
  /// (LayerNormalization's Scale and B: constant slots the op holds), writing the Dynamic slot
  /// `outputs[0]`, sized as its input at each run.
  std::unique_ptr<cpu::RuntimeRows> runtime_rows;
  /// Shape-generic plans: an Add, Sub, Mul, Div or Where of the slots `inputs`, writing the
  /// Dynamic slot `outputs[0]`, sized at each run as its inputs broadcast.
  std::unique_ptr<cpu::RuntimeElementwise> runtime_elementwise;
  /// Shape-generic plans: a Conv (its fused group), ConvTranspose, pool, Resize or Concat on
  /// ops made for each input shape (`ShapedOp`), reading `inputs` in its desc's order.
  std::unique_ptr<ShapedOp> shaped_op;

  std::unique_ptr<cpu::CpuOp> cpu_op;
  std::vector<const runtime::Tensor*> cpu_inputs;
  std::vector<runtime::Tensor*> cpu_outputs;
  std::vector<std::unique_ptr<runtime::Tensor>> views;  ///< Reshaped constant views (biases).

  runtime::KernelFunction kernel = nullptr;
  runtime::Attributes attributes;
  std::vector<runtime::EValue*> ref_inputs, ref_outputs;
  std::unique_ptr<runtime::KernelContext> context;
};

/// Storage for the values of a shape-generic plan, renewed at each run: pieces carved in turn
/// from chunks of bulk memory (`runtime::allocate_bulk`) that are kept from run to run, so only
/// a run at a larger shape than any before touches fresh memory; a piece reaching past what
/// earlier pieces of its chunk covered maps those fresh pages in one call
/// (`runtime::prefault_for_write`), since its step is about to write them. A value's piece goes
/// back to the pool after the value's last use in the run
/// (`give_back`) and a later value that fits takes it (the smallest that fits); `reset` starts
/// a run over from the first chunk. So the pool holds about the most bytes live at once in a
/// run of the largest shapes, not the sum of every value.
class DynamicPool {
 public:
  struct Piece {
    uint8_t* data = nullptr;
    size_t bytes = 0;  ///< What the piece holds (at least what was asked, 64-byte multiple).
  };
  /// A piece of at least `bytes`, valid until `reset`: a given-back one when one fits, else the
  /// next bytes of the chunks (a new chunk when none has room). Errors: MemoryAllocationFailed.
  runtime::Result<Piece> take(size_t bytes);
  /// Makes `piece` (from `take`, since the last `reset`) free for later `take`s.
  void give_back(Piece piece);
  /// Forgets every piece: the next `take` starts at the first chunk.
  void reset();
  /// The most bytes the chunks may hold together (0: no limit): a `take` that needs a chunk
  /// beyond it fails with MemoryAllocationFailed, allocating nothing.
  void set_limit(uint64_t limit) { limit_ = limit; }
  /// Bytes of the chunks allocated so far.
  uint64_t bytes() const { return total_; }
  /// Chunks allocated so far (the times the pool asked the system for memory).
  size_t num_chunks() const { return chunks_.size(); }

 private:
  struct Chunk {
    runtime::AlignedBuffer data;
    size_t size = 0;
    size_t mapped = 0;  ///< Bytes from the start mapped for writing.
  };
  std::vector<Chunk> chunks_;
  std::vector<Piece> free_;
  size_t chunk_ = 0, used_ = 0;  ///< Where the next fresh piece starts.
  uint64_t total_ = 0, limit_ = 0;
};

class CompiledFunctionImpl {
 public:
  std::string name;
  std::vector<int> inputs, outputs;  ///< Slot indices.
  std::vector<std::vector<int64_t>> input_sizes;
  std::vector<std::unique_ptr<Slot>> slots;
  std::shared_ptr<cpu::PackedConstants> packed;  ///< Keeps the steps' packed weights alive
                                                 ///< (declared first: destroyed last).
  std::vector<Step> steps;
  std::vector<PlacementEntry> placement;
  runtime::AlignedBuffer arena;  ///< 64-byte aligned, uninitialized; `arena_base` is its start.
  uint8_t* arena_base = nullptr;
  uint64_t arena_bytes = 0;
  /// Set: the arena is taken from this pool at each run (`arena` stays null) and the values
  /// are placed in it by `bind_arena` (`arena_base` null until the first run).
  std::shared_ptr<ArenaPool> arena_pool;
  /// The values placed in the arena (`Slot::offset` from its start).
  std::vector<int> arena_slots;
  /// Per step with scratch memory in the arena: the step and the scratch's offset.
  std::vector<std::pair<size_t, uint64_t>> scratch_offsets;
  /// The most scratch memory one oneDNN step needs. Each step's scratch is a buffer of the
  /// arena alive during that step only (the steps run one at a time), counted in `arena_bytes`.
  uint64_t scratchpad_bytes = 0;
  bool is_static = true;
  /// Per function output: whether a run may point its slot at the caller's output tensor, so
  /// that the step computing it writes there and nothing is copied (a Planned value with
  /// storage of its own in plain bytes, listed once among the outputs). Set by the memory plan.
  std::vector<bool> direct_outputs;
  /// A shape-generic plan (`specialize_generic`): inputs of any shapes `graph`'s input types
  /// admit, every computed value Dynamic.
  bool generic = false;
  const ir::Graph* graph = nullptr;  ///< The function (the model outlives the plan).
  /// The most intra-op threads a step runs on (1: no step runs in parallel).
  int team_threads = 1;
  /// Set once a shape-generic plan is built: Dynamic values then take their storage from
  /// `pool` at each run (during the build, folded values keep their own `Slot::storage`), and
  /// give it back after step `release_after` index (per step: the Dynamic slots it reads or
  /// writes for the last time; function outputs are kept until the next run starts).
  bool pooled = false;
  DynamicPool pool;
  /// The most bytes the storage of data-dependent values may take together, in `pool` or in
  /// the slots' own storage (`CompileOptions::max_arena_bytes`, else the machine's physical
  /// memory; 0: no limit): a value sized beyond it fails its step with MemoryAllocationFailed
  /// naming the value, its shape and the bytes, instead of an allocation the system may grant
  /// and the run could not write.
  uint64_t max_dynamic_bytes = 0;
  std::vector<std::vector<int>> release_after;
  uint64_t dynamic_allocations = 0;
  runtime::EValue none;
  /// Pooled plans, during a run: when a function output's value is first sized, called with
  /// the output's index, sizes and bytes; returns the caller's tensor memory (sized to them) for
  /// the step to write the output into, or null for pool memory (the output is then copied
  /// after the run). Unset: every output in pool memory.
  std::function<void*(size_t output, runtime::Span<const int64_t> sizes, size_t bytes)>
      place_output;
  /// Pooled plans, during a run: per function output, the caller's memory `place_output` gave
  /// it (null: none, or taken back because the value was sized again beyond it).
  std::vector<void*> placed_outputs;

  /// Resize callback of reference kernels: Planned (static) tensors keep their sizes, Dynamic
  /// ones grow their storage.
  /// `min_bytes`: storage of at least that many bytes (a value held in a native layout).
  runtime::Status resize(runtime::EValue& value, runtime::Span<const int64_t> sizes,
                         uint64_t min_bytes = 0);
  /// Scratch memory of at least `bytes` for the `ShapedOp` steps' ops, shared by them (the
  /// steps run one at a time); grown when a call needs more (an earlier pointer is then gone).
  runtime::Result<void*> shaped_scratch(uint64_t bytes);
  runtime::AlignedBuffer shaped_scratch_buffer;
  uint64_t shaped_scratch_bytes = 0;
  /// `why` (a limit of `max_dynamic_bytes` reached) with the value and its sizes named.
  runtime::Status over_limit(const runtime::EValue& value, runtime::Span<const int64_t> sizes,
                             const runtime::Status& why) const;
  /// Runs every step once (no locking, no validation).
  runtime::Status execute();
  /// Places the arena's values and the steps' scratch memory at `base` (an arena of at least
  /// `arena_bytes`); nothing to do when they are there already.
  void bind_arena(uint8_t* base);
  /// Pooled plans: gives the storage of `release_after[step]` back to the pool.
  void release_values(size_t step);
  /// Pooled plans, before a run: every Dynamic value without storage, the pool reset.
  void renew_pool();
};

/// Before a run of a pooled (shape-generic) plan: sets `impl.place_output` to give each function
/// output listed once and no input the caller's tensor, sized by `size` (the run's output
/// resizer), when that memory overlaps no input and no other output; else null (pool memory,
/// copied after the run, which then reports a sizing error). `inputs`, `outputs` and `size`
/// must outlive the run; the caller unsets `place_output` after it.
void place_generic_outputs(
    CompiledFunctionImpl& impl, runtime::Span<const runtime::Tensor* const> inputs,
    runtime::Span<runtime::Tensor* const> outputs,
    std::function<runtime::Status(size_t, runtime::Span<const int64_t>)> size);

/// Makes a reference-kernel step for `node` over `slots` (a KernelContext bound to `impl`).
/// Errors: OperatorMissing naming the node when no kernel is registered for its op.
runtime::Result<Step> make_reference_step(CompiledFunctionImpl& impl, const ir::Node& node,
                                          const std::vector<runtime::Tensor>& weights,
                                          std::vector<int> outputs);

/// Runs one step. Errors: the implementation's, with the node named.
runtime::Status run_step(CompiledFunctionImpl& impl, Step& step);

/// A fusion group found by `find_fusion`: the anchor (Conv, ConvTranspose, MatMul or Gemm) and
/// what follows it.
struct FusionGroup {
  std::vector<size_t> absorbed;     ///< Node indices fused into the anchor, in order.
  std::optional<int> bias;          ///< A constant value fused as the anchor's bias.
  std::vector<int64_t> bias_sizes;  ///< The sizes the op sees the bias with.
  std::optional<int> residual;      ///< A value added to the result (AddResidual).
  std::vector<cpu::PostOp> post_ops;
  int output = -1;  ///< The group's result (last absorbed node's).
};

/// What fusion needs to know of the function.
struct FusionContext {
  const ir::Graph& graph;
  const std::vector<std::unique_ptr<Slot>>& slots;  ///< Kinds and sizes resolved.
  const std::vector<int>& num_uses;                 ///< Per value: reads by nodes and outputs.
  const std::vector<int>& consumer;                 ///< Per value: its one reading node or -1.
  const std::vector<int>& producer;                 ///< Per value: its node or -1.
  const std::vector<bool>& absorbed;                ///< Nodes already fused away.
};

/// Keeps values in a native layout between the oneDNN steps that agree on it: a value made
/// by a step that computes it in layout L (and would convert it to plain), read only by
/// oneDNN steps that would convert it from plain into that same L, and not a function output,
/// is handed over in L, with both conversions dropped. Call after every step is placed and
/// before memory is planned (it sets `Slot::native_bytes`). Returns how many values it kept
/// native. Errors: an op's own error when it cannot switch (not expected: only layouts the
/// ops report are used).
runtime::Result<size_t> propagate_layouts(CompiledFunctionImpl& impl);

/// A value placed inside another's storage: `slot` lives `offset` bytes into `within`.
struct Alias {
  int slot = -1;
  int within = -1;
  uint64_t offset = 0;
};

/// Inputs of steps that only copy their inputs into their result
/// (`cpu::CpuOp::input_offsets_in_output`, e.g. a Concat of blocked pieces) that no other step
/// reads and that an earlier step writes: each is placed at its offset in the result, so its
/// producer writes it there and the copy is skipped. A result holding others is never placed
/// in another. Call after `propagate_layouts` (offsets exist only in native layouts).
std::vector<Alias> concat_aliases(const CompiledFunctionImpl& impl);

/// The native layout id in which the oneDNN step producing `value` computes it, or "" (no
/// such step yet, a reference step, or a plain result). For `cpu::OpDesc::input_layouts`.
std::string producer_layout(const CompiledFunctionImpl& impl, int value);

/// Whether a node is a Conv of a constant weight of more than 2^20 elements (ResNet's last
/// stage, 512 x 512 x 3 x 3). Such a Conv runs on oneDNN's brgemm kernel in
/// `cpu::ActivationLayout::Preferred` (nhwc) even among blocked Convs: on ResNet-18's 7x7
/// stage the blocked direct kernel ran 100-120 GFLOP/s against brgemm's 180 (1 thread), which
/// outweighs the reorders at the stage's ends and brgemm's longer creation (0.8 ms a Conv,
/// against 0.06, at each load).
bool has_large_weights(const ir::Node& node, const std::vector<std::unique_ptr<Slot>>& slots);

/// Whether a node is a Conv worth a Winograd kernel: Yes for a 2-D 3x3 Conv of stride 1, no
/// dilation or groups, a constant weight and channels in multiples of 16; TooLarge for such a
/// Conv of large weights (`has_large_weights`: the transform at load costs more than the
/// kernel gains); FewOutputChannels for one of at most 16 output channels over an image of
/// 80 x 80 or more unless `own_loops` (oneDNN's direct kernel runs it faster than oneDNN's
/// Winograd kernel; kiln's Winograd loops, which take such images' Winograd Convs wherever
/// kiln's loops run, `own_loops`, are faster still); No otherwise.
enum class WinogradFit { No, Yes, TooLarge, FewOutputChannels };
/// Whether oneDNN's direct kernel runs a Conv to one block of output channels over a large
/// image faster than its Winograd kernel on this CPU (FewOutputChannels applies only then).
bool direct_wins_one_block();
WinogradFit winograd_fit(const ir::Node& node, const std::vector<std::unique_ptr<Slot>>& slots,
                         bool own_loops);

/// Whether a function with these resolved `slots` has a Conv that fits Winograd (Yes above):
/// then its Convs but those of large weights are built in `cpu::ActivationLayout::Blocked`,
/// with `cpu::OpDesc::winograd` (see `CompileOptions::winograd`). `skipped` marks folded nodes.
bool has_winograd_conv(const ir::Graph& graph, const std::vector<std::unique_ptr<Slot>>& slots,
                       const std::vector<bool>& skipped, bool own_loops);

/// Whether a function with these resolved `slots` has a 2-D depthwise Conv (groups = input
/// channels, more than one): then all its Convs are built in `cpu::ActivationLayout::Blocked`
/// (without Winograd unless `has_winograd_conv`). oneDNN's blocked kernels for such networks
/// (depthwise, 1x1 and first-layer) are as fast as its nhwc ones and cheaper to create:
/// MobileNet-V2's warm load 9.7 -> 8.5 ms, latency and first run unchanged or lower, at 1 and
/// 2 threads. Networks without depthwise Convs keep the nhwc kernels: OCR detection's first
/// call (it specializes) was 6 ms slower blocked. `skipped` marks folded nodes.
bool has_depthwise_conv(const ir::Graph& graph, const std::vector<std::unique_ptr<Slot>>& slots,
                        const std::vector<bool>& skipped);

/// The model's weights as tensors over their bytes (`options.weight_data` when given, else each
/// weight's own data). Errors: InvalidArgument naming a weight whose byte count does not match
/// its dtype and sizes, or a `weight_data` of the wrong length.
runtime::Result<std::vector<runtime::Tensor>> weight_tensors(const ir::Model& model,
                                                             const CompileOptions& options);

/// Checks (`options.verify_weight`, when set) every weight `graph` reads directly: all but
/// those used only as input 1 of top-level Conv, MatMul and Gemm nodes and inputs 1 and 2 (W,
/// R) of top-level LSTM and GRU nodes, which the CPU ops only pack
/// (`cpu::OpDesc::verify_constant` checks them then). Errors: the check's.
runtime::Status verify_read_weights(const ir::Model& model, const ir::Graph& graph,
                                    const CompileOptions& options);
/// Checks (`options.verify_weight`, when set) the weights among `node`'s inputs, before a
/// reference kernel reads them. Errors: the check's.
runtime::Status verify_node_weights(const ir::Graph& graph, const ir::Node& node,
                                    const CompileOptions& options);

/// The longest fusable chain after node `anchor`, or empty when nothing fuses.
std::optional<FusionGroup> find_fusion(const FusionContext& context, size_t anchor);
/// For shape-generic plans (shapes unknown): after a MatMul by a constant 2-D B, a bias Add of
/// a constant [N] (or [1, ..., 1, N]) and the activations that follow; no residual. Empty when
/// nothing fuses.
std::optional<FusionGroup> find_generic_fusion(const FusionContext& context, size_t anchor);
/// For shape-generic plans: after a Conv or ConvTranspose of a constant weight, a bias Add of
/// a constant along the channels, one residual Add (a Conv's, of a value whose declared shape
/// equals the Conv's and the sum's: one that may broadcast is not fused) and the activations
/// that follow. Empty when nothing fuses.
std::optional<FusionGroup> find_generic_conv_fusion(const FusionContext& context, size_t anchor);
/// For a shape-generic plan's MatMul of two computed inputs (attention's scores): the
/// multiplication by a constant scalar that follows it (the scale, a Linear post-op of beta 0),
/// which kiln's run-time MatMul applies as it packs B; nullopt when none.
std::optional<FusionGroup> find_generic_scale(const FusionContext& context, size_t anchor);

/// The MatMul that may read Transpose node `transpose`'s input as its B, transposed in place
/// (oneDNN's matmul takes a B of any strides), or -1: a Transpose of an f32 value computed at
/// run time (not a constant) that swaps only the last two axes, whose result is read only by
/// one MatMul as B and is not a function output. Attention's K^T in a decoder: GPT decode's
/// three took 7 us each, copying [4, 129, 32] floats into rows of 129. `declared_rank`: when
/// the input's sizes are not known (a shape-generic plan), its rank is the model's declared one.
int matmul_reading_transposed(const FusionContext& context, size_t transpose,
                              bool declared_rank = false);

}  // namespace kiln::engine::compile
