#pragma once

#include <kiln/engine/cpu/packed_constants.h>
#include <kiln/engine/ir/graph.h>
#include <kiln/runtime/core/result.h>
#include <kiln/runtime/core/scalar_type.h>
#include <kiln/runtime/core/span.h>
#include <kiln/runtime/core/status.h>
#include <kiln/runtime/core/tensor.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

/// The CPU device's op implementations (DESIGN.md §4): one object per op and concrete shape,
/// built once (primitives created, constant weights pre-packed) and then run many times without
/// allocating. `CpuOp` is the seam between the engine and a kernel provider: today oneDNN
/// (x86-64); an XNNPACK provider (ARM64) can implement the same ops behind it.
namespace kiln::engine::cpu {

/// A concrete tensor type: dtype and static sizes.
struct TensorDesc {
  runtime::ScalarType dtype = runtime::ScalarType::Float32;
  std::vector<int64_t> sizes;
};

/// An operation fused onto an op's result, applied in the order listed.
enum class PostOpKind {
  Relu,     ///< max(x, 0).
  Clip,     ///< min(max(x, alpha), beta); Relu6 is Clip(0, 6).
  Sigmoid,  ///< 1 / (1 + exp(-x)).
  Tanh,     ///< tanh(x).
  Gelu,     ///< x / 2 * (1 + erf(x / sqrt(2))); with alpha = 1, the tanh approximation.
  /// x + residual, where the residual is an extra input of the output's shape (appended after
  /// the op's own inputs, one per residual post-op in order). MatMul and Conv only.
  AddResidual,
  /// alpha * x + beta: a Mul by a constant scalar (beta 0).
  Linear,
  /// x * sigmoid(x) (SiLU, Swish): a Sigmoid of x and the Mul of x by it.
  Swish,
};

/// One fused post-op; `alpha` and `beta` are Clip's bounds (Gelu: alpha 1 selects tanh).
struct PostOp {
  PostOpKind kind = PostOpKind::Relu;
  float alpha = 0.0f;
  float beta = 0.0f;
};

/// How Conv keeps its activations.
enum class ActivationLayout {
  /// The provider chooses (oneDNN: blocked nChw16c/nChw8c or nhwc, whichever is fastest); run
  /// reorders the plain NCHW input into it and the result back, through buffers the op holds.
  Preferred,
  /// Plain NCHW throughout: no reorders, but some kernels (depthwise) are much slower on it.
  Plain,
  /// Blocked nChw16c (channels in blocks of 16) for the source and the result, the layout
  /// oneDNN's Winograd kernels need; a source of fewer than 16 channels (an image) is read
  /// plain. Falls back to Preferred where oneDNN has no optimized kernel for it. Used for every
  /// Conv of a function that has Winograd Convs, so that values pass between them unconverted.
  Blocked,
};

/// Everything an op implementation is built from. Copied by `create`; nothing must outlive it
/// except the data of `constants`, which is read (and packed) during `create` only.
struct OpDesc {
  std::string op;                         ///< ONNX op type: "Conv", "MatMul", "Relu", ...
  std::vector<ir::Attribute> attributes;  ///< ONNX attributes, ONNX defaults when absent.
  /// The op's inputs in ONNX order (an absent optional input has an empty dtype-only entry and
  /// a rank of -1 is not used: pass `present = false` via `inputs_present`), followed by one
  /// input per AddResidual post-op.
  std::vector<TensorDesc> inputs;
  /// Same length as `inputs`, or empty: false marks an absent optional input. Empty: all present.
  std::vector<bool> inputs_present;
  /// Same length as `inputs`, or empty: a non-null entry is that input's constant value (a
  /// weight), packed at creation; at run time that input's pointer is ignored and may be null.
  std::vector<const runtime::Tensor*> constants;
  /// Same length as `inputs`, or empty: a non-zero entry is the content hash of that constant
  /// (dtype, sizes and bytes, e.g. `ir::Weight::content_hash`), which names it in `packed`
  /// without hashing its bytes again. Zero or absent: the bytes are hashed when packed.
  std::vector<uint64_t> constant_hashes;
  std::vector<PostOp> post_ops;  ///< Fused after the op (MatMul, Gemm, Conv).
  int num_outputs = 1;           ///< Outputs asked for; extra optional outputs are NotSupported.
  /// The sizes the plan holds for each output, or empty (unknown). An op whose attributes give
  /// an output other sizes (a package's attribute its library reads otherwise than the
  /// reference kernel does) declines before making anything: oneDNN allocates by the sizes it
  /// is given when it makes a primitive (512 MB for a Conv whose pads gave a width of 4 million).
  std::vector<std::vector<int64_t>> output_sizes;
  /// Intra-op threads for create and run; 0 = the library's default (all cores). Takes effect
  /// for this op only (the caller's OpenMP setting is restored after each call). An upper
  /// bound: ops of little work run on one thread (`op_threads`), and LSTM and GRU of batches
  /// of 1-2 rows use one thread per direction, since splitting such work over more only adds
  /// synchronization.
  int num_threads = 0;
  ActivationLayout activation_layout = ActivationLayout::Preferred;  ///< Conv only.
  /// Conv only, with ActivationLayout::Blocked: a 2-D 3x3 Conv of stride 1, no dilation and no
  /// groups runs on a Winograd algorithm: kiln's loops (F(4x4, 3x3) or F(3x3, 3x3),
  /// `dnnl_impl::create_winograd_conv`) over images of at least 12 x 12 pixels where kiln's
  /// loops run (`small_ops_own_loops`, AVX-512), else oneDNN's Winograd kernel (F(2x2,3x3) or
  /// F(4x4,3x3)) when it has one for the shapes, else the direct one. Trade-off: 2-4x fewer
  /// multiplications on such Convs (1.2-2.4x faster on AVX-512) for results that differ from
  /// the direct convolution by more rounding (relative differences around 1e-5 instead of
  /// 1e-6), and weights 16/9 to 4 times as large. Default: false.
  bool winograd = false;
  /// With `winograd` on kiln's loops: F(4x4, 3x3) tiles whatever the image size (which else
  /// picks F(3x3, 3x3) for a few, 13 x 13 and 14 x 14 among them), so that a function meeting
  /// many image sizes packs each weight once (a shape-generic plan's Convs). Default: false.
  bool winograd_one_tile = false;
  /// Ops whose kernels oneDNN generates for each shape (0.1-0.5 ms each) run on kiln's loops,
  /// which generate none, wherever those take them, at some cost per run: a function that
  /// meets many shapes pays the generation at each. Compiled functions set it when expecting
  /// frequent reshapes. Default: false. It moves:
  /// - a Conv given to `winograd` over an image of fewer than 12 x 12 pixels to kiln's Winograd
  ///   loops too (larger ones run there anyway): 1.0-3 x the time of oneDNN's kernels there;
  /// - MaxPool and AveragePool in a producer's nChw16c or nhwc, of any size, to kiln's pool
  ///   loops (0.6-1.0 x oneDNN's speed on large maps, `kiln_pool_bench`);
  /// - a ConvTranspose whose kernel equals its strides, from a producer's nChw16c, to kiln's
  ///   1x1 Conv loops and a scatter (`dnnl_impl::create_deconv_loops`; 0.8-0.9 x the speed of
  ///   oneDNN's matmul of the patches).
  bool avoid_generated_code = false;
  /// MatMul only: input 1 is given as the transpose of B (its last two axes swapped, plain),
  /// not B; `inputs[1]` still has B's sizes. Only oneDNN's MatMul takes it (a B computed at
  /// run time); others decline. Default: false.
  bool b_transposed = false;
  /// Same length as `inputs`, or empty: a non-empty entry is the native layout
  /// (`CpuOp::NativeLayout::id`) the input's producer computes it in. An op that can read that
  /// layout reports it as its `native_input_layout`, so layout propagation can hand the value
  /// over without converting it; the op still accepts the plain tensor until told otherwise.
  std::vector<std::string> input_layouts;
  /// Where constant weights are packed (shared with other ops, or adopted from a compiled
  /// artifact); must outlive the op. Null: the op packs into storage of its own.
  PackedConstants* packed = nullptr;
  /// When set, called with an input index before the bytes of that constant are read to pack
  /// them (`pack_constant`); an error fails the creation. The caller checks every other
  /// constant before `create`. Empty: the constants' bytes are trusted.
  std::function<runtime::Status(size_t input)> verify_constant;
  /// Ops of little work skip oneDNN, whose primitives generate code at creation (0.1-1 ms
  /// each): a Conv, MatMul or Gemm of at most 2^18 multiply-adds runs on kiln's own loops, and
  /// an element-wise, pooling, normalization or Softmax op of under 0.5 us of work is declined
  /// (NotSupported) for the reference kernel. False: oneDNN whatever the size (tests of the
  /// oneDNN ops on small shapes).
  bool small_ops_own_loops = true;
  /// The op is rebuilt for a plan that a cache entry records, made by this engine with this
  /// oneDNN on a CPU of these features (all in the entry's key): an implementation that is
  /// taken only once proved against the reference at creation (a Resize on oneDNN's
  /// resampling, whose index mapping is checked against ONNX's) is taken unproved, since the
  /// plan the proof allowed is recorded in the entry (its fingerprint names each step's
  /// implementation). The caller must compare the plan built with the entry's and rebuild with
  /// this false when they differ. Default: false.
  bool proofs_recorded = false;
};

/// The intra-op threads `desc`'s op runs with: `desc.num_threads`, or 1 when its estimated
/// work (FLOPs or elements touched, from the shapes) is too small to pay for starting and
/// joining more threads. Never more than `desc.num_threads` when that is positive. `create`
/// applies it (LSTM and GRU keep their own rule).
int op_threads(const OpDesc& desc);

/// Whether kernel selection takes kiln's own vector loops (1x1, narrow and small Convs, small
/// MatMuls, pools, same-shape Add and Mul, row normalizations, small-batch LSTMs) on this CPU.
/// They are written for vectors of 16 floats, which GCC keeps in registers only where the CPU
/// has AVX-512: without it (an AVX2 CPU), its code moves every vector through the stack, and
/// the pointwise Convs ran at 1.6 GFLOP/s against oneDNN's 40-50 there. False: those ops go to
/// oneDNN and the reference kernels. Loops created directly (their tests) run on any CPU.
bool own_vector_loops();
/// Whether a GELU fused after a MatMul, Gemm or Conv runs as fast as a GELU step of its own
/// on this CPU (where it has AVX-512). oneDNN 2.6's AVX2 kernels for those (gemm:jit) apply a
/// fused GELU element by element outside their generated code: GPT prefill's fc1 MatMuls
/// (128 x 512 x 2048) took 8.1 ms with it against 4.5 for fc2's equal work, where a GELU step
/// (oneDNN's jit:avx2 eltwise) takes 0.07. kiln's AVX2 MatMul, which now takes those MatMuls,
/// is no faster with it fused (its epilogue computes in 16-float vectors: fc1 0.27 ms against
/// fc2's 0.195, where the GELU step takes 0.05). False: fusion leaves a GELU as its own step.
bool gelu_post_op_fast();
/// Whether kernel selection takes kiln's AVX2 MatMul (`avx2_gemm`) for MatMuls and Gemms by a
/// constant B (of any rows, a decoder's single one too): on a CPU with AVX2 and FMA but not
/// AVX-512, where oneDNN 2.6 has no blocked matmul (its gemm:jit repacks B at every call, at about
/// half the FMA peak). With AVX-512, oneDNN's brgemm kernels are the faster ones.
bool avx2_own_gemm();
/// Whether a shape-generic plan's MatMuls by a constant B (`RuntimeMatMul`) run on kiln's
/// AVX-512 MatMul (`avx512_gemm`, where the CPU has AVX-512): oneDNN's matmul of run-time rows
/// there is gemm:jit, whose kernel set is generated at a process's first call (30-50 ms of a
/// shape-generic load), while kiln's loops are compiled ahead of time.
bool avx512_own_runtime_gemm();
/// Whether a MatMul or Gemm of a few rows streaming a large constant B (a decoder's token)
/// reads B in oneDNN's blocked layout (`blocked_b_md`, which oneDNN's blocked matmul packs on
/// AVX-512), so that it and a MatMul of many rows by the same weight (a prefill of the same
/// model) share one packing: GPT-large's prefill and decode held two copies of their 88 MiB of
/// packed weights before. False (no AVX-512): kiln's panels, which kiln's AVX2 MatMul packs.
bool streaming_b_blocked();
/// Whether this CPU has AVX-512 as oneDNN may use it: the five choices above follow it, not
/// the CPU alone, so with ONEDNN_MAX_CPU_ISA=AVX2 on an AVX-512 CPU kernel selection plans as
/// on an AVX2 CPU (how those plans are tested there). `set_avx512_for_testing` never changes it.
bool cpu_has_avx512();
/// Tests: the five choices are made as if the CPU had AVX-512 (`has`) until called again
/// (nullopt: the CPU decides).
void set_avx512_for_testing(std::optional<bool> has);

/// Resize ops proved against the reference kernel in this process so far (a Resize takes
/// oneDNN's resampling only once proved; `OpDesc::proofs_recorded` skips it). For tests.
uint64_t resize_proofs_run();

/// Single-thread microseconds of `desc`'s work at the optimized kernels' typical speed
/// (estimated from the shapes), or a negative value when unknown.
double estimated_us(const OpDesc& desc);

/// A compiled op for one set of input shapes. Lifecycle: `create` (may allocate, JIT and pack
/// weights) → layout hand-overs → `finish` → `run` any number of times (no allocation).
/// Thread-safety: `run` uses buffers the op owns, so one op runs on one thread at a time; distinct
/// ops may run concurrently.
class CpuOp {
 public:
  virtual ~CpuOp() = default;

  /// Builds the op for `desc` with the best provider available (oneDNN on x86-64). Errors:
  /// NotSupported for an op, dtype, attribute value or layout no provider handles (the message
  /// names it); InvalidArgument for inconsistent shapes or attributes; Internal when the
  /// provider fails unexpectedly.
  static runtime::Result<std::unique_ptr<CpuOp>> create(const OpDesc& desc);

  /// The outputs' types, fixed at creation.
  virtual const std::vector<TensorDesc>& outputs() const = 0;

  /// Runs the op. `inputs` follow `OpDesc::inputs` (entries of constant or absent inputs may be
  /// null); `outputs` are contiguous row-major tensors of `outputs()`' types. Not validated
  /// beyond counts (validated at creation, DESIGN.md §6). Errors: InvalidArgument for a wrong
  /// number of tensors or a null required one; Internal if the provider fails.
  virtual runtime::Status run(runtime::Span<const runtime::Tensor*> inputs,
                              runtime::Span<runtime::Tensor*> outputs) = 0;

  /// The implementation chosen, for logs and benchmarks: e.g. "oneDNN jit:avx512_core
  /// src:nChw16c wei:OIhw16i16o".
  virtual std::string describe() const = 0;

  /// Whose code runs the op: "onednn" (oneDNN's primitives, the default) or "kiln" (loops of
  /// kiln's own, compiled ahead of time). Placement reports it as the device "cpu:<provider>".
  virtual std::string provider() const { return "onednn"; }

  /// The most OpenMP threads a run uses (0: OpenMP's count); 1: a run starts no parallel
  /// region. By default the threads `create` built the op for (`op_threads`); ops that choose
  /// their own split (small-batch LSTMs and GRUs) say theirs.
  virtual int run_threads() const { return run_threads_; }

  /// Bytes of scratch memory the op uses only while it runs (oneDNN's scratchpad, and the
  /// buffers of the layout conversions `finish` left) and can take from storage shared with
  /// other ops (`use_scratchpad`); 0 when it needs none or keeps its own (e.g. it runs parts
  /// side by side). Complete once `finish` has run.
  virtual uint64_t scratchpad_bytes() const { return 0; }
  /// From now on the op uses `data` (at least `scratchpad_bytes()` bytes, 64-byte aligned,
  /// valid while the op lives) as its scratch memory and releases its own. Nothing is kept in
  /// it between runs, and no run relies on what it holds: the caller may write anything there
  /// between this op's runs, and never runs two ops sharing `data` at once (the steps of a
  /// compiled function run one by one).
  virtual void use_scratchpad(void* /*data*/) {}

  /// A provider's own layout of a tensor (e.g. oneDNN's blocked nChw16c): equal `id`s are
  /// the same layout; `bytes` is the storage it needs (padding included, so it may exceed the
  /// plain size).
  struct NativeLayout {
    std::string id;
    uint64_t bytes = 0;
  };
  /// The layout the op converts input `index` into before computing (reading the plain
  /// tensor), or nullopt when it reads the plain tensor directly.
  virtual std::optional<NativeLayout> native_input_layout(size_t /*index*/) const {
    return std::nullopt;
  }
  /// The layout the op computes output `index` in before converting it to plain, or nullopt.
  virtual std::optional<NativeLayout> native_output_layout(size_t /*index*/) const {
    return std::nullopt;
  }
  /// When the op only copies its inputs, whole and in their current layouts, into its output
  /// (a Concat of contiguous pieces), the byte offset of each input within the output: a
  /// caller may then place each input there, and the op skips the copy of an input found in
  /// place. nullopt otherwise (the default).
  virtual std::optional<std::vector<uint64_t>> input_offsets_in_output() const {
    return std::nullopt;
  }
  /// From now on, input `index` is given in `native_input_layout(index)` (no conversion), and
  /// its tensor's data is that layout's bytes. Layout propagation (engine/compile) uses it
  /// between ops that agree on a layout. Errors: NotSupported when the op has no such layout.
  virtual runtime::Status use_native_input(size_t index);
  /// From now on, output `index` is written in `native_output_layout(index)`. Errors: as
  /// `use_native_input`.
  virtual runtime::Status use_native_output(size_t index);

  /// Makes what the layouts settled so far still need (oneDNN: the reorders and buffers that
  /// convert plain inputs and outputs the op computes natively), so that `run` allocates
  /// nothing. Call it after the last `use_native_input` / `use_native_output`; conversions a
  /// hand-over removes are then never made. `run` finishes an op not finished yet (allocating
  /// in that first run). Errors: the provider's, e.g. out of memory.
  virtual runtime::Status finish() { return runtime::Status(); }

 private:
  int run_threads_ = 0;  ///< Set by `create`.
};

/// The native layouts in which a shape-generic plan hands 4-D f32 values over between the ops
/// it makes for each shape (`compile::ShapedOp`): oneDNN's blocked nChw16c (aBcd16b: channels
/// padded to 16, padding lanes zero; kiln's Conv, pool and Resize loops) and nhwc (kiln's
/// ConvTranspose loops' output).
enum class HandOver { Blocked16, Nhwc };
/// The `CpuOp::NativeLayout` (the id ops compare, the bytes) of a 4-D f32 tensor of plain NCHW
/// `sizes` in `layout`; nullopt for another rank.
std::optional<CpuOp::NativeLayout> hand_over_layout(HandOver layout,
                                                    const std::vector<int64_t>& sizes);
/// Writes the plain NCHW tensor of `sizes` (4-D f32) from its bytes in `layout`.
void hand_over_to_plain(HandOver layout, const float* from, float* plain,
                        const std::vector<int64_t>& sizes);

/// The kernel provider, its version and the instruction set it generates code for, e.g.
/// "oneDNN 2.6.3 (hash) AVX2": part of the engine version that cache keys record, since packed
/// layouts and kernels change with each (ONEDNN_MAX_CPU_ISA limits the set, see
/// `own_vector_loops`).
std::string provider_version();

}  // namespace kiln::engine::cpu
