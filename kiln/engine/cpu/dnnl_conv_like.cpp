#include <kiln/engine/cpu/dnnl_conv_like.h>

#include <cstring>

namespace kiln::engine::cpu::dnnl_impl {

using dnnl::memory;

namespace {

CpuOp::NativeLayout native(const memory::desc& md) {
  return CpuOp::NativeLayout{layout_bytes(md), static_cast<uint64_t>(md.get_size())};
}

}  // namespace

Staging make_stage(const memory::desc& plain, const memory::desc& internal, bool to_internal) {
  Staging stage{wrap(plain, nullptr), memory(internal, cpu_engine()), {}};
  stage.reorder = to_internal ? dnnl::reorder(stage.plain, stage.internal)
                              : dnnl::reorder(stage.internal, stage.plain);
  return stage;
}

Status ConvLikeOp::run(runtime::Span<const runtime::Tensor*> inputs,
                       runtime::Span<runtime::Tensor*> outputs) {
  KILN_RETURN_IF_ERROR(check_run_counts(inputs, outputs));
  if (inputs[0] == nullptr || (bias_index_ >= 0 && inputs[bias_index_] == nullptr) ||
      (residual_index_ >= 0 && inputs[residual_index_] == nullptr)) {
    return Status(Error::InvalidArgument, "run op '" + op_ + "' (oneDNN): a required input is null");
  }
  std::unordered_map<int, memory>& args = args_;
  if (src_stage_) {
    point(src_stage_->plain, inputs[0]->data());
    KILN_RETURN_IF_ERROR(execute(src_stage_->reorder, {{DNNL_ARG_FROM, src_stage_->plain},
                                                       {DNNL_ARG_TO, src_stage_->internal}}));
  } else {
    point(args[DNNL_ARG_SRC], inputs[0]->data());
  }
  if (bias_index_ >= 0) point(args[DNNL_ARG_BIAS], inputs[bias_index_]->data());
  void* out = outputs[0]->mutable_data();
  if (dst_stage_) {
    point(dst_stage_->plain, out);
  } else {
    point(args[DNNL_ARG_DST], out);
  }
  // Where the primitive writes: the internal buffer, or the output (plain or native).
  memory& dst = dst_stage_ ? dst_stage_->internal : args[DNNL_ARG_DST];
  if (residual_index_ >= 0) {
    const void* residual = inputs[static_cast<size_t>(residual_index_)]->data();
    if (residual_stage_) {
      point(residual_stage_->plain, residual);
      KILN_RETURN_IF_ERROR(execute(residual_stage_->reorder,
                                   {{DNNL_ARG_FROM, residual_stage_->plain}, {DNNL_ARG_TO, dst}}));
    } else if (residual != dst.get_data_handle()) {
      // The residual is in the destination's layout already (plain, or native like it).
      std::memcpy(dst.get_data_handle(), residual, dst.get_desc().get_size());
    }
  }
  KILN_RETURN_IF_ERROR(execute(primitive_, args));
  if (dst_stage_) {
    KILN_RETURN_IF_ERROR(execute(dst_stage_->reorder, {{DNNL_ARG_FROM, dst_stage_->internal},
                                                       {DNNL_ARG_TO, dst_stage_->plain}}));
  }
  return Status();
}

std::optional<CpuOp::NativeLayout> ConvLikeOp::native_input_layout(size_t index) const {
  if (index == 0 && src_stage_) return native(src_stage_->internal.get_desc());
  if (residual_index_ >= 0 && index == static_cast<size_t>(residual_index_) && residual_stage_) {
    return native(residual_stage_->internal.get_desc());
  }
  return std::nullopt;
}

std::optional<CpuOp::NativeLayout> ConvLikeOp::native_output_layout(size_t index) const {
  if (index == 0 && dst_stage_) return native(dst_stage_->internal.get_desc());
  return std::nullopt;
}

Status ConvLikeOp::use_native_input(size_t index) {
  if (index == 0 && src_stage_) {
    args_[DNNL_ARG_SRC] = wrap(src_stage_->internal.get_desc(), nullptr);
    src_stage_.reset();
    return Status();
  }
  if (residual_index_ >= 0 && index == static_cast<size_t>(residual_index_) && residual_stage_) {
    residual_stage_.reset();
    return Status();
  }
  return CpuOp::use_native_input(index);
}

Status ConvLikeOp::use_native_output(size_t index) {
  if (index != 0 || !dst_stage_) return CpuOp::use_native_output(index);
  args_[DNNL_ARG_DST] = wrap(dst_stage_->internal.get_desc(), nullptr);
  dst_stage_.reset();
  return Status();
}

void ConvLikeOp::stage(const memory::desc& src_plain, const memory::desc& src_made,
                       const memory::desc& dst_plain, const memory::desc& dst_made,
                       int residuals, size_t num_inputs) {
  if (src_made != src_plain) {
    src_stage_ = make_stage(src_plain, src_made, true);
    args_[DNNL_ARG_SRC] = src_stage_->internal;
  } else {
    args_[DNNL_ARG_SRC] = wrap(src_plain, nullptr);
  }
  if (dst_made != dst_plain) {
    dst_stage_ = make_stage(dst_plain, dst_made, false);
    args_[DNNL_ARG_DST] = dst_stage_->internal;
    if (residuals == 1) residual_stage_ = make_stage(dst_plain, dst_made, true);
  } else {
    args_[DNNL_ARG_DST] = wrap(dst_plain, nullptr);
  }
  if (residuals == 1) residual_index_ = static_cast<int>(num_inputs) - 1;
}

void ConvLikeOp::bind_bias(const OpDesc& desc, const memory::desc& md) {
  const runtime::Tensor* bias = input_constant(desc, 2);
  if (bias != nullptr) {
    bias_ = memory(md, cpu_engine());
    std::memcpy(bias_.get_data_handle(), bias->data(), bias->nbytes());
  } else {
    bias_ = wrap(md, nullptr);
    bias_index_ = 2;
  }
  args_[DNNL_ARG_BIAS] = bias_;
}

}  // namespace kiln::engine::cpu::dnnl_impl
