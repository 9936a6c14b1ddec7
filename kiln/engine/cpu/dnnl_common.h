#pragma once

// Shared plumbing of the oneDNN op implementations (internal to kiln/engine/cpu).

#include <kiln/engine/cpu/cpu_op.h>
#include <kiln/runtime/core/aligned_buffer.h>

#include <oneapi/dnnl/dnnl.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace kiln::kernels {
struct ResizePlan;
struct ResizeOptions;
}  // namespace kiln::kernels

namespace kiln::engine::cpu::dnnl_impl {

using runtime::Error;
using runtime::Result;
using runtime::Status;

/// The process-wide CPU engine and an in-order stream on it for the calling thread (each
/// created on first use).
dnnl::engine& cpu_engine();
dnnl::stream& cpu_stream();

/// Sets OpenMP's thread count for the calling thread while alive (0: unchanged) and restores
/// the previous value: oneDNN sizes its parallel regions by omp_get_max_threads().
class ThreadScope {
 public:
  explicit ThreadScope(int num_threads);
  ~ThreadScope();
  ThreadScope(const ThreadScope&) = delete;
  ThreadScope& operator=(const ThreadScope&) = delete;

 private:
  int previous_ = 0;
};

/// Attribute lookups with ONNX defaults; a present attribute of the wrong type is an error.
class Attrs {
 public:
  explicit Attrs(const OpDesc& desc) : desc_(desc) {}
  Result<int64_t> get_int(std::string_view name, int64_t fallback) const;
  Result<double> get_float(std::string_view name, double fallback) const;
  Result<std::string> get_string(std::string_view name, std::string fallback) const;
  Result<std::vector<int64_t>> get_ints(std::string_view name) const;  ///< Empty when absent.

 private:
  const ir::AttributeValue* find(std::string_view name) const;
  Status wrong_type(std::string_view name, std::string_view expected) const;
  const OpDesc& desc_;
};

/// A Conv's output shape from its ONNX attributes and input shapes; fills the geometry in
/// oneDNN's terms (dilations counted from 0, the end pads that give ONNX's output size).
Result<std::vector<int64_t>> conv_geometry(const OpDesc& desc, dnnl::memory::dims& strides,
                                           dnnl::memory::dims& dilations,
                                           dnnl::memory::dims& pad_begin,
                                           dnnl::memory::dims& pad_end, int64_t& group);

/// "create op 'Conv' (oneDNN): <problem>".
Status error(const OpDesc& desc, Error code, const std::string& problem);
/// NotSupported naming both when `desc.output_sizes` holds output `index`'s sizes and they are
/// not `sizes` (what the op's attributes give); OK otherwise (see `OpDesc::output_sizes`).
Status check_planned_output(const OpDesc& desc, size_t index, const std::vector<int64_t>& sizes);
/// Checks the input count (min..max), that every present input is f32 and that required ones
/// are present.
Status check_inputs(const OpDesc& desc, size_t min_inputs, size_t max_inputs);
bool input_present(const OpDesc& desc, size_t index);
const runtime::Tensor* input_constant(const OpDesc& desc, size_t index);

dnnl::memory::dims to_dims(runtime::Span<const int64_t> sizes);
/// A plain row-major f32 descriptor (scalars become [1]).
dnnl::memory::desc plain_md(runtime::Span<const int64_t> sizes);

/// Appends `desc.post_ops` to `ops`. Residuals become binary-add post-ops of `dst_md`'s shape
/// (`use_sum` false) or sum post-ops (`use_sum` true: the residual is copied into dst before
/// the run). Returns the indices of the binary post-ops (for the execution arguments), in
/// residual order; unsupported kinds give NotSupported.
Result<std::vector<int>> append_post_ops(const OpDesc& desc, const dnnl::memory::desc& dst_md,
                                         bool use_sum, dnnl::post_ops& ops);
int num_residuals(const OpDesc& desc);

/// A memory object over caller data (re-pointed each run) or owned storage.
dnnl::memory wrap(const dnnl::memory::desc& md, const void* data);

/// The fields of `md` that define a layout, as bytes (equal bytes: equal layouts); empty for
/// a format kind other than blocked or Winograd weights (such layouts are not shared).
std::string layout_bytes(const dnnl::memory::desc& md);

/// `md` as a native layout for layout propagation (`CpuOp::NativeLayout`).
CpuOp::NativeLayout native_layout(const dnnl::memory::desc& md);

/// A conversion between a caller's plain tensor and a primitive's own layout. Planned at
/// creation; `make` builds the reorder primitive and the buffer once layout propagation has
/// settled which conversions remain, so one that a layout hand-over removes costs neither.
class Staging {
 public:
  /// `to_internal`: plain → internal (a source), else internal → plain (a result).
  /// `own_buffer` false: the conversion writes into memory given at each run (a residual
  /// written where the primitive adds it), so no buffer is made.
  Staging(dnnl::memory::desc plain, dnnl::memory::desc internal, bool to_internal,
          bool own_buffer = true);

  const dnnl::memory::desc& internal_desc() const { return internal_desc_; }
  CpuOp::NativeLayout native() const { return native_layout(internal_desc_); }
  /// Makes the reorder (once; later calls do nothing); the buffer is the op's to give
  /// (`DnnlOp::make`). Errors: Internal (oneDNN's).
  Status make();
  /// The buffer in the primitive's layout, once made (with `own_buffer`).
  const dnnl::memory& internal() const { return internal_; }

 private:
  friend class DnnlOp;
  dnnl::memory::desc plain_desc_, internal_desc_;
  bool to_internal_ = true;
  bool own_buffer_ = true;
  bool made_ = false;
  dnnl::memory plain_;     ///< Re-pointed at the caller's data each run.
  dnnl::memory internal_;  ///< In the primitive's layout: a step buffer of the op.
  dnnl::reorder reorder_;
};

/// Memory in layout `target` holding the constant input `input`, `source` (in layout `source_md`),
/// reordered once: through `desc.packed` when set (shared with other ops, or adopted from a
/// compiled artifact), else into storage the returned memory owns. Errors: Internal when the
/// reorder fails; InvalidExternalData when held bytes do not fit `target`.
Result<dnnl::memory> pack_constant(const OpDesc& desc, size_t input,
                                   const dnnl::memory::desc& source_md, const void* source,
                                   const dnnl::memory::desc& target);

/// Primitive state shared by the implementations: the primitive, its arguments (re-pointed
/// each run), the scratchpad and step buffers, and output types.
class DnnlOp : public CpuOp {
 public:
  const std::vector<TensorDesc>& outputs() const override { return outputs_; }
  std::string describe() const override { return describe_; }
  /// The scratchpad and every step buffer, each rounded up to 64 bytes.
  uint64_t scratchpad_bytes() const override;
  /// Places the scratchpad, then each step buffer, one after another in `data`.
  void use_scratchpad(void* data) override;

 protected:
  /// Points `memory` at `data` (no allocation).
  static void point(dnnl::memory& memory, const void* data) {
    memory.set_data_handle(const_cast<void*>(data));
  }
  /// Sets the user scratchpad from `pd` (allocated once here) into `args_`.
  void hold_scratchpad(const dnnl::primitive_desc_base& pd);
  /// Runs `primitive` with `args` on the stream and waits; converts oneDNN errors.
  Status execute(const dnnl::primitive& primitive,
                 const std::unordered_map<int, dnnl::memory>& args);
  /// A buffer in layout `md` that the op needs only while it runs (a conversion's, a staged
  /// result): owned storage until `use_scratchpad` places it in the caller's, where every copy
  /// of the returned handle then points. Errors: MemoryAllocationFailed.
  Result<dnnl::memory> step_buffer(const dnnl::memory::desc& md);
  /// Makes `stage` (`Staging::make`) with this op's threads (oneDNN may start a parallel
  /// region while creating a reorder), and its buffer a step buffer.
  Status make(Staging& stage);
  /// Converts the caller's plain tensor at `plain` into `stage`'s buffer, or (a result) the
  /// buffer into it; with `other`, from or into that memory instead of the buffer. Makes
  /// `stage` first if `finish` has not.
  Status convert(Staging& stage, const void* plain, const dnnl::memory* other = nullptr);
  Status check_run_counts(runtime::Span<const runtime::Tensor*> inputs,
                          runtime::Span<runtime::Tensor*> outputs) const;

  std::string op_;
  int num_threads_ = 0;
  size_t num_inputs_ = 0;
  std::vector<TensorDesc> outputs_;
  std::string describe_;
  dnnl::memory scratchpad_;
  std::unordered_map<int, dnnl::memory> args_;

 private:
  struct StepBuffer {
    dnnl::memory memory;
    runtime::AlignedBuffer owned;  ///< Null once placed by `use_scratchpad`.
  };
  std::vector<StepBuffer> step_buffers_;
};

/// An op of one primitive whose arguments map to the op's inputs and its one output.
class SimpleOp final : public DnnlOp {
 public:
  /// Takes `primitive` (built from `pd`) and the output type; holds the scratchpad.
  SimpleOp(const OpDesc& desc, dnnl::primitive primitive, const dnnl::primitive_desc_base& pd,
           std::vector<int64_t> output_sizes, const dnnl::memory::desc& dst_md);
  /// Binds input `index` to the primitive argument `arg`: a copy of its constant value when
  /// `desc` has one, else the run-time tensor.
  void bind_input(const OpDesc& desc, size_t index, int arg, const dnnl::memory::desc& md);
  runtime::Status run(runtime::Span<const runtime::Tensor*> inputs,
                      runtime::Span<runtime::Tensor*> outputs) override;

 private:
  dnnl::primitive primitive_;
  std::vector<std::pair<size_t, int>> bindings_;  ///< Run-time input index → argument.
};

/// The oneDNN implementation name of `pd` ("jit:avx512_core") and a memory format summary.
std::string describe_pd(const dnnl::primitive_desc_base& pd);
std::string format_of(const dnnl::memory::desc& md);

/// The primitive attribute every op starts from: user-managed scratchpad.
dnnl::primitive_attr base_attr();

// The factories, one per file.
Result<std::unique_ptr<CpuOp>> create_matmul(const OpDesc& desc);
Result<std::unique_ptr<CpuOp>> create_gemm(const OpDesc& desc);
Result<std::unique_ptr<CpuOp>> create_conv(const OpDesc& desc);
/// A 1-D Conv of at most 4 input channels and at least 16 taps (no groups, dilations or
/// residual; constant W and B) as gathered windows times W (dnnl_conv_patches.cpp), given its
/// stride, leading pad and output sizes; null for any other Conv.
Result<std::unique_ptr<CpuOp>> create_conv_patches(const OpDesc& desc, int64_t stride,
                                                   int64_t pad_begin,
                                                   const std::vector<int64_t>& out);
Result<std::unique_ptr<CpuOp>> create_deconv(const OpDesc& desc);
/// ConvTranspose whose kernel equals its strides (no pads, dilations or groups; constant W and
/// B; no residual) as a matmul and a scatter (dnnl_deconv_patches.cpp); null for any other
/// ConvTranspose. Inputs already checked by create_deconv.
Result<std::unique_ptr<CpuOp>> create_deconv_patches(const OpDesc& desc);
/// ConvTranspose whose kernel equals its strides (no pads, dilations or groups; constant W and
/// B; the loops' post-ops, no residual) from a producer's nChw16c on kiln's own 1x1 Conv loops
/// (deconv_loops.cpp), scattered into NCHW or nhwc; NotSupported for any other.
Result<std::unique_ptr<CpuOp>> create_deconv_loops(const OpDesc& desc);
/// Whether a ConvTranspose (inputs checked) is one of patches: a 2-D W whose kernel equals the
/// strides, with no pads, dilations, groups, output padding or output shape. Errors: those of
/// reading its attributes.
Result<bool> kernel_equals_strides(const OpDesc& desc);
/// `md` (4-D [N, C, H, W]) as [N, H * W, C] when each pixel's channels are one contiguous row
/// (nhwc, or nChw{8,16}c with all channels in one block); nullopt otherwise. The rows are
/// `strides[1]` floats apart.
std::optional<dnnl::memory::desc> pixel_rows(const dnnl::memory::desc& md);
/// ConvTranspose whose kernel equals its strides into at most 16 values per input pixel
/// (M x kH x kW; at most 256 input channels; constant W and B; the loops' post-ops) on kiln's
/// own loops over input pixels (narrow_deconv.cpp), reading plain NCHW or the producer's pixel
/// rows natively; NotSupported for any other ConvTranspose or one of little work.
Result<std::unique_ptr<CpuOp>> create_narrow_deconv(const OpDesc& desc);
Result<std::unique_ptr<CpuOp>> create_resize(const OpDesc& desc);
/// A 4-D Resize of mode nearest (its `plan` and `options` from the reference kernel's
/// resize_plan) on kiln's own loops over an index map (resize_loops.cpp), plain or, when
/// `blocked`, reading and writing the producer's nChw16c natively; NotSupported for any other
/// Resize.
Result<std::unique_ptr<CpuOp>> create_nearest_resize(const OpDesc& desc,
                                                     const kernels::ResizePlan& plan,
                                                     const kernels::ResizeOptions& options,
                                                     bool blocked);
/// The same for a 4-D Resize of mode linear or cubic (antialias and exclude_outside too): each
/// output pixel sums the input pixels the reference kernel's taps name
/// (kernels::resize_axis_taps); NotSupported for other modes and tf_crop_and_resize.
Result<std::unique_ptr<CpuOp>> create_interpolated_resize(const OpDesc& desc,
                                                          const kernels::ResizePlan& plan,
                                                          const kernels::ResizeOptions& options,
                                                          bool blocked);
Result<std::unique_ptr<CpuOp>> create_pool(const OpDesc& desc);
Result<std::unique_ptr<CpuOp>> create_concat(const OpDesc& desc);
Result<std::unique_ptr<CpuOp>> create_softmax(const OpDesc& desc);
Result<std::unique_ptr<CpuOp>> create_layer_norm(const OpDesc& desc);
Result<std::unique_ptr<CpuOp>> create_batch_norm(const OpDesc& desc);
Result<std::unique_ptr<CpuOp>> create_unary(const OpDesc& desc);
Result<std::unique_ptr<CpuOp>> create_binary(const OpDesc& desc);
Result<std::unique_ptr<CpuOp>> create_rnn(const OpDesc& desc);  ///< LSTM, GRU.
/// A bidirectional LSTM or GRU (ONNX layout 0, inputs validated) as one op per direction, run
/// side by side on two threads of one each (dnnl_rnn_directions.cpp).
Result<std::unique_ptr<CpuOp>> create_rnn_directions(const OpDesc& desc);
/// An LSTM's sizes, as dnnl_rnn.cpp validated them.
struct LstmShape {
  int64_t seq = 0, batch = 0, input = 0, hidden = 0, dirs = 1, layout = 0;
};
/// An LSTM of a small batch (validated: default activations, no clip, input_forget, P or
/// sequence_lens; constant W and R) on a oneDNN matmul for the input projection and kiln's
/// own cell (small_batch_lstm.cpp).
/// Conv (one group, 1-D or 2-D) and MatMul or Gemm by a constant B, of at most 2^18
/// multiply-adds, on kiln's own loops: no code generated at creation. NotSupported outside
/// those bounds (the caller builds the oneDNN op instead).
Result<std::unique_ptr<CpuOp>> create_small_conv(const OpDesc& desc);
Result<std::unique_ptr<CpuOp>> create_small_matmul(const OpDesc& desc);
/// A MatMul by a constant 2-D B, or a Gemm (transA 0, C a column bias), of any size on
/// `avx2_gemm` (B packed once into panels; every post-op and one residual; the op's threads).
/// NotSupported for anything else, or on a CPU without AVX2 and FMA.
Result<std::unique_ptr<CpuOp>> create_avx2_matmul(const OpDesc& desc);
/// The same on AVX-512 (alpha 1): B packed once into oneDNN's blocked layout
/// (`blocked_b_md`, the packing of the model's other plans and of oneDNN's blocked MatMul), run
/// on `avx512_gemm_blocked` (up to 4 rows: `gemv_blocked`). No code is generated at creation,
/// which oneDNN's primitive does per shape (0.1-0.5 ms each at a first run). NotSupported for
/// anything else, or on a CPU without AVX-512F.
Result<std::unique_ptr<CpuOp>> create_avx512_matmul(const OpDesc& desc);
/// A 2-D Conv of at most 8 output channels (stride and dilation 1, one group, constant W and B)
/// on kiln's own loops over output pixels (narrow_conv.cpp); NotSupported for any other Conv.
Result<std::unique_ptr<CpuOp>> create_narrow_conv(const OpDesc& desc);
/// A 2-D Conv of one group and at least 16 input channels in ActivationLayout::Blocked on kiln's
/// own loops over nChw16c (blocked_conv.cpp, conv_loops.cpp), with the loops' post-ops and one
/// residual: a 1x1 Conv of any strides and no pads, or a Conv of taps (any kernel and pads,
/// horizontal stride 1 or 2, no dilation) not given to Winograd's kernels (OpDesc::winograd);
/// NotSupported for any other Conv.
Result<std::unique_ptr<CpuOp>> create_blocked_conv(const OpDesc& desc);
/// A 2-D Conv of one group over an image of 1-15 channels in ActivationLayout::Blocked (any
/// kernel and pads, horizontal stride 1 or 2, no dilation) on kiln's own loops (image_conv.cpp):
/// the image read plain, the result (and one residual) nChw16c, with the loops' post-ops;
/// NotSupported for any other Conv.
Result<std::unique_ptr<CpuOp>> create_image_conv(const OpDesc& desc);
/// A depthwise 2-D Conv (a group per channel, one output channel each) in
/// ActivationLayout::Blocked (any kernel and pads, horizontal stride 1 or 2, no dilation) on
/// kiln's own loops over nChw16c (depthwise_conv.cpp), with the loops' post-ops and one residual;
/// NotSupported for any other Conv.
Result<std::unique_ptr<CpuOp>> create_depthwise_conv(const OpDesc& desc);
/// The output tiles of kiln's Winograd loops: 3 x 3 or 4 x 4 pixels, or the loops' choice.
enum class WinogradTile { Auto, F3x3, F4x4 };
/// A 3x3 stride-1 Conv of one group and at least 16 input channels in ActivationLayout::Blocked
/// given to Winograd's kernels (OpDesc::winograd), on kiln's own F(3x3, 3x3) or F(4x4, 3x3)
/// loops over nChw16c (winograd_conv.cpp), with the loops' post-ops and one residual;
/// NotSupported for any other.
Result<std::unique_ptr<CpuOp>> create_winograd_conv(const OpDesc& desc,
                                                    WinogradTile tile = WinogradTile::Auto);
/// MaxPool and AveragePool (2-D, f32) on kiln's own loops (pool_loops.cpp): small inputs in a
/// producer's nChw16c or nhwc, read and written natively, and with `plain` any other input
/// (plain NCHW); NotSupported for any other pool (oneDNN's op takes it).
Result<std::unique_ptr<CpuOp>> create_pool_loops(const OpDesc& desc, bool plain);
/// Where (bool condition, f32 X and Y, any broadcast) on kiln's own loops (where_op.cpp).
Result<std::unique_ptr<CpuOp>> create_where(const OpDesc& desc);
/// Transpose (any dtype of 1, 2, 4 or 8 bytes) on kiln's own loops (transpose_op.cpp): rows
/// copied, or 16 x 16 tiles where the innermost dimension moves.
Result<std::unique_ptr<CpuOp>> create_transpose(const OpDesc& desc);
/// Split (any dtype, known output sizes along any axis) on kiln's own loops (split_op.cpp):
/// each output's rows copied out of the input's.
Result<std::unique_ptr<CpuOp>> create_split(const OpDesc& desc);
/// RMSNormalization (f32, constant f32 scale), InstanceNormalization and GroupNormalization
/// (f32, constant f32 scale and B), LayerNormalization (constant scale and optional B, no
/// post-ops), Softmax and LogSoftmax (the last axis, no post-ops) on RuntimeRows' loops
/// (row_norm_op.cpp); NotSupported for anything else or without kiln's vector loops.
Result<std::unique_ptr<CpuOp>> create_row_norm(const OpDesc& desc);

/// Small products on kiln's loops (small_ops.cpp). B [K, N] as panels: 16 columns stored
/// together row after row, ceil(N / 16) panels of K x 16 floats (`panel_floats`), the last one
/// zero-padded. `pack_panels` reads B's element (r, j) at b[r * row_stride + j * col_stride],
/// times `scale`. `small_gemm`: C [M, N] (row stride ldc) = A [M, K] (row stride lda) x B, plus
/// `col_bias` [N] when not null.
size_t panel_floats(int64_t k, int64_t n);
/// `count` floats made by `fill` from constant input `input` of `desc` (checked first when the
/// desc asks): in the shared store under `layout` (kiln's own packings) when there is one,
/// else in `own`. Errors: those of the check and of the store.
Result<const float*> pack_floats(const OpDesc& desc, size_t input, const std::string& layout,
                                 size_t count, const std::function<void(float*)>& fill,
                                 std::vector<float>& own);
/// The constant B of input `input` of `desc` ([K, N], or with `trans_b` [N, K]) times `alpha`,
/// packed into panels (`pack_panels`) through `desc.packed` (one copy per model whoever asks),
/// or into `own` when it is null. Errors: those of `desc.verify_constant`.
Result<const float*> pack_matmul_panels(const OpDesc& desc, size_t input, int64_t k, int64_t n,
                                        bool trans_b, double alpha, std::vector<float>& own);
void pack_panels(const float* b, int64_t row_stride, int64_t col_stride, int64_t k, int64_t n,
                 float scale, float* to);
void small_gemm(const float* a, int64_t lda, int64_t m, int64_t k, const float* panels, int64_t n,
                float* c, int64_t ldc, const float* col_bias);

Result<std::unique_ptr<CpuOp>> create_small_batch_lstm(const OpDesc& desc, const LstmShape& shape);

}  // namespace kiln::engine::cpu::dnnl_impl
