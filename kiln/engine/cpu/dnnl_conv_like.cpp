#include <kiln/engine/cpu/dnnl_conv_like.h>

#include <cstring>

namespace kiln::engine::cpu::dnnl_impl {

using dnnl::memory;

Status ConvLikeOp::run(runtime::Span<const runtime::Tensor*> inputs,
                       runtime::Span<runtime::Tensor*> outputs) {
  KILN_RETURN_IF_ERROR(check_run_counts(inputs, outputs));
  if (!finished_) KILN_RETURN_IF_ERROR(finish());
  if (inputs[0] == nullptr || (bias_index_ >= 0 && inputs[bias_index_] == nullptr) ||
      (residual_index_ >= 0 && inputs[residual_index_] == nullptr)) {
    return Status(Error::InvalidArgument,
                  "run op '" + op_ + "' (oneDNN): a required input is null");
  }
  std::unordered_map<int, memory>& args = args_;
  if (src_stage_) {
    KILN_RETURN_IF_ERROR(convert(*src_stage_, inputs[0]->data()));
  } else {
    point(args[DNNL_ARG_SRC], inputs[0]->data());
  }
  if (bias_index_ >= 0) point(args[DNNL_ARG_BIAS], inputs[bias_index_]->data());
  void* out = outputs[0]->mutable_data();
  if (!dst_stage_) point(args[DNNL_ARG_DST], out);
  // Where the primitive writes: the internal buffer, or the output (plain or native).
  memory& dst = args[DNNL_ARG_DST];
  if (residual_index_ >= 0) {
    const void* residual = inputs[static_cast<size_t>(residual_index_)]->data();
    if (residual_stage_) {
      KILN_RETURN_IF_ERROR(convert(*residual_stage_, residual, &dst));
    } else if (residual != dst.get_data_handle()) {
      // The residual is in the destination's layout already (plain, or native like it).
      std::memcpy(dst.get_data_handle(), residual, dst.get_desc().get_size());
    }
  }
  KILN_RETURN_IF_ERROR(execute(primitive_, args));
  if (dst_stage_) KILN_RETURN_IF_ERROR(convert(*dst_stage_, out));
  return Status();
}

std::optional<CpuOp::NativeLayout> ConvLikeOp::native_input_layout(size_t index) const {
  if (index == 0 && src_stage_) return src_stage_->native();
  if (residual_index_ >= 0 && index == static_cast<size_t>(residual_index_) && residual_stage_) {
    return residual_stage_->native();
  }
  return std::nullopt;
}

std::optional<CpuOp::NativeLayout> ConvLikeOp::native_output_layout(size_t index) const {
  if (index == 0 && dst_stage_) return dst_stage_->native();
  return std::nullopt;
}

Status ConvLikeOp::use_native_input(size_t index) {
  if (index == 0 && src_stage_) {
    args_[DNNL_ARG_SRC] = wrap(src_stage_->internal_desc(), nullptr);
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
  args_[DNNL_ARG_DST] = wrap(dst_stage_->internal_desc(), nullptr);
  dst_stage_.reset();
  return Status();
}

void ConvLikeOp::stage(const memory::desc& src_plain, const memory::desc& src_made,
                       const memory::desc& dst_plain, const memory::desc& dst_made, int residuals,
                       size_t num_inputs) {
  if (src_made != src_plain) {
    src_stage_.emplace(src_plain, src_made, true);
  } else {
    args_[DNNL_ARG_SRC] = wrap(src_plain, nullptr);
  }
  if (dst_made != dst_plain) {
    dst_stage_.emplace(dst_plain, dst_made, false);
    if (residuals == 1) residual_stage_.emplace(dst_plain, dst_made, true, false);
  } else {
    args_[DNNL_ARG_DST] = wrap(dst_plain, nullptr);
  }
  if (residuals == 1) residual_index_ = static_cast<int>(num_inputs) - 1;
}

Status ConvLikeOp::finish() {
  if (finished_) return Status();
  if (src_stage_) {
    KILN_RETURN_IF_ERROR(make(*src_stage_));
    args_[DNNL_ARG_SRC] = src_stage_->internal();
  }
  if (dst_stage_) {
    KILN_RETURN_IF_ERROR(make(*dst_stage_));
    args_[DNNL_ARG_DST] = dst_stage_->internal();
  }
  if (residual_stage_) KILN_RETURN_IF_ERROR(make(*residual_stage_));
  finished_ = true;
  return Status();
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
