// LSTM of small batches (ONNX semantics, default activations; validated by dnnl_rnn.cpp): the
// input projection of every step at once (X [T * N, I] x W read as [I, D * 4H], both biases
// folded into its bias; on kiln's loops, or a oneDNN matmul where kiln has no tiles), then, step by
// step, the recurrent product h x R^T and the gates in vectorized loops of our own. oneDNN's RNN
// primitive computes the same cell on its GEMM, whose kernels are generated on a process's first
// call: 35-40 ms (OCR recognition's first run was 70 ms for 1 ms of work) and the primitive's own
// creation. With two or more threads a bidirectional layer runs its directions side by side.

#include <kiln/engine/cpu/blocked_gemv.h>
#include <kiln/engine/cpu/dnnl_common.h>
#include <kiln/engine/cpu/loop_epilogue.h>
#include <kiln/engine/cpu/vector_math.h>

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

namespace kiln::engine::cpu::dnnl_impl {

namespace {

using dnnl::memory;

// The ONNX inputs.
constexpr size_t kX = 0, kW = 1, kR = 2, kB = 3, kInitialH = 5;  // initial_c: kInitialH + 1

using namespace vec;  // NOLINT: the vector helpers of every loop below

// gates [4H] += h [H] x rt [H, 4H] (R^T of one direction: row k is R's column k). Blocks of
// 64 gates stay in registers while every row k adds to them; the rest one vector at a time,
// then one by one.
KILN_VECTOR_CLONES void add_recurrent(float* gates, const float* h, const float* rt,
                                      int64_t hidden) {
  const int64_t width = 4 * hidden;
  int64_t j = 0;
  for (; j + 4 * kLanes <= width; j += 4 * kLanes) {
    Floats a0 = load(gates + j), a1 = load(gates + j + kLanes);
    Floats a2 = load(gates + j + 2 * kLanes), a3 = load(gates + j + 3 * kLanes);
    for (int64_t k = 0; k < hidden; ++k) {
      const Floats hk = splat(h[k]);
      const float* row = rt + k * width + j;
      a0 += hk * load(row);
      a1 += hk * load(row + kLanes);
      a2 += hk * load(row + 2 * kLanes);
      a3 += hk * load(row + 3 * kLanes);
    }
    store(gates + j, a0), store(gates + j + kLanes, a1);
    store(gates + j + 2 * kLanes, a2), store(gates + j + 3 * kLanes, a3);
  }
  for (; j + kLanes <= width; j += kLanes) {
    Floats a = load(gates + j);
    for (int64_t k = 0; k < hidden; ++k) a += splat(h[k]) * load(rt + k * width + j);
    store(gates + j, a);
  }
  for (; j < width; ++j) {
    float a = gates[j];
    for (int64_t k = 0; k < hidden; ++k) a += h[k] * rt[k * width + j];
    gates[j] = a;
  }
}

// ONNX's cell on gates [i, o, f, c~] (pre-activation): c = f c + i c~, h = o tanh(c). The
// last partial vector goes through a zero-padded copy.
KILN_VECTOR_CLONES void apply_gates(const float* gates, float* h, float* c, int64_t hidden) {
  for (int64_t j = 0; j < hidden; j += kLanes) {
    const int64_t n = std::min(kLanes, hidden - j);
    float in[4][kLanes] = {}, state[kLanes] = {};
    for (int64_t q = 0; q < 4; ++q) std::memcpy(in[q], gates + q * hidden + j, sizeof(float) * n);
    std::memcpy(state, c + j, sizeof(float) * n);
    const Floats next =
        sigmoid(load(in[2])) * load(state) + sigmoid(load(in[0])) * tanh_of(load(in[3]));
    const Floats out = sigmoid(load(in[1])) * tanh_of(next);
    float next_values[kLanes], out_values[kLanes];
    store(next_values, next);
    store(out_values, out);
    std::memcpy(c + j, next_values, sizeof(float) * n);
    std::memcpy(h + j, out_values, sizeof(float) * n);
  }
}

class SmallBatchLstmOp final : public DnnlOp {
 public:
  static Result<std::unique_ptr<CpuOp>> create(const OpDesc& desc, const LstmShape& shape);

  /// kiln's loops for the cell, and for the input projection too when it is small.
  std::string provider() const override { return panels_ != nullptr ? "kiln" : "onednn"; }
  /// Its two directions side by side, else one thread (the projection's rows are few).
  int run_threads() const override { return side_by_side_ ? 2 : 1; }

  Status run(runtime::Span<const runtime::Tensor*> inputs,
             runtime::Span<runtime::Tensor*> outputs) override {
    KILN_RETURN_IF_ERROR(check_run_counts(inputs, outputs));
    if (inputs[kX] == nullptr) {
      return Status(Error::InvalidArgument, "run op '" + op_ + "' (kiln): input 0 (X) is null");
    }
    if (runtime_bias_) {
      if (inputs[kB] == nullptr) {
        return Status(Error::InvalidArgument, "run op '" + op_ + "' (kiln): input 3 (B) is null");
      }
      fold_bias(inputs[kB]->data_ptr<float>());
    }
    for (size_t s = 0; s < 2; ++s) {
      const size_t index = kInitialH + s;
      if (runtime_initial_[s] && inputs[index] == nullptr) {
        return Status(Error::InvalidArgument,
                      "run op '" + op_ + "' (kiln): input " + std::to_string(index) + " is null");
      }
      initial_[s] = runtime_initial_[s] ? inputs[index]->data_ptr<float>() : held_initial_[s];
    }
    if (tiles_) {
      const int64_t width = s_.dirs * 4 * s_.hidden;
      Epilogue e;
      e.col_bias = bias_ ? static_cast<const float*>(bias_.get_data_handle()) : nullptr;
      avx512_gemm_blocked(inputs[kX]->data_ptr<float>(), s_.input, s_.seq * s_.batch, s_.input,
                          panels_, width, xw_.data(), width, e, 1);
    } else if (panels_ != nullptr) {
      const int64_t width = s_.dirs * 4 * s_.hidden;
      small_gemm(inputs[kX]->data_ptr<float>(), s_.input, s_.seq * s_.batch, s_.input, panels_,
                 width, xw_.data(), width,
                 bias_ ? static_cast<const float*>(bias_.get_data_handle()) : nullptr);
    } else {
      point(args_[DNNL_ARG_SRC], inputs[kX]->data());
      KILN_RETURN_IF_ERROR(execute(primitive_, args_));
    }
    float* y = outputs[0]->mutable_data_ptr<float>();
    float* y_h = outputs.size() > 1 ? outputs[1]->mutable_data_ptr<float>() : nullptr;
    float* y_c = outputs.size() > 2 ? outputs[2]->mutable_data_ptr<float>() : nullptr;
    if (side_by_side_) {
#pragma omp parallel for num_threads(2)
      for (int64_t dir = 0; dir < 2; ++dir) run_direction(dir, y, y_h, y_c);
    } else {
      for (int64_t dir = 0; dir < s_.dirs; ++dir) run_direction(dir, y, y_h, y_c);
    }
    return Status();
  }

 private:
  // Offset of (step t, direction d, row n) in Y, and of (d, n) in Y_h / Y_c / initial states.
  int64_t y_at(int64_t t, int64_t d, int64_t n) const {
    return (s_.layout == 0 ? ((t * s_.dirs + d) * s_.batch + n)
                           : ((n * s_.seq + t) * s_.dirs + d)) *
           s_.hidden;
  }
  int64_t state_at(int64_t d, int64_t n) const {
    return (s_.layout == 0 ? d * s_.batch + n : n * s_.dirs + d) * s_.hidden;
  }
  // The matmul's row of step t and batch row n (X's own order).
  int64_t row_of(int64_t t, int64_t n) const {
    return s_.layout == 0 ? t * s_.batch + n : n * s_.seq + t;
  }

  void run_direction(int64_t dir, float* y, float* y_h, float* y_c) {
    const int64_t hidden = s_.hidden, width = 4 * hidden;
    float* h = state_.data() + dir * 3 * s_.batch * width;  // per direction: h, c, gates
    float* c = h + s_.batch * hidden;
    float* gates = c + s_.batch * hidden;
    for (int64_t n = 0; n < s_.batch; ++n) {
      for (size_t s = 0; s < 2; ++s) {
        float* to = (s == 0 ? h : c) + n * hidden;
        if (initial_[s] != nullptr) {
          std::memcpy(to, initial_[s] + state_at(dir, n), sizeof(float) * hidden);
        } else {
          std::fill(to, to + hidden, 0.0f);
        }
      }
    }
    const float* rt = rt_ + dir * hidden * width;
    for (int64_t step = 0; step < s_.seq; ++step) {
      const int64_t t = (dir == 1 || reverse_) ? s_.seq - 1 - step : step;
      for (int64_t n = 0; n < s_.batch; ++n) {
        float* g = gates + n * width;
        std::memcpy(g, xw_.data() + row_of(t, n) * s_.dirs * width + dir * width,
                    sizeof(float) * width);
        add_recurrent(g, h + n * hidden, rt, hidden);
        apply_gates(g, h + n * hidden, c + n * hidden, hidden);
        std::memcpy(y + y_at(t, dir, n), h + n * hidden, sizeof(float) * hidden);
      }
    }
    for (int64_t n = 0; n < s_.batch; ++n) {
      if (y_h != nullptr)
        std::memcpy(y_h + state_at(dir, n), h + n * hidden, sizeof(float) * hidden);
      if (y_c != nullptr)
        std::memcpy(y_c + state_at(dir, n), c + n * hidden, sizeof(float) * hidden);
    }
  }

  // bias_ [D * 4H] = Wb + Rb of each direction, from B [D, 8H].
  void fold_bias(const float* b) {
    const int64_t width = 4 * s_.hidden;
    float* to = static_cast<float*>(bias_.get_data_handle());
    for (int64_t d = 0; d < s_.dirs; ++d) {
      for (int64_t j = 0; j < width; ++j) {
        to[d * width + j] = b[d * 2 * width + j] + b[d * 2 * width + width + j];
      }
    }
  }

  LstmShape s_;
  bool reverse_ = false;       ///< One direction, run last step first.
  bool side_by_side_ = false;  ///< Two directions on two threads.
  bool runtime_bias_ = false;
  bool runtime_initial_[2] = {false, false};
  const float* held_initial_[2] = {nullptr, nullptr};  ///< Constant initial_h, initial_c.
  const float* initial_[2] = {nullptr, nullptr};       ///< This run's (null: zeros).
  const float* rt_ = nullptr;                          ///< R^T per direction [D, H, 4H].
  std::vector<float> rt_owned_;                        ///< When there is no shared store.
  std::vector<float> xw_;                              ///< The input projections [T * N, D * 4H].
  std::vector<float> state_;       ///< Per direction: h [N, H], c [N, H], gates [N, 4H].
  dnnl::primitive primitive_;      ///< The projection on oneDNN, or
  const float* panels_ = nullptr;  ///< (little work) W^T as panels for small_gemm, or
  bool tiles_ = false;             ///< W^T in oneDNN's blocked layout for avx512_gemm_blocked.
  std::vector<float> own_panels_;  ///< When there is no shared store.
  memory weights_, bias_;
};

Result<std::unique_ptr<CpuOp>> SmallBatchLstmOp::create(const OpDesc& desc,
                                                        const LstmShape& shape) {
  auto op = std::make_unique<SmallBatchLstmOp>();
  op->op_ = desc.op;
  op->num_inputs_ = desc.inputs.size();
  op->s_ = shape;
  const int64_t T = shape.seq, N = shape.batch, I = shape.input, H = shape.hidden, D = shape.dirs,
                width = 4 * H;
  const int threads = desc.num_threads > 0 ? desc.num_threads : omp_get_max_threads();
  op->side_by_side_ = D == 2 && threads > 1;
  op->num_threads_ = 1;  // the matmul: a few rows
  Attrs attrs(desc);
  KILN_ASSIGN_OR_RETURN(std::string direction, attrs.get_string("direction", "forward"));
  op->reverse_ = direction == "reverse";
  op->outputs_.push_back(TensorDesc{
      runtime::ScalarType::Float32,
      shape.layout == 0 ? std::vector<int64_t>{T, D, N, H} : std::vector<int64_t>{N, T, D, H}});
  for (int i = 1; i < desc.num_outputs; ++i) {
    op->outputs_.push_back(TensorDesc{
        runtime::ScalarType::Float32,
        shape.layout == 0 ? std::vector<int64_t>{D, N, H} : std::vector<int64_t>{N, D, H}});
  }

  // The input projection: X rows [T * N, I] (X's order) x W [D * 4H, I] read transposed.
  const memory::desc x_md({T * N, I}, memory::data_type::f32, memory::dims{I, 1});
  const memory::desc w_md({I, D * width}, memory::data_type::f32, memory::dims{1, I});
  const memory::desc w_any({I, D * width}, memory::data_type::f32, memory::format_tag::any);
  const memory::desc b_md({1, D * width}, memory::data_type::f32, memory::dims{D * width, 1});
  const memory::desc xw_md({T * N, D * width}, memory::data_type::f32, memory::dims{D * width, 1});
  const bool has_bias = input_present(desc, kB);
  ThreadScope scope(1);
  // A projection of little work runs on kiln's loops (no code generated), others on oneDNN.
  constexpr double kSmallMacs = 1 << 18;
  const bool small =
      desc.small_ops_own_loops &&
      static_cast<double>(T * N) * static_cast<double>(I) * static_cast<double>(D * width) <=
          kSmallMacs;
  std::string projection = "kiln small MatMul";
  // On AVX-512 the rest run on kiln's tiles over W^T in oneDNN's blocked layout: as fast as
  // oneDNN's matmul here, which generates its kernel per shape (0.13-0.16 ms each of OCR
  // recognition's two LSTMs at a first run).
  const bool tiles = !small && desc.small_ops_own_loops && avx512_own_runtime_gemm();
  if (tiles) {
    const float* w = input_constant(desc, kW)->data_ptr<float>();
    // W [D * 4H, I] read as B [I, D * 4H]: B's element (i, g) is w[g * I + i].
    KILN_ASSIGN_OR_RETURN(
        op->panels_,
        pack_floats(
            desc, kW, "kiln lstm W^T blocked64 f32", blocked_floats(I, D * width),
            [&](float* to) { pack_blocked(w, 1, I, I, D * width, 1.0f, to); }, op->own_panels_));
    op->tiles_ = true;
    projection = "kiln AVX-512 MatMul";
  } else if (small) {
    const float* w = input_constant(desc, kW)->data_ptr<float>();
    // W [D * 4H, I] read as B [I, D * 4H].
    KILN_ASSIGN_OR_RETURN(
        op->panels_,
        pack_floats(
            desc, kW, "kiln lstm W^T panels16 f32", panel_floats(I, D * width),
            [&](float* to) { pack_panels(w, 1, I, I, D * width, 1.0f, to); }, op->own_panels_));
  } else {
    auto matmul_desc = has_bias ? dnnl::matmul::desc(x_md, w_any, b_md, xw_md)
                                : dnnl::matmul::desc(x_md, w_any, xw_md);
    dnnl::matmul::primitive_desc pd(matmul_desc, base_attr(), cpu_engine());
    op->primitive_ = dnnl::matmul(pd);
    op->hold_scratchpad(pd);
    KILN_ASSIGN_OR_RETURN(
        op->weights_,
        pack_constant(desc, kW, w_md, input_constant(desc, kW)->data(), pd.weights_desc()));
    op->args_[DNNL_ARG_WEIGHTS] = op->weights_;
    projection = describe_pd(pd);
  }
  if (has_bias) {
    op->bias_ = memory(b_md, cpu_engine());
    op->args_[DNNL_ARG_BIAS] = op->bias_;
    if (const runtime::Tensor* b = input_constant(desc, kB)) {
      op->fold_bias(b->data_ptr<float>());
    } else {
      op->runtime_bias_ = true;
    }
  }
  op->xw_.assign(static_cast<size_t>(T * N * D * width), 0.0f);
  op->args_[DNNL_ARG_SRC] = wrap(x_md, nullptr);
  op->args_[DNNL_ARG_DST] = wrap(xw_md, op->xw_.data());

  // R [D, 4H, H] as R^T [D, H, 4H], packed once per model when there is a shared store.
  const float* r = input_constant(desc, kR)->data_ptr<float>();
  auto transpose_r = [&](float* to) {
    for (int64_t d = 0; d < D; ++d) {
      for (int64_t g = 0; g < width; ++g) {
        for (int64_t k = 0; k < H; ++k) to[(d * H + k) * width + g] = r[(d * width + g) * H + k];
      }
    }
  };
  KILN_ASSIGN_OR_RETURN(
      op->rt_, pack_floats(desc, kR, "kiln lstm R^T [D, H, 4H] f32",
                           static_cast<size_t>(D * H * width), transpose_r, op->rt_owned_));
  for (size_t s = 0; s < 2; ++s) {
    const size_t index = kInitialH + s;
    if (!input_present(desc, index)) continue;
    const runtime::Tensor* constant = input_constant(desc, index);
    op->runtime_initial_[s] = constant == nullptr;
    op->held_initial_[s] = constant != nullptr ? constant->data_ptr<float>() : nullptr;
  }
  op->state_.assign(static_cast<size_t>(D * 3 * N * width), 0.0f);
  op->describe_ = projection + " input projection; kiln LSTM cell, small batch" +
                  (op->side_by_side_ ? ", directions side by side" : "");
  return std::unique_ptr<CpuOp>(std::move(op));
}

}  // namespace

Result<std::unique_ptr<CpuOp>> create_small_batch_lstm(const OpDesc& desc, const LstmShape& shape) {
  return SmallBatchLstmOp::create(desc, shape);
}

}  // namespace kiln::engine::cpu::dnnl_impl
