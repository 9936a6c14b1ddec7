// Split of known shapes on kiln's own loops: each output's rows copied out of the input's, split
// over the op's threads when there are bytes enough. A transformer splits its fused query, key
// and value projection so at every layer; the reference kernel, which ran it, copied element
// by element on one thread (GPT-large prefill: 63 us a layer, about 1 % of a run at 2 threads).
// The pieces' sizes are the outputs' (shape inference made them from `split` or
// `num_outputs`), so the op reads neither.

#include <kiln/engine/cpu/dnnl_common.h>

#include <omp.h>

#include <algorithm>
#include <cstring>
#include <vector>

namespace kiln::engine::cpu::dnnl_impl {

namespace {

// From this many bytes a Split copies on all its threads (below, starting them costs more).
constexpr int64_t kParallelBytes = int64_t{1} << 18;

class SplitOp final : public CpuOp {
 public:
  static Result<std::unique_ptr<CpuOp>> create(const OpDesc& desc) {
    if (desc.inputs.empty() || desc.inputs.size() > 2 || !desc.post_ops.empty() ||
        (!desc.inputs_present.empty() && !desc.inputs_present[0])) {
      return error(desc, Error::NotSupported, "expected X, an optional split and no post-ops");
    }
    if (!desc.constants.empty() && desc.constants[0] != nullptr) {
      return error(desc, Error::NotSupported, "a constant input");  // (folded instead)
    }
    const std::vector<int64_t>& x = desc.inputs[0].sizes;
    const auto num_outputs = static_cast<size_t>(desc.num_outputs);
    if (desc.output_sizes.size() != num_outputs || num_outputs == 0) {
      return error(desc, Error::NotSupported, "outputs of unknown sizes");
    }
    Attrs attrs(desc);
    KILN_ASSIGN_OR_RETURN(int64_t axis, attrs.get_int("axis", 0));
    const auto rank = static_cast<int64_t>(x.size());
    if (axis < -rank || axis >= rank) {
      return error(desc, Error::InvalidArgument,
                   "attribute 'axis' has value " + std::to_string(axis) + " (expected -" +
                       std::to_string(rank) + " to " + std::to_string(rank - 1) + ")");
    }
    if (axis < 0) axis += rank;
    auto op = std::make_unique<SplitOp>();
    const int64_t element = static_cast<int64_t>(runtime::element_size(desc.inputs[0].dtype));
    int64_t inner = element;  // bytes of one step along the axis
    for (int64_t d = axis + 1; d < rank; ++d) inner *= x[static_cast<size_t>(d)];
    op->rows_ = 1;
    for (int64_t d = 0; d < axis; ++d) op->rows_ *= x[static_cast<size_t>(d)];
    int64_t along = 0;
    for (const std::vector<int64_t>& out : desc.output_sizes) {
      bool same = out.size() == x.size();
      for (size_t d = 0; same && d < x.size(); ++d) {
        same = static_cast<int64_t>(d) == axis || out[d] == x[d];
      }
      if (!same || out[static_cast<size_t>(axis)] < 0) {
        return error(desc, Error::NotSupported,
                     "an output of shape " + runtime::shape_to_string(out) +
                         " that is not a piece of X " + runtime::shape_to_string(x) +
                         " along axis " + std::to_string(axis));
      }
      op->pieces_.push_back(out[static_cast<size_t>(axis)] * inner);
      along += out[static_cast<size_t>(axis)];
      op->outputs_.push_back(TensorDesc{desc.inputs[0].dtype, out});
    }
    if (along != x[static_cast<size_t>(axis)]) {
      return error(desc, Error::NotSupported,
                   "outputs that cover " + std::to_string(along) + " of X's " +
                       std::to_string(x[static_cast<size_t>(axis)]) + " along axis " +
                       std::to_string(axis));
    }
    op->row_bytes_ = along * inner;
    const int64_t bytes = op->rows_ * op->row_bytes_;
    op->threads_ =
        bytes >= kParallelBytes && op->rows_ > 1
            ? static_cast<int>(std::min<int64_t>(
                  desc.num_threads > 0 ? desc.num_threads : omp_get_max_threads(), op->rows_))
            : 1;
    op->describe_ = "kiln Split (rows copied, " + std::to_string(num_outputs) + " pieces)";
    return std::unique_ptr<CpuOp>(std::move(op));
  }

  const std::vector<TensorDesc>& outputs() const override { return outputs_; }
  std::string describe() const override { return describe_; }
  std::string provider() const override { return "kiln"; }
  int run_threads() const override { return threads_; }

  Status run(runtime::Span<const runtime::Tensor*> inputs,
             runtime::Span<runtime::Tensor*> outputs) override {
    if (inputs.empty() || inputs[0] == nullptr || outputs.size() != pieces_.size()) {
      return Status(Error::InvalidArgument, "run op 'Split' (" + describe_ + "): expected X and " +
                                                std::to_string(pieces_.size()) + " outputs");
    }
    std::vector<uint8_t*> to(pieces_.size());
    for (size_t j = 0; j < pieces_.size(); ++j) {
      if (outputs[j] == nullptr) {
        return Status(Error::InvalidArgument, "run op 'Split' (" + describe_ + "): output " +
                                                  std::to_string(j) + " is null");
      }
      to[j] = static_cast<uint8_t*>(outputs[j]->mutable_data());
    }
    const auto* from = static_cast<const uint8_t*>(inputs[0]->data());
    auto copy_rows = [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        const uint8_t* row = from + r * row_bytes_;
        for (size_t j = 0; j < pieces_.size(); ++j) {
          if (pieces_[j] > 0) {
            std::memcpy(to[j] + r * pieces_[j], row, static_cast<size_t>(pieces_[j]));
          }
          row += pieces_[j];
        }
      }
    };
    if (threads_ <= 1) {
      copy_rows(0, rows_);
      return Status();
    }
    const int parts = threads_;
#pragma omp parallel for num_threads(parts) schedule(static)
    for (int t = 0; t < parts; ++t) copy_rows(rows_ * t / parts, rows_ * (t + 1) / parts);
    return Status();
  }

 private:
  int64_t rows_ = 1, row_bytes_ = 0;
  std::vector<int64_t> pieces_;  ///< Each output's bytes in one row.
  int threads_ = 1;
  std::vector<TensorDesc> outputs_;
  std::string describe_;
};

}  // namespace

Result<std::unique_ptr<CpuOp>> create_split(const OpDesc& desc) { return SplitOp::create(desc); }

}  // namespace kiln::engine::cpu::dnnl_impl
