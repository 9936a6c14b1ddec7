// RMSNormalization, InstanceNormalization and GroupNormalization of known shapes as a CpuOp over
// RuntimeRows' row loops: oneDNN 2.6 has no RMS normalization (its layer normalization always
// subtracts the mean), and its batch normalization, which could take an instance normalization's
// rows as channels, computes their statistics on its reference-speed kernel in plain layouts (2.1
// ms for 64 x 128 x 128 against 0.3 blocked). Also LayerNormalizations, Softmaxes and
// LogSoftmaxes of any size in plain layouts: for a decoder's one row oneDNN's code generation
// would cost more than it saves (and the reference kernel is slow), and attention's rows run
// as fast as on oneDNN's primitive at one thread and faster at two (cpu_op.cpp). The op keeps
// its own copies of the constant parameters, which RuntimeRows reads at each run.

#include <kiln/engine/cpu/dnnl_common.h>
#include <kiln/engine/cpu/runtime_rows.h>

#include <cstring>
#include <vector>

namespace kiln::engine::cpu::dnnl_impl {

namespace {

class RowNormOp final : public CpuOp {
 public:
  static Result<std::unique_ptr<CpuOp>> create(const OpDesc& desc) {
    const bool instance = desc.op == "InstanceNormalization" || desc.op == "GroupNormalization";
    const bool layer = desc.op == "LayerNormalization";
    const bool layer_bias = layer && desc.inputs.size() == 3 && input_present(desc, 2);
    const bool softmax = desc.op == "Softmax" || desc.op == "LogSoftmax";
    // Scale and B, or scale; none for a softmax.
    const size_t num_params = softmax ? 0 : instance || layer_bias ? 2 : 1;
    if (!own_vector_loops()) {
      return error(desc, Error::NotSupported,
                   "kiln's row loops need AVX-512 on this CPU (the reference kernel runs it)");
    }
    // (Activations after an instance or group normalization: RuntimeRows applies them.)
    const bool absent_bias = layer && !layer_bias && desc.inputs.size() == 3;
    if ((desc.inputs.size() != num_params + 1 && !absent_bias) || desc.num_outputs != 1 ||
        (!instance && !desc.post_ops.empty())) {
      return error(desc, Error::NotSupported,
                   instance  ? "expected X, scale and B, one output"
                   : layer   ? "expected X, scale and optional B, one output, no post-ops"
                   : softmax ? "expected X, one output, no post-ops"
                             : "expected X and scale, one output, no post-ops");
    }
    auto op = std::make_unique<RowNormOp>();
    op->instance_ = instance;
    op->layer_ = layer;
    op->op_ = desc.op;
    OpDesc rows = desc;
    rows.constants.assign(desc.inputs.size(), nullptr);
    for (size_t i = 1; i <= num_params; ++i) {
      const runtime::Tensor* param = input_constant(desc, i);
      const std::string name = i == 1 ? "scale" : "B";
      if (param == nullptr) return error(desc, Error::NotSupported, name + " is computed");
      if (param->dtype() != runtime::ScalarType::Float32) {
        return error(desc, Error::NotSupported, name + " is not f32");
      }
      if (desc.verify_constant) {
        KILN_RETURN_IF_ERROR(desc.verify_constant(i).with_context("create op '" + desc.op + "'"));
      }
      std::vector<float>& data = op->data_[i - 1];
      data.resize(static_cast<size_t>(param->numel()));
      if (!data.empty()) std::memcpy(data.data(), param->data(), param->nbytes());
      op->params_[i - 1] = runtime::Tensor(
          runtime::ScalarType::Float32,
          std::vector<int64_t>(param->sizes().begin(), param->sizes().end()), data.data());
      rows.constants[i] = &op->params_[i - 1];
    }
    KILN_ASSIGN_OR_RETURN(op->rows_, RuntimeRows::create(rows));
    op->outputs_ = {TensorDesc{runtime::ScalarType::Float32, desc.inputs[0].sizes}};
    return std::unique_ptr<CpuOp>(std::move(op));
  }

  const std::vector<TensorDesc>& outputs() const override { return outputs_; }
  std::string describe() const override {
    return std::string("kiln rows: ") +
           (op_ == "GroupNormalization" ? "group normalization"
            : op_ == "Softmax"          ? "softmax"
            : op_ == "LogSoftmax"       ? "log-softmax"
            : instance_                 ? "instance normalization"
            : layer_                    ? "layer normalization"
                                        : "RMS normalization") +
           " (" + rows_->describe() + ")";
  }
  std::string provider() const override { return "kiln"; }

  Status run(runtime::Span<const runtime::Tensor*> inputs,
             runtime::Span<runtime::Tensor*> outputs) override {
    if (inputs.empty() || inputs[0] == nullptr || outputs.size() != 1 || outputs[0] == nullptr) {
      return Status(Error::InvalidArgument,
                    "run op '" + op_ + "' (" + describe() + "): expected X and one output");
    }
    return rows_->run(*inputs[0], *outputs[0]);
  }

 private:
  bool instance_ = false;  ///< Instance or group normalization: X, scale and B.
  bool layer_ = false;     ///< Layer normalization (of little work: see cpu_op.cpp).
  std::string op_;
  std::vector<TensorDesc> outputs_;
  std::vector<float> data_[2];
  runtime::Tensor params_[2];
  std::unique_ptr<RuntimeRows> rows_;
};

}  // namespace

Result<std::unique_ptr<CpuOp>> create_row_norm(const OpDesc& desc) {
  return RowNormOp::create(desc);
}

}  // namespace kiln::engine::cpu::dnnl_impl
