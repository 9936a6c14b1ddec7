#pragma once

// The run and layout logic shared by ops of one convolution-like primitive (Conv on
// convolution_forward, ConvTranspose on deconvolution_forward): a source, weights packed at
// creation, a bias (constant or not), eltwise post-ops and one residual sum; with
// ActivationLayout::Preferred the source, result and residual are converted from and to plain
// tensors through buffers the op holds, unless layout propagation hands them over natively
// (internal to kiln/engine/cpu).

#include <kiln/engine/cpu/dnnl_common.h>

#include <optional>

namespace kiln::engine::cpu::dnnl_impl {

class ConvLikeOp : public DnnlOp {
 public:
  /// Converts the source in (when staged), writes the residual where the primitive adds it,
  /// runs the primitive and converts the result out (when staged). Errors: InvalidArgument
  /// for a null run-time input; oneDNN's errors.
  Status run(runtime::Span<const runtime::Tensor*> inputs,
             runtime::Span<runtime::Tensor*> outputs) override;
  /// Native layouts: input 0 and the residual when staged, the output when staged.
  std::optional<NativeLayout> native_input_layout(size_t index) const override;
  std::optional<NativeLayout> native_output_layout(size_t index) const override;
  Status use_native_input(size_t index) override;
  Status use_native_output(size_t index) override;
  /// Makes the conversions left after the layout hand-overs and binds the primitive's source
  /// and destination to their buffers.
  Status finish() override;

 protected:
  /// Plans conversions of the source, the result and (with `residuals`) the residual where
  /// `pd`'s layouts differ from the plain ones, and records the residual's input index.
  void stage(const dnnl::memory::desc& src_plain, const dnnl::memory::desc& src_made,
             const dnnl::memory::desc& dst_plain, const dnnl::memory::desc& dst_made, int residuals,
             size_t num_inputs);
  /// The bias (input 2, plain layout `md`): a copy of its constant value, or the run-time one.
  void bind_bias(const OpDesc& desc, const dnnl::memory::desc& md);

  dnnl::primitive primitive_;
  std::optional<Staging> src_stage_, dst_stage_, residual_stage_;
  int bias_index_ = -1;
  int residual_index_ = -1;
  bool finished_ = false;
  dnnl::memory weights_, bias_;
};

}  // namespace kiln::engine::cpu::dnnl_impl
