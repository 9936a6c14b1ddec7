// Transpose of known shapes on kiln's own loops (transpose_loops.h): what a transformer's
// attention runs between its MatMuls (heads split, [B, S, H, D] -> [B, H, S, D]; keys
// transposed for Q K^T, [B, H, S, D] -> [B, H, D, S]), planned once at creation.

#include <kiln/engine/cpu/dnnl_common.h>
#include <kiln/engine/cpu/transpose_loops.h>

#include <vector>

namespace kiln::engine::cpu::dnnl_impl {

namespace {

class TransposeOp final : public CpuOp {
 public:
  static Result<std::unique_ptr<CpuOp>> create(const OpDesc& desc) {
    if (desc.inputs.size() != 1 || desc.num_outputs != 1 || !desc.post_ops.empty() ||
        (!desc.inputs_present.empty() && !desc.inputs_present[0])) {
      return error(desc, Error::NotSupported, "expected one input, one output and no post-ops");
    }
    if (!desc.constants.empty() && desc.constants[0] != nullptr) {
      // (Constant folding computes such a Transpose once; the run passes no constant's data.)
      return error(desc, Error::NotSupported, "a constant input");
    }
    Attrs attrs(desc);
    KILN_ASSIGN_OR_RETURN(std::vector<int64_t> perm, attrs.get_ints("perm"));
    auto op = std::make_unique<TransposeOp>();
    Status planned = op->loops_.plan(desc.inputs[0].sizes, perm,
                                     runtime::element_size(desc.inputs[0].dtype), desc.num_threads);
    if (!planned.ok()) return error(desc, planned.code(), planned.message());
    const runtime::Span<const int64_t> out = op->loops_.output_sizes();
    op->outputs_ = {TensorDesc{desc.inputs[0].dtype, std::vector<int64_t>(out.begin(), out.end())}};
    op->describe_ = "kiln Transpose (own loops: " + op->loops_.describe() + ")";
    for (int64_t size : desc.inputs[0].sizes) op->empty_ = op->empty_ || size == 0;
    return std::unique_ptr<CpuOp>(std::move(op));
  }

  const std::vector<TensorDesc>& outputs() const override { return outputs_; }
  std::string describe() const override { return describe_; }
  std::string provider() const override { return "kiln"; }
  int run_threads() const override { return loops_.threads(); }

  Status run(runtime::Span<const runtime::Tensor*> inputs,
             runtime::Span<runtime::Tensor*> outputs) override {
    if (inputs.size() != 1 || outputs.size() != 1 || outputs[0] == nullptr ||
        inputs[0] == nullptr || (!empty_ && inputs[0]->data() == nullptr)) {
      return Status(Error::InvalidArgument,
                    "run op 'Transpose' (" + describe_ + "): expected one input and one output");
    }
    loops_.run(inputs[0]->data(), outputs[0]->mutable_data());
    return Status();
  }

 private:
  TransposeLoops loops_;
  std::vector<TensorDesc> outputs_;
  std::string describe_;
  bool empty_ = false;
};

}  // namespace

Result<std::unique_ptr<CpuOp>> create_transpose(const OpDesc& desc) {
  return TransposeOp::create(desc);
}

}  // namespace kiln::engine::cpu::dnnl_impl
