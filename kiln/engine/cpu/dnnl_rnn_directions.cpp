// A bidirectional LSTM or GRU of a small batch as two one-direction ops run side by side, each
// on one thread (see dnnl_rnn.cpp): oneDNN computes the directions one after the other and
// splits each time step's small GEMMs over its threads, which costs a barrier per step and
// is slower on two threads than on one. Only ONNX layout 0 is split: there every per-direction
// slice of W, R, B, initial_h, initial_c, Y_h and Y_c is contiguous, and Y [T, 2, N, H] is
// interleaved from the directions' [T, 1, N, H] results.

#include <kiln/engine/cpu/dnnl_common.h>

#include <omp.h>

#include <algorithm>
#include <array>

namespace kiln::engine::cpu::dnnl_impl {

namespace {

// The ONNX inputs: X, W, R, B, sequence_lens, initial_h, initial_c, P.
constexpr size_t kX = 0, kSequenceLens = 4;

/// A key for direction `dir`'s slice of the constant hashed `hash` (0: none, the bytes are
/// hashed when packed). Derived, not hashed again: the slice of one constant is always the
/// same bytes.
uint64_t slice_hash(uint64_t hash, size_t dir) {
  if (hash == 0) return 0;
  uint64_t h = hash ^ (0x9e3779b97f4a7c15ULL * (dir + 1));
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdULL;
  h ^= h >> 33;
  return h == 0 ? 1 : h;
}

class DirectionsOp final : public CpuOp {
 public:
  static Result<std::unique_ptr<CpuOp>> create(const OpDesc& desc);

  const std::vector<TensorDesc>& outputs() const override { return outputs_; }
  std::string describe() const override { return describe_; }
  std::string provider() const override { return parts_[0].op->provider(); }
  int run_threads() const override { return 2; }  ///< One per direction.
  Status run(runtime::Span<const runtime::Tensor*> inputs,
             runtime::Span<runtime::Tensor*> outputs) override;

 private:
  /// One direction's op and the tensors it is run with: views of the caller's inputs and
  /// outputs (re-pointed each run) and its own Y.
  struct Part {
    std::unique_ptr<CpuOp> op;
    std::vector<runtime::Tensor> input_views;  ///< Per input; unused for X and constants.
    std::vector<const runtime::Tensor*> inputs;
    std::vector<float> y;
    std::vector<runtime::Tensor> output_tensors;  ///< Y over `y`, then Y_h, Y_c views.
    std::vector<runtime::Tensor*> outputs;
  };

  std::string op_;
  std::vector<TensorDesc> outputs_;
  std::string describe_;
  std::vector<bool> sliced_;  ///< Per input: present and split by direction (all but X).
  std::vector<runtime::Tensor> constant_slices_;  ///< Kept alive for the parts' lifetime.
  int64_t seq_ = 0, row_ = 0;                     ///< T, and N * H (one step of one direction).
  std::array<Part, 2> parts_;
};

/// `sizes` with its first dimension set to 1 (one direction's slice).
std::vector<int64_t> one_direction(std::vector<int64_t> sizes) {
  sizes[0] = 1;
  return sizes;
}

Result<std::unique_ptr<CpuOp>> DirectionsOp::create(const OpDesc& desc) {
  auto op = std::make_unique<DirectionsOp>();
  op->op_ = desc.op;
  const size_t n = desc.inputs.size();
  op->sliced_.assign(n, false);
  for (size_t i = 1; i < n; ++i) {
    op->sliced_[i] = i != kSequenceLens && input_present(desc, i);
  }
  op->constant_slices_.reserve(2 * n);
  for (size_t dir = 0; dir < 2; ++dir) {
    OpDesc part = desc;
    part.num_threads = 1;
    part.input_layouts.clear();
    // Activations were checked to be the defaults on the whole op; one direction takes 3.
    part.attributes.erase(std::remove_if(part.attributes.begin(), part.attributes.end(),
                                         [](const ir::Attribute& a) {
                                           return a.name == "direction" || a.name == "activations";
                                         }),
                          part.attributes.end());
    part.attributes.push_back(
        ir::Attribute{"direction", std::string(dir == 0 ? "forward" : "reverse")});
    part.constants.resize(n, nullptr);
    part.constant_hashes.resize(n, 0);
    for (size_t i = 0; i < n; ++i) {
      if (!op->sliced_[i]) continue;
      part.inputs[i].sizes = one_direction(desc.inputs[i].sizes);
      const runtime::Tensor* constant = input_constant(desc, i);
      if (constant == nullptr) continue;
      const size_t bytes = constant->nbytes() / 2;
      op->constant_slices_.emplace_back(
          constant->dtype(), part.inputs[i].sizes,
          const_cast<uint8_t*>(static_cast<const uint8_t*>(constant->data()) + dir * bytes));
      part.constants[i] = &op->constant_slices_.back();
      part.constant_hashes[i] = slice_hash(part.constant_hashes[i], dir);
    }
    KILN_ASSIGN_OR_RETURN(op->parts_[dir].op, create_rnn(part));
  }
  // Y [T, 2, N, H] and the states [2, N, H], as the whole op would have them.
  const std::vector<TensorDesc>& one = op->parts_[0].op->outputs();
  std::vector<int64_t> y = one[0].sizes;
  op->seq_ = y[0];
  op->row_ = y[2] * y[3];
  y[1] = 2;
  op->outputs_.push_back(TensorDesc{runtime::ScalarType::Float32, y});
  for (size_t i = 1; i < one.size(); ++i) {
    std::vector<int64_t> state = one[i].sizes;
    state[0] = 2;
    op->outputs_.push_back(TensorDesc{runtime::ScalarType::Float32, state});
  }
  for (size_t dir = 0; dir < 2; ++dir) {
    Part& p = op->parts_[dir];
    p.input_views.resize(n);
    p.inputs.assign(n, nullptr);
    for (size_t i = 0; i < n; ++i) {
      if (op->sliced_[i] && input_constant(desc, i) == nullptr) {
        p.input_views[i] =
            runtime::Tensor(desc.inputs[i].dtype, one_direction(desc.inputs[i].sizes), nullptr);
      }
    }
    p.y.resize(static_cast<size_t>(op->seq_ * op->row_));
    p.output_tensors.emplace_back(runtime::ScalarType::Float32, one[0].sizes, p.y.data());
    for (size_t i = 1; i < one.size(); ++i) {
      p.output_tensors.emplace_back(runtime::ScalarType::Float32, one[i].sizes, nullptr);
    }
    for (runtime::Tensor& t : p.output_tensors) p.outputs.push_back(&t);
  }
  op->describe_ = op->parts_[0].op->describe() + " directions:2 threads side by side";
  return std::unique_ptr<CpuOp>(std::move(op));
}

Status DirectionsOp::run(runtime::Span<const runtime::Tensor*> inputs,
                         runtime::Span<runtime::Tensor*> outputs) {
  if (inputs.size() != sliced_.size() || outputs.size() != outputs_.size()) {
    return Status(Error::InvalidArgument,
                  "run op '" + op_ + "' (oneDNN): got " + std::to_string(inputs.size()) +
                      " inputs and " + std::to_string(outputs.size()) + " outputs (expected " +
                      std::to_string(sliced_.size()) + " and " + std::to_string(outputs_.size()) +
                      ")");
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (outputs[i] == nullptr) {
      return Status(Error::InvalidArgument,
                    "run op '" + op_ + "' (oneDNN): output " + std::to_string(i) + " is null");
    }
  }
  for (size_t dir = 0; dir < 2; ++dir) {
    Part& p = parts_[dir];
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (!sliced_[i] || p.input_views[i].dim() == 0) {
        p.inputs[i] = i == kX ? inputs[i] : nullptr;
        continue;
      }
      if (inputs[i] == nullptr) {
        return Status(Error::InvalidArgument,
                      "run op '" + op_ + "' (oneDNN): input " + std::to_string(i) + " is null");
      }
      const size_t bytes = inputs[i]->nbytes() / 2;
      p.input_views[i].set_data(
          const_cast<uint8_t*>(static_cast<const uint8_t*>(inputs[i]->data()) + dir * bytes),
          bytes);
      p.inputs[i] = &p.input_views[i];
    }
    for (size_t i = 1; i < outputs.size(); ++i) {
      const size_t bytes = outputs[i]->nbytes() / 2;
      p.output_tensors[i].set_data(static_cast<uint8_t*>(outputs[i]->mutable_data()) + dir * bytes,
                                   bytes);
    }
  }
  std::array<Status, 2> status;
#pragma omp parallel for num_threads(2) schedule(static, 1)
  for (int dir = 0; dir < 2; ++dir) {
    Part& p = parts_[static_cast<size_t>(dir)];
    status[static_cast<size_t>(dir)] = p.op->run(p.inputs, p.outputs);
  }
  for (const Status& s : status) KILN_RETURN_IF_ERROR(s);
  float* y = outputs[0]->mutable_data_ptr<float>();
  for (int64_t t = 0; t < seq_; ++t) {
    for (size_t dir = 0; dir < 2; ++dir) {
      const float* from = parts_[dir].y.data() + t * row_;
      std::copy(from, from + row_, y + (2 * t + static_cast<int64_t>(dir)) * row_);
    }
  }
  return Status();
}

}  // namespace

Result<std::unique_ptr<CpuOp>> create_rnn_directions(const OpDesc& desc) {
  return DirectionsOp::create(desc);
}

}  // namespace kiln::engine::cpu::dnnl_impl
