// RMSNormalization of known shapes as a CpuOp over RuntimeRows' row loops: oneDNN 2.6 has no
// RMS normalization (its layer normalization always subtracts the mean). The op keeps its own
// copy of the scale, which RuntimeRows reads at each run.

#include <kiln/engine/cpu/dnnl_common.h>
#include <kiln/engine/cpu/runtime_rows.h>

#include <cstring>
#include <vector>

namespace kiln::engine::cpu::dnnl_impl {

namespace {

class RowNormOp final : public CpuOp {
 public:
  static Result<std::unique_ptr<CpuOp>> create(const OpDesc& desc) {
    if (desc.inputs.size() != 2 || desc.num_outputs != 1 || !desc.post_ops.empty()) {
      return error(desc, Error::NotSupported, "expected X and scale, one output, no post-ops");
    }
    const runtime::Tensor* scale = input_constant(desc, 1);
    if (scale == nullptr) return error(desc, Error::NotSupported, "scale is computed");
    if (scale->dtype() != runtime::ScalarType::Float32) {
      return error(desc, Error::NotSupported, "scale is not f32");
    }
    if (desc.verify_constant) {
      KILN_RETURN_IF_ERROR(desc.verify_constant(1).with_context("create op '" + desc.op + "'"));
    }
    auto op = std::make_unique<RowNormOp>();
    op->scale_data_.resize(static_cast<size_t>(scale->numel()));
    if (!op->scale_data_.empty()) {
      std::memcpy(op->scale_data_.data(), scale->data(), scale->nbytes());
    }
    op->scale_ = runtime::Tensor(runtime::ScalarType::Float32,
                                 std::vector<int64_t>(scale->sizes().begin(), scale->sizes().end()),
                                 op->scale_data_.data());
    OpDesc rows = desc;
    rows.constants = {nullptr, &op->scale_};
    KILN_ASSIGN_OR_RETURN(op->rows_, RuntimeRows::create(rows));
    op->outputs_ = {TensorDesc{runtime::ScalarType::Float32, desc.inputs[0].sizes}};
    return std::unique_ptr<CpuOp>(std::move(op));
  }

  const std::vector<TensorDesc>& outputs() const override { return outputs_; }
  std::string describe() const override {
    return "kiln rows: RMS normalization (" + rows_->describe() + ")";
  }
  std::string provider() const override { return "kiln"; }

  Status run(runtime::Span<const runtime::Tensor*> inputs,
             runtime::Span<runtime::Tensor*> outputs) override {
    if (inputs.empty() || inputs[0] == nullptr || outputs.size() != 1 || outputs[0] == nullptr) {
      return Status(Error::InvalidArgument,
                    "run op 'RMSNormalization' (" + describe() + "): expected X and one output");
    }
    return rows_->run(*inputs[0], *outputs[0]);
  }

 private:
  std::vector<TensorDesc> outputs_;
  std::vector<float> scale_data_;
  runtime::Tensor scale_;
  std::unique_ptr<RuntimeRows> rows_;
};

}  // namespace

Result<std::unique_ptr<CpuOp>> create_rms_norm(const OpDesc& desc) {
  return RowNormOp::create(desc);
}

}  // namespace kiln::engine::cpu::dnnl_impl
