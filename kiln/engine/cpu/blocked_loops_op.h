#pragma once
// What kiln's own Convs over nChw16c share (blocked_conv.cpp, winograd_conv.cpp): input 0, one
// residual and output 0 in nChw16c, each handed over natively or converted from and to plain
// NCHW at each run. Include from .cpp files only (dnnl_common.h).

#include <kiln/engine/cpu/dnnl_common.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace kiln::engine::cpu::dnnl_impl {

class BlockedLoopsOp : public CpuOp {
 public:
  const std::vector<TensorDesc>& outputs() const override { return outputs_; }
  std::string describe() const override { return describe_; }
  std::string provider() const override { return "kiln"; }

  std::optional<NativeLayout> native_input_layout(size_t index) const override {
    if (index == 0) return native_layout(blocked_md(in_sizes_));
    if (has_residual_ && index == residual_index_) {
      return native_layout(blocked_md(outputs_[0].sizes));
    }
    return std::nullopt;
  }
  std::optional<NativeLayout> native_output_layout(size_t index) const override {
    if (index != 0) return std::nullopt;
    return native_layout(blocked_md(outputs_[0].sizes));
  }
  runtime::Status use_native_input(size_t index) override {
    if (index == 0) {
      native_in_ = true;
      return runtime::Status();
    }
    if (has_residual_ && index == residual_index_) {
      native_residual_ = true;
      return runtime::Status();
    }
    return CpuOp::use_native_input(index);
  }
  runtime::Status use_native_output(size_t index) override {
    if (index != 0) return CpuOp::use_native_output(index);
    native_out_ = true;
    return runtime::Status();
  }

 protected:
  /// The InvalidArgument error of a run not given input 0, the residual (when the op has one)
  /// and one output; OK when it was.
  runtime::Status check_run(runtime::Span<const runtime::Tensor*> inputs,
                            runtime::Span<runtime::Tensor*> outputs) const {
    if (inputs.empty() || inputs[0] == nullptr || outputs.size() != 1 || outputs[0] == nullptr ||
        (has_residual_ &&
         (inputs.size() <= residual_index_ || inputs[residual_index_] == nullptr))) {
      return runtime::Status(runtime::Error::InvalidArgument,
                             "run op 'Conv' (" + describe_ + "): expected input 0" +
                                 (has_residual_ ? ", the residual" : "") + " and one output");
    }
    return runtime::Status();
  }

  static dnnl::memory::desc blocked_md(const std::vector<int64_t>& sizes) {
    return dnnl::memory::desc(to_dims(sizes), dnnl::memory::data_type::f32,
                              dnnl::memory::format_tag::aBcd16b);
  }

  std::string describe_;
  std::vector<int64_t> in_sizes_;
  std::vector<TensorDesc> outputs_;
  bool has_residual_ = false;
  size_t residual_index_ = 0;  // the residual's input (the last)
  bool native_in_ = false, native_out_ = false, native_residual_ = false;
};

/// nChw16c ([n][c / 16][hw][16], padding lanes zero) from plain NCHW ([n][c][hw]), and back.
void to_blocked(const float* plain, float* blocked, int64_t n, int64_t c, int64_t hw);
void from_blocked(const float* blocked, float* plain, int64_t n, int64_t c, int64_t hw);

}  // namespace kiln::engine::cpu::dnnl_impl
