#pragma once

#include <kiln/engine/cpu/packed_constants.h>
#include <kiln/engine/ir/graph.h>
#include <kiln/engine/specialization/specialization_options.h>
#include <kiln/runtime/core/result.h>
#include <kiln/runtime/core/span.h>
#include <kiln/runtime/core/status.h>
#include <kiln/runtime/core/tensor.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

/// Specialization of one function of a model for concrete input shapes (DESIGN.md §4): shape
/// resolution → constant folding → fusion → placement → static memory plan → kernel selection
/// and weight pre-packing. The result runs without allocating activation memory per call.
namespace kiln::engine::compile {

class ArenaPool;

/// How `specialize` compiles, beyond what `SpecializationOptions` says.
struct CompileOptions {
  /// Fuse Conv/MatMul/Gemm with a following bias Add, residual Add and activation (Relu, Clip,
  /// Sigmoid, Tanh, Gelu) into one oneDNN op. Trade-off: off only for debugging and tests (fewer
  /// passes over memory when on); results agree either way within rounding. Default: true.
  bool fuse = true;
  /// Hand values between oneDNN ops in the layout they compute in (e.g. blocked nChw16c from
  /// one Conv to the next) instead of converting to plain and back. Trade-off: off only for
  /// debugging and tests; results agree either way. Default: true.
  bool propagate_layouts = true;
  /// Run 3x3 stride-1 Convs on oneDNN's Winograd kernels where it has them (AVX-512): a
  /// function with such a Conv builds all its Convs in the blocked nChw16c layout those kernels
  /// take. Trade-off: those Convs take 1.2-2.4x less time at one thread (ResNet-18 about 1.4x
  /// overall), and their results differ from a direct convolution's by more rounding (relative
  /// differences around 1e-5 instead of 1e-6); off gives the direct kernels. Takes effect when
  /// a function is specialized (part of the cache key). Default: true.
  bool winograd = true;
  /// Ops of little work skip oneDNN's code generation (`cpu::OpDesc::small_ops_own_loops`):
  /// small Convs, MatMuls and Gemms on kiln's own loops, tiny element-wise ops on the reference
  /// kernels. Trade-off: off only for tests of the oneDNN ops on small shapes; on, a model of
  /// microseconds of work loads in a few milliseconds instead of 5-15 (part of the cache key).
  /// Default: true.
  bool small_ops_own_loops = true;
  /// Intra-op threads of the oneDNN ops, at creation and at run; 0: oneDNN's default (all
  /// cores). Reference kernels run on the calling thread. Default: 0.
  int num_threads = 0;
  /// The bytes of each weight of the model, indexed like `ir::Model::weights`, for a model whose
  /// weights hold no data (a `package::PackageView`'s model). Empty: each weight's own `data`.
  /// The bytes are referenced, not copied: they must outlive the compiled function.
  std::vector<runtime::Span<const uint8_t>> weight_data;
  /// For `weight_data` not yet checked against the weights' content hashes (a package opened
  /// with `WeightCheck::OnFirstUse`): called with a weight's index before its bytes are first
  /// read; an error fails the specialization. A weight that a oneDNN op only packs (Conv,
  /// MatMul and Gemm weights) is checked when it is packed, so one whose packing is already
  /// held (adopted from a compiled artifact) is never read. Must be safe from several threads.
  /// Empty: the bytes are trusted.
  std::function<runtime::Status(size_t weight)> verify_weight;
  /// Where oneDNN ops pack constant weights: one store shared by every function and shape of a
  /// loaded model, so each weight is packed once (and can come from a compiled artifact). Kept
  /// alive by the compiled function. Null: each op packs its own copy.
  std::shared_ptr<cpu::PackedConstants> packed;
  /// The most bytes a plan's activation arena may take (not part of the compiled result): a
  /// plan needing more is refused with MemoryAllocationFailed naming its input shapes and the
  /// bytes, instead of allocating pages a run could not write. The same limit holds at run
  /// time for the storage of values whose sizes depend on data (a shape-generic plan's values,
  /// a Range's or NonZero's result), together: a value that would pass it fails its step with
  /// MemoryAllocationFailed naming the value, its shape and the bytes. 0: the machine's
  /// physical memory. Default: 0.
  uint64_t max_arena_bytes = 0;
  /// Where the plan's activation arena comes from (not part of the compiled result): null, an
  /// arena of its own allocated at `specialize`; else, at each run, an arena taken from this
  /// pool and given back when the run returns (the plan's values placed there, anew when it
  /// is not the arena of its last run). `ModelLoader` gives one pool to the per-shape plans of
  /// a loaded model, whose memory then stays at the largest plan's arena per thread running
  /// them at once, however many shapes it keeps. Default: null.
  std::shared_ptr<ArenaPool> arena_pool;
  /// For `ModelLoader::load` after a cache miss (not part of the compiled result): write the
  /// compiled artifact on a background thread (`run_in_background`) instead of before the
  /// load returns. Trade-off: a cold load returns once the model is specialized, and the write
  /// (and its sync) overlaps the first runs; a store that fails then is not in the load's
  /// report. Default: false.
  bool store_in_background = false;
  /// For `ModelLoader::load` on a cache hit (not part of the compiled result): the functions
  /// the caller uses right after the load. They are built during the load, while a second
  /// thread checks the entry's payload checksum (so hashing the packed weights overlaps
  /// creating the kernels instead of preceding it); the load returns once both are done, and a
  /// payload that fails the check is a miss as always. Only when the load owns its packed
  /// store (`packed` null). Empty: the payload is checked before anything is built, and every
  /// function is built on first use.
  std::vector<std::string> build_on_hit;
  /// Set by `ModelLoader` only, to rebuild a plan a cache entry records (not part of the
  /// compiled result): ops whose implementation rests on a proof run at creation take it
  /// unproved (`cpu::OpDesc::proofs_recorded`). The caller then compares the plan's
  /// fingerprint with the entry's and rebuilds with this false on a mismatch. Default: false.
  bool proofs_recorded = false;
};

/// Bytes of the activation arenas (scratch memory included) of every compiled function alive in
/// the process (for memory reports: with the weights, what a loaded model holds).
uint64_t live_activation_bytes();

namespace detail {
/// Adds `delta` to what `live_activation_bytes` reports (for `ArenaPool`'s arenas).
void count_activation_bytes(int64_t delta);
}  // namespace detail

/// Where one step of a compiled function runs.
struct PlacementEntry {
  std::string node;  ///< The node's name (the first node of a fused group).
  std::string op;    ///< Its ONNX op type.
  /// "cpu:onednn" (oneDNN's primitives), "cpu:kiln" (kiln's own optimized loops: small
  /// Convs and MatMuls, streaming MatMuls, run-time-shape row ops) or "cpu:reference".
  std::string device;
  std::vector<std::string> fused;  ///< Nodes fused into it, as "name (op)", in order.
  /// For oneDNN, the implementation chosen (`CpuOp::describe()`); for the reference kernels,
  /// why (e.g. "no oneDNN implementation", "shape known only at run time").
  std::string detail;
};

class CompiledFunctionImpl;

/// One function of a model compiled for one set of input shapes.
///
/// Weights are referenced from the model (or `CompileOptions::weight_data`), not copied; the
/// model's weights must outlive this object. Values whose shapes are known at compile time live
/// in one arena planned at `specialize` (allocated then, or taken from
/// `CompileOptions::arena_pool` at each run); values whose shapes depend on data
/// (NonZero, NonMaxSuppression, ...) live in storage that grows on demand and is kept between
/// runs. Thread-safety: `run` serializes concurrent calls with an internal lock (the oneDNN ops
/// own their scratch buffers); the accessors are safe from any thread.
class CompiledFunction {
 public:
  ~CompiledFunction();
  CompiledFunction(const CompiledFunction&) = delete;
  CompiledFunction& operator=(const CompiledFunction&) = delete;

  const std::string& name() const;
  size_t num_inputs() const;
  size_t num_outputs() const;
  const std::string& input_name(size_t index) const;
  const std::string& output_name(size_t index) const;
  runtime::ScalarType input_dtype(size_t index) const;
  /// The sizes the function was compiled for (empty for a shape-generic plan).
  const std::vector<int64_t>& input_sizes(size_t index) const;
  runtime::ScalarType output_dtype(size_t index) const;
  /// The output's sizes when known at compile time; empty optional when they depend on data.
  const std::optional<std::vector<int64_t>>& output_sizes(size_t index) const;
  /// Whether runs have the step computing output `index` write it straight into the caller's
  /// tensor (nothing copied), when that tensor overlaps no input or other output tensor: for
  /// outputs of a plan of known sizes that are no input, are listed once and are not placed
  /// inside another value.
  bool writes_output_directly(size_t index) const;

  /// One entry per step, in execution order.
  const std::vector<PlacementEntry>& placement() const;
  /// Bytes of the activation arena (allocated once at `specialize`, or taken from
  /// `CompileOptions::arena_pool` at each run), the oneDNN steps' scratch memory included:
  /// each step's is a buffer alive during that step only.
  uint64_t arena_bytes() const;
  /// The most scratch memory one oneDNN step needs (part of `arena_bytes`).
  uint64_t scratchpad_bytes() const;
  /// True when every value's shape was resolved at compile time (a fully static plan).
  bool is_static() const;
  /// True for a shape-generic plan (`specialize_generic`).
  bool is_generic() const;
  /// The most intra-op threads one of its steps runs on: 1 when every step's work is too small
  /// to split (then no run starts an OpenMP team), at most `CompileOptions::num_threads`. The
  /// first run on a thread starts that thread's team of this size with its members on
  /// distinct CPUs, and a run after the team has rested (1 ms or more since the thread's last
  /// run) spreads them again (`cpu::rejoin_thread_team`).
  int team_threads() const;
  /// Whether `run` takes inputs of these sizes: equal to `input_sizes` for a plan specialized
  /// for them; fitting the input types for a shape-generic plan. Errors: InvalidArgument naming
  /// the input, the shape given and the one expected.
  runtime::Status accepts(const std::vector<std::vector<int64_t>>& input_sizes) const;
  /// How many times run-time storage of data-dependent values grew (0 for a static plan).
  uint64_t num_dynamic_allocations() const;

  /// Runs the function. `inputs` follow the function's inputs; each must have the compiled
  /// dtype and sizes and be contiguous; its data is read in place, never written. Each output
  /// tensor must have the output's dtype; it is resized to the result's sizes (so a Static
  /// tensor must already have them, a Bounded one the capacity) and the result is written into
  /// it: by the step that computes it, where the plan has its sizes (a shape-generic plan: once
  /// that step sizes it) and the tensor overlaps no input or other output, else copied after
  /// the run. Errors: InvalidArgument naming the input or
  /// output, the shape or dtype given and the one expected, or a wrong count; a kernel's own error
  /// with the node named.
  runtime::Status run(runtime::Span<const runtime::Tensor* const> inputs,
                      runtime::Span<runtime::Tensor* const> outputs);

  /// Grows output `index`'s storage so it can take `sizes` (e.g. a runtime method's resize of
  /// an unbounded tensor); called before the output is resized and written.
  using OutputResizer = std::function<runtime::Status(size_t index, runtime::Span<const int64_t>)>;
  /// Same as `run`, calling `resize_output` (when set) for each output with its result's sizes
  /// first, so outputs whose sizes depend on data can be grown by their owner. Errors: as `run`,
  /// and any error of `resize_output`.
  runtime::Status run(runtime::Span<const runtime::Tensor* const> inputs,
                      runtime::Span<runtime::Tensor* const> outputs,
                      const OutputResizer& resize_output);

 private:
  friend runtime::Result<std::unique_ptr<CompiledFunction>> specialize(
      const ir::Model&, std::string_view, const std::vector<std::vector<int64_t>>&,
      const specialization::SpecializationOptions&, const CompileOptions&);
  friend runtime::Result<std::unique_ptr<CompiledFunction>> specialize_generic(
      const ir::Model&, std::string_view, const specialization::SpecializationOptions&,
      const CompileOptions&);
  explicit CompiledFunction(std::unique_ptr<CompiledFunctionImpl> impl);
  /// Resizes output `i` to `sizes` (through `resize_output` first, when set).
  runtime::Status size_output(size_t i, runtime::Span<const int64_t> sizes,
                              runtime::Span<runtime::Tensor* const> outputs,
                              const OutputResizer& resize_output) const;
  /// Points the slots of `direct_outputs` at the caller's tensors (sized first) where those
  /// overlap no input, other output or the arena, keeping each slot's own storage in
  /// `own_storage` (null where not pointed) for the caller to restore after the run.
  runtime::Status point_outputs_at_caller(runtime::Span<const runtime::Tensor* const> inputs,
                                          runtime::Span<runtime::Tensor* const> outputs,
                                          const OutputResizer& resize_output,
                                          std::vector<void*>& own_storage);

  std::unique_ptr<CompiledFunctionImpl> impl_;
  std::mutex run_mutex_;
};

/// Compiles `function` of `model` for `input_sizes` (one entry per function input, in order).
/// Symbolic dims of the inputs are bound from the sizes given and every value's shape is
/// evaluated from them; constant subgraphs (all inputs weights, or Shape/Size of a known shape)
/// are folded; Conv/MatMul/Gemm chains are fused; each step is placed on oneDNN when
/// `cpu::CpuOp` implements it for those shapes, else on the registered reference kernel.
/// Only the CPU is placed on today, so the options must allow it.
///
/// Errors: NotFound for an unknown function; InvalidArgument naming the input for a wrong
/// number of inputs, a wrong rank, a size that contradicts a static dim or an earlier binding of
/// the same symbol; NotSupported naming the options' identifier when they do not allow the CPU,
/// or naming the node for a data-dependent If (node regions are not compiled yet: export such a
/// model for the portable path); OperatorMissing naming a node no kernel implements; a
/// kernel's error, with the node named, when folding fails on invalid constants.
runtime::Result<std::unique_ptr<CompiledFunction>> specialize(
    const ir::Model& model, std::string_view function,
    const std::vector<std::vector<int64_t>>& input_sizes,
    const specialization::SpecializationOptions& options, const CompileOptions& compile = {});

/// Compiles `function` of `model` once for every input shape its input types admit: a
/// shape-generic plan, what `expect_frequent_reshapes` asks for (DESIGN.md §4), so a new shape
/// costs no compilation. Constant subgraphs are folded; each MatMul by a constant 2-D weight
/// (with its bias Add and activations fused) runs on one oneDNN primitive with run-time rows
/// (`cpu::RuntimeMatMul`); every other step runs on the reference kernels, each value in
/// storage that grows on demand and is kept between runs. Trade-off: no per-shape plan, kernel
/// or memory plan is made, and the ops other than those MatMuls run slower than on a plan
/// specialized for the shape. `run` checks each call's input shapes against the input types
/// (rank, static dims, one size per symbol); `input_sizes(i)` is empty. The model must outlive
/// the result. Errors: as `specialize`, but no shape errors (there are no shapes yet).
runtime::Result<std::unique_ptr<CompiledFunction>> specialize_generic(
    const ir::Model& model, std::string_view function,
    const specialization::SpecializationOptions& options, const CompileOptions& compile = {});

}  // namespace kiln::engine::compile
