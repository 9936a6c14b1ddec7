// LSTM and GRU (ONNX semantics, default activations) on oneDNN's lstm_forward, gru_forward
// (linear_before_reset = 0) and lbr_gru_forward (linear_before_reset = 1). W and R are packed
// once at creation, their gate blocks reordered from ONNX's order into oneDNN's; Wb and Rb are
// summed into oneDNN's one bias per gate. A bidirectional layer is one bidirectional_concat
// primitive: its [seq, batch, 2 * hidden] result is ONNX's Y [seq, 2, batch, hidden] for one
// batch row and in layout 1, and is scattered into it otherwise.
//
// LSTMs of small batches (at most kSmallBatch rows) run on kiln's own cell instead
// (small_batch_lstm.cpp). GRUs of small batches run on one thread and read plain (ldigo) weights:
// there oneDNN's GEMM-based cell takes about half the time of its brgemm one, and a second
// thread only adds a barrier per time step. With more threads than one, a bidirectional layer
// of a small batch runs its two directions side by side instead (dnnl_rnn_directions.cpp).

#include <kiln/engine/cpu/dnnl_common.h>

#include <omp.h>

#include <algorithm>
#include <array>
#include <cctype>

namespace kiln::engine::cpu::dnnl_impl {

namespace {

using dnnl::memory;

enum class Cell { Lstm, Gru, LbrGru };

// The ONNX inputs: X, W, R, B, sequence_lens, initial_h (, initial_c, P for LSTM).
constexpr size_t kX = 0, kW = 1, kR = 2, kB = 3, kSequenceLens = 4, kInitialH = 5, kInitialC = 6,
                 kP = 7;

/// The problem's sizes, read from validated inputs.
struct Dims {
  int64_t seq = 0, batch = 0, input = 0, hidden = 0, dirs = 1, gates = 4;
  int64_t layout = 0;
};

/// The ONNX gate block that oneDNN gate `g` takes: LSTM i, f, c~, o from ONNX i, o, f, c; GRU
/// u, r, o are ONNX's z, r, h.
int64_t onnx_gate(Cell cell, int64_t g) {
  static constexpr std::array<int64_t, 4> kLstm = {0, 2, 3, 1};
  return cell == Cell::Lstm ? kLstm[static_cast<size_t>(g)] : g;
}

/// ONNX's [D, G*H, K] weight with its gate blocks in oneDNN's order, and the descriptor that
/// reads it as oneDNN's logical ldigo [1, D, K, G, H].
struct GateMajor {
  std::vector<float> values;
  memory::desc md;
};

GateMajor gate_major(Cell cell, const Dims& d, const float* w, int64_t k) {
  GateMajor out;
  const int64_t block = d.hidden * k;
  out.values.resize(static_cast<size_t>(d.dirs * d.gates * block));
  for (int64_t dir = 0; dir < d.dirs; ++dir) {
    for (int64_t g = 0; g < d.gates; ++g) {
      const float* from = w + (dir * d.gates + onnx_gate(cell, g)) * block;
      std::copy(from, from + block, out.values.begin() + (dir * d.gates + g) * block);
    }
  }
  out.md = memory::desc({1, d.dirs, k, d.gates, d.hidden}, memory::data_type::f32,
                        memory::dims{d.dirs * d.gates * block, d.gates * block, 1, block, k});
  return out;
}

/// Batches up to this many rows count as small (see the file comment).
constexpr int64_t kSmallBatch = 2;

class RnnOp final : public DnnlOp {
 public:
  static Result<std::unique_ptr<CpuOp>> create(const OpDesc& desc);
  int run_threads() const override { return num_threads_; }

  Status run(runtime::Span<const runtime::Tensor*> inputs,
             runtime::Span<runtime::Tensor*> outputs) override;

 private:
  Status validate(const OpDesc& desc);
  Status check_attributes(const OpDesc& desc, int64_t& direction_count,
                          dnnl::rnn_direction& direction);
  Status build(const OpDesc& desc, dnnl::rnn_direction direction);
  void fill_bias(const float* b);
  /// [D, N, H] (layout 0) or [N, D, H] (layout 1) states to oneDNN's ldnc, or back.
  void copy_state(const float* from, float* to, bool to_ldnc) const;
  void scatter_y(float* y) const;

  Cell cell_ = Cell::Lstm;
  Dims d_;
  const runtime::Tensor* initial_[2] = {nullptr, nullptr};  ///< Constant initial_h, initial_c.
  bool has_initial_[2] = {false, false};
  bool held_[2] = {false, false};  ///< The op holds the initial state (constant, or zero h).
  int bias_input_ = -1;            ///< Run-time B; -1: none or constant.
  bool y_direct_ = true;           ///< oneDNN's dst_layer is Y's layout.
  std::vector<float> y_buffer_;
  std::array<std::vector<float>, 2> state_in_, state_out_;  ///< Layout 1 h, c in ldnc.
  dnnl::primitive primitive_;
  memory src_layer_, dst_layer_, bias_;
  std::array<memory, 2> src_iter_, dst_iter_;
};

Status RnnOp::check_attributes(const OpDesc& desc, int64_t& direction_count,
                               dnnl::rnn_direction& direction) {
  Attrs attrs(desc);
  KILN_ASSIGN_OR_RETURN(std::string dir, attrs.get_string("direction", "forward"));
  if (dir == "forward") {
    direction = dnnl::rnn_direction::unidirectional_left2right;
  } else if (dir == "reverse") {
    direction = dnnl::rnn_direction::unidirectional_right2left;
  } else if (dir == "bidirectional") {
    direction = dnnl::rnn_direction::bidirectional_concat;
  } else {
    return error(
        desc, Error::InvalidArgument,
        "attribute 'direction' is '" + dir + "' (expected forward, reverse or bidirectional)");
  }
  direction_count = dir == "bidirectional" ? 2 : 1;
  for (const char* name : {"clip", "activation_alpha", "activation_beta"}) {
    for (const ir::Attribute& a : desc.attributes) {
      if (a.name == name) {
        return error(desc, Error::NotSupported, "attribute '" + std::string(name) + "' is set");
      }
    }
  }
  KILN_ASSIGN_OR_RETURN(d_.layout, attrs.get_int("layout", 0));
  if (d_.layout != 0 && d_.layout != 1) {
    return error(desc, Error::InvalidArgument,
                 "attribute 'layout' is " + std::to_string(d_.layout) + " (expected 0 or 1)");
  }
  if (cell_ == Cell::Lstm) {
    KILN_ASSIGN_OR_RETURN(int64_t input_forget, attrs.get_int("input_forget", 0));
    if (input_forget != 0) {
      return error(desc, Error::NotSupported, "attribute 'input_forget' is 1 (expected 0)");
    }
  }
  // oneDNN computes the default functions only: Sigmoid, Tanh (, Tanh) per direction.
  std::vector<std::string> names;
  for (const ir::Attribute& a : desc.attributes) {
    if (a.name != "activations") continue;
    if (const auto* list = std::get_if<std::vector<std::string>>(&a.value)) {
      names = *list;
    } else if (const auto* joined = std::get_if<std::string>(&a.value)) {
      for (size_t start = 0; start <= joined->size();) {
        size_t end = std::min(joined->find(',', start), joined->size());
        names.push_back(joined->substr(start, end - start));
        start = end + 1;
      }
    }
  }
  const std::vector<std::string> defaults =
      cell_ == Cell::Lstm ? std::vector<std::string>{"sigmoid", "tanh", "tanh"}
                          : std::vector<std::string>{"sigmoid", "tanh"};
  for (size_t i = 0; i < names.size(); ++i) {
    std::string name = names[i];
    for (char& ch : name) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    if (name != defaults[i % defaults.size()]) {
      return error(desc, Error::NotSupported,
                   "attribute 'activations' has '" + names[i] + "' at index " + std::to_string(i) +
                       " (expected the defaults)");
    }
  }
  return Status();
}

Status RnnOp::validate(const OpDesc& desc) {
  const size_t max_inputs = cell_ == Cell::Lstm ? 8 : 6;
  if (desc.inputs.size() < 3 || desc.inputs.size() > max_inputs) {
    return error(desc, Error::InvalidArgument,
                 "has " + std::to_string(desc.inputs.size()) + " inputs (expected 3.." +
                     std::to_string(max_inputs) + ")");
  }
  if (!desc.post_ops.empty()) return error(desc, Error::NotSupported, "has fused post-ops");
  const size_t max_outputs = cell_ == Cell::Lstm ? 3 : 2;
  if (desc.num_outputs < 1 || static_cast<size_t>(desc.num_outputs) > max_outputs) {
    return error(desc, Error::NotSupported,
                 "asks for " + std::to_string(desc.num_outputs) + " outputs (expected 1.." +
                     std::to_string(max_outputs) + ")");
  }
  if (input_present(desc, kSequenceLens)) {
    return error(desc, Error::NotSupported, "input 4 (sequence_lens) is present");
  }
  if (input_present(desc, kP)) return error(desc, Error::NotSupported, "input 7 (P) is present");
  static constexpr const char* kNames[] = {
      "input 0 (X)",         "input 1 (W)",        "input 2 (R)", "input 3 (B)", "",
      "input 5 (initial_h)", "input 6 (initial_c)"};
  for (size_t i = 0; i < desc.inputs.size(); ++i) {
    if (!input_present(desc, i)) {
      if (i < 3) return error(desc, Error::InvalidArgument, std::string(kNames[i]) + " is absent");
      continue;
    }
    if (desc.inputs[i].dtype != runtime::ScalarType::Float32) {
      return error(desc, Error::NotSupported,
                   std::string(kNames[i]) + " has dtype " +
                       std::string(runtime::to_string(desc.inputs[i].dtype)) + " (expected f32)");
    }
    const runtime::Tensor* constant = input_constant(desc, i);
    if (constant != nullptr &&
        (constant->dtype() != desc.inputs[i].dtype || !constant->is_contiguous() ||
         !std::equal(constant->sizes().begin(), constant->sizes().end(),
                     desc.inputs[i].sizes.begin(), desc.inputs[i].sizes.end()))) {
      return error(desc, Error::InvalidArgument,
                   "constant " + std::string(kNames[i]) +
                       " does not match its declared type (or is not contiguous)");
    }
    if (desc.inputs[i].sizes.size() != (i == kB ? 2u : 3u)) {
      return error(desc, Error::InvalidArgument,
                   std::string(kNames[i]) + " has shape " +
                       runtime::shape_to_string(desc.inputs[i].sizes) + " (expected rank " +
                       (i == kB ? "2)" : "3)"));
    }
  }
  for (size_t i : {kW, kR}) {
    if (input_constant(desc, i) == nullptr) {
      return error(desc, Error::NotSupported, std::string(kNames[i]) + " is not constant");
    }
  }
  const std::vector<int64_t>& x = desc.inputs[kX].sizes;
  d_.seq = x[d_.layout == 0 ? 0 : 1];
  d_.batch = x[d_.layout == 0 ? 1 : 0];
  d_.input = x[2];
  d_.hidden = desc.inputs[kR].sizes[2];
  d_.gates = cell_ == Cell::Lstm ? 4 : 3;
  Attrs attrs(desc);
  KILN_ASSIGN_OR_RETURN(int64_t hidden_size, attrs.get_int("hidden_size", d_.hidden));
  if (hidden_size != d_.hidden || d_.hidden <= 0) {
    return error(desc, Error::InvalidArgument,
                 "attribute 'hidden_size' is " + std::to_string(hidden_size) +
                     " (expected R's last dimension " + std::to_string(d_.hidden) + ")");
  }
  const int64_t gh = d_.gates * d_.hidden;
  const std::vector<int64_t> state = d_.layout == 0
                                         ? std::vector<int64_t>{d_.dirs, d_.batch, d_.hidden}
                                         : std::vector<int64_t>{d_.batch, d_.dirs, d_.hidden};
  const std::vector<std::vector<int64_t>> expected = {
      x, {d_.dirs, gh, d_.input}, {d_.dirs, gh, d_.hidden}, {d_.dirs, 2 * gh}, {}, state, state};
  for (size_t i = 1; i < desc.inputs.size(); ++i) {
    if (i == kSequenceLens || !input_present(desc, i)) continue;
    if (desc.inputs[i].sizes != expected[i]) {
      return error(desc, Error::InvalidArgument,
                   std::string(kNames[i]) + " has shape " +
                       runtime::shape_to_string(desc.inputs[i].sizes) + " (expected " +
                       runtime::shape_to_string(expected[i]) + ")");
    }
  }
  if (d_.seq <= 0 || d_.batch <= 0 || d_.input <= 0) {
    return error(desc, Error::NotSupported,
                 "input 0 (X) has shape " + runtime::shape_to_string(x) + " (expected no zero)");
  }
  return Status();
}

void RnnOp::fill_bias(const float* b) {
  auto* out = static_cast<float*>(bias_.get_data_handle());
  const int64_t H = d_.hidden, gh = d_.gates * H;
  const int64_t bias_gates = cell_ == Cell::LbrGru ? 4 : d_.gates;
  for (int64_t dir = 0; dir < d_.dirs; ++dir) {
    float* o = out + dir * bias_gates * H;
    if (b == nullptr) {
      std::fill(o, o + bias_gates * H, 0.0f);
      continue;
    }
    const float* wb = b + dir * 2 * gh;
    const float* rb = wb + gh;
    for (int64_t g = 0; g < d_.gates; ++g) {
      const int64_t from = onnx_gate(cell_, g) * H;
      // Linear-before-reset GRU keeps Rbh apart: it is added before the reset gate multiplies.
      const bool apart = cell_ == Cell::LbrGru && g == 2;
      for (int64_t j = 0; j < H; ++j) {
        o[g * H + j] = wb[from + j] + (apart ? 0.0f : rb[from + j]);
      }
    }
    if (cell_ == Cell::LbrGru) std::copy(rb + 2 * H, rb + 3 * H, o + 3 * H);
  }
}

void RnnOp::copy_state(const float* from, float* to, bool to_ldnc) const {
  const int64_t H = d_.hidden;
  for (int64_t dir = 0; dir < d_.dirs; ++dir) {
    for (int64_t n = 0; n < d_.batch; ++n) {
      const int64_t ldnc = (dir * d_.batch + n) * H;
      const int64_t onnx = (n * d_.dirs + dir) * H;
      const float* src = from + (to_ldnc ? onnx : ldnc);
      std::copy(src, src + H, to + (to_ldnc ? ldnc : onnx));
    }
  }
}

void RnnOp::scatter_y(float* y) const {
  // oneDNN [T, N, D*H] to ONNX layout 0 [T, D, N, H].
  const int64_t H = d_.hidden;
  for (int64_t t = 0; t < d_.seq; ++t) {
    for (int64_t n = 0; n < d_.batch; ++n) {
      for (int64_t dir = 0; dir < d_.dirs; ++dir) {
        const float* src = y_buffer_.data() + ((t * d_.batch + n) * d_.dirs + dir) * H;
        std::copy(src, src + H, y + ((t * d_.dirs + dir) * d_.batch + n) * H);
      }
    }
  }
}

Status RnnOp::build(const OpDesc& desc, dnnl::rnn_direction direction) {
  const int64_t H = d_.hidden, T = d_.seq, N = d_.batch, D = d_.dirs;
  const auto f32 = memory::data_type::f32;
  const auto seq_tag = d_.layout == 0 ? memory::format_tag::tnc : memory::format_tag::ntc;
  memory::desc src_layer_md({T, N, d_.input}, f32, seq_tag);
  memory::desc dst_layer_md({T, N, D * H}, f32, seq_tag);
  memory::desc state_md({1, D, N, H}, f32, memory::format_tag::ldnc);
  const int64_t bias_gates = cell_ == Cell::LbrGru ? 4 : d_.gates;
  memory::desc bias_md({1, D, bias_gates, H}, f32, memory::format_tag::ldgo);
  const auto weight_tag = N <= kSmallBatch ? memory::format_tag::ldigo : memory::format_tag::any;
  memory::desc w_want({1, D, d_.input, d_.gates, H}, f32, weight_tag);
  memory::desc r_want({1, D, H, d_.gates, H}, f32, weight_tag);
  const int num_states = cell_ == Cell::Lstm ? 2 : 1;
  std::array<memory::desc, 2> src_iter_md, dst_iter_md;
  for (int s = 0; s < num_states; ++s) {
    if (has_initial_[s]) src_iter_md[static_cast<size_t>(s)] = state_md;
    // oneDNN computes LSTM's final c with its final h only: Y_h brings Y_c into a buffer.
    if (desc.num_outputs > 1) dst_iter_md[static_cast<size_t>(s)] = state_md;
  }
  const auto prop = dnnl::prop_kind::forward_inference;
  dnnl::primitive_attr attr = base_attr();
  dnnl::primitive_desc_base pd;
  memory::desc w_md, r_md;
  if (cell_ == Cell::Lstm) {
    dnnl::lstm_forward::primitive_desc lstm(
        dnnl::lstm_forward::desc(prop, direction, src_layer_md, src_iter_md[0], src_iter_md[1],
                                 w_want, r_want, bias_md, dst_layer_md, dst_iter_md[0],
                                 dst_iter_md[1]),
        attr, cpu_engine());
    primitive_ = dnnl::lstm_forward(lstm);
    w_md = lstm.weights_layer_desc();
    r_md = lstm.weights_iter_desc();
    pd = lstm;
  } else if (cell_ == Cell::Gru) {
    dnnl::gru_forward::primitive_desc gru(
        dnnl::gru_forward::desc(prop, direction, src_layer_md, src_iter_md[0], w_want, r_want,
                                bias_md, dst_layer_md, dst_iter_md[0]),
        attr, cpu_engine());
    primitive_ = dnnl::gru_forward(gru);
    w_md = gru.weights_layer_desc();
    r_md = gru.weights_iter_desc();
    pd = gru;
  } else {
    dnnl::lbr_gru_forward::primitive_desc gru(
        dnnl::lbr_gru_forward::desc(prop, direction, src_layer_md, src_iter_md[0], w_want, r_want,
                                    bias_md, dst_layer_md, dst_iter_md[0]),
        attr, cpu_engine());
    primitive_ = dnnl::lbr_gru_forward(gru);
    w_md = gru.weights_layer_desc();
    r_md = gru.weights_iter_desc();
    pd = gru;
  }
  describe_ = describe_pd(pd) + " wei:" + format_of(w_md);
  hold_scratchpad(pd);

  GateMajor w = gate_major(cell_, d_, input_constant(desc, kW)->data_ptr<float>(), d_.input);
  GateMajor r = gate_major(cell_, d_, input_constant(desc, kR)->data_ptr<float>(), H);
  KILN_ASSIGN_OR_RETURN(memory weights_layer, pack_constant(desc, kW, w.md, w.values.data(), w_md));
  KILN_ASSIGN_OR_RETURN(memory weights_iter, pack_constant(desc, kR, r.md, r.values.data(), r_md));
  args_[DNNL_ARG_WEIGHTS_LAYER] = weights_layer;
  args_[DNNL_ARG_WEIGHTS_ITER] = weights_iter;

  bias_ = memory(bias_md, cpu_engine());
  const runtime::Tensor* b = input_present(desc, kB) ? input_constant(desc, kB) : nullptr;
  if (input_present(desc, kB) && b == nullptr) bias_input_ = static_cast<int>(kB);
  fill_bias(b != nullptr ? b->data_ptr<float>() : nullptr);
  args_[DNNL_ARG_BIAS] = bias_;

  src_layer_ = wrap(src_layer_md, nullptr);
  args_[DNNL_ARG_SRC_LAYER] = src_layer_;
  // Layout 0 puts the directions before the batch rows: oneDNN's concatenation matches it for
  // one row only.
  y_direct_ = d_.layout == 1 || D == 1 || N == 1;
  if (!y_direct_) y_buffer_.resize(static_cast<size_t>(T * N * D * H));
  dst_layer_ = wrap(dst_layer_md, y_direct_ ? nullptr : y_buffer_.data());
  args_[DNNL_ARG_DST_LAYER] = dst_layer_;
  static constexpr int kSrcIter[] = {DNNL_ARG_SRC_ITER, DNNL_ARG_SRC_ITER_C};
  static constexpr int kDstIter[] = {DNNL_ARG_DST_ITER, DNNL_ARG_DST_ITER_C};
  const size_t state_size = static_cast<size_t>(D * N * H);
  for (size_t s = 0; s < static_cast<size_t>(num_states); ++s) {
    if (has_initial_[s]) {
      // A constant state, and every state of layout 1, is held in ldnc by the op.
      if (held_[s] || d_.layout == 1) state_in_[s].resize(state_size);
      if (initial_[s] != nullptr) {
        const float* values = initial_[s]->data_ptr<float>();
        if (d_.layout == 0) {
          std::copy(values, values + state_size, state_in_[s].begin());
        } else {
          copy_state(values, state_in_[s].data(), true);
        }
      }
      src_iter_[s] = wrap(state_md, state_in_[s].empty() ? nullptr : state_in_[s].data());
      args_[kSrcIter[s]] = src_iter_[s];
    }
    if (desc.num_outputs > 1) {
      const bool asked = desc.num_outputs > 1 + static_cast<int>(s);
      if (d_.layout == 1 || !asked) state_out_[s].resize(state_size);
      dst_iter_[s] = wrap(state_md, state_out_[s].empty() ? nullptr : state_out_[s].data());
      args_[kDstIter[s]] = dst_iter_[s];
    }
  }
  const std::vector<int64_t> y =
      d_.layout == 0 ? std::vector<int64_t>{T, D, N, H} : std::vector<int64_t>{N, T, D, H};
  const std::vector<int64_t> states =
      d_.layout == 0 ? std::vector<int64_t>{D, N, H} : std::vector<int64_t>{N, D, H};
  outputs_.push_back(TensorDesc{runtime::ScalarType::Float32, y});
  for (int i = 1; i < desc.num_outputs; ++i) {
    outputs_.push_back(TensorDesc{runtime::ScalarType::Float32, states});
  }
  return Status();
}

Result<std::unique_ptr<CpuOp>> RnnOp::create(const OpDesc& desc) {
  auto op = std::make_unique<RnnOp>();
  op->op_ = desc.op;
  op->num_threads_ = desc.num_threads;
  op->num_inputs_ = desc.inputs.size();
  if (desc.op == "GRU") {
    Attrs attrs(desc);
    KILN_ASSIGN_OR_RETURN(int64_t linear, attrs.get_int("linear_before_reset", 0));
    op->cell_ = linear != 0 ? Cell::LbrGru : Cell::Gru;
  }
  dnnl::rnn_direction direction = dnnl::rnn_direction::unidirectional_left2right;
  KILN_RETURN_IF_ERROR(op->check_attributes(desc, op->d_.dirs, direction));
  KILN_RETURN_IF_ERROR(op->validate(desc));
  for (size_t s = 0; s < 2; ++s) {
    op->has_initial_[s] = input_present(desc, kInitialH + s);
    op->initial_[s] = op->has_initial_[s] ? input_constant(desc, kInitialH + s) : nullptr;
    op->held_[s] = op->initial_[s] != nullptr;
  }
  if (op->cell_ == Cell::Lstm && op->has_initial_[0] != op->has_initial_[1]) {
    // oneDNN takes both initial states or neither: the absent one gets ONNX's zeros.
    const size_t absent = op->has_initial_[0] ? 1 : 0;
    op->has_initial_[absent] = true;
    op->held_[absent] = true;
  }
  if (op->cell_ == Cell::Lstm && op->d_.batch <= kSmallBatch && own_vector_loops()) {
    const Dims& d = op->d_;
    return create_small_batch_lstm(desc,
                                   LstmShape{d.seq, d.batch, d.input, d.hidden, d.dirs, d.layout});
  }
  if (op->d_.batch <= kSmallBatch) {
    const int threads = desc.num_threads > 0 ? desc.num_threads : omp_get_max_threads();
    if (op->d_.dirs == 2 && op->d_.layout == 0 && threads > 1) return create_rnn_directions(desc);
    op->num_threads_ = 1;
  }
  ThreadScope threads(op->num_threads_);
  KILN_RETURN_IF_ERROR(op->build(desc, direction));
  return std::unique_ptr<CpuOp>(std::move(op));
}

Status RnnOp::run(runtime::Span<const runtime::Tensor*> inputs,
                  runtime::Span<runtime::Tensor*> outputs) {
  KILN_RETURN_IF_ERROR(check_run_counts(inputs, outputs));
  auto need = [&](size_t index) -> Status {
    if (inputs[index] != nullptr) return Status();
    return Status(Error::InvalidArgument,
                  "run op '" + op_ + "' (oneDNN): input " + std::to_string(index) + " is null");
  };
  KILN_RETURN_IF_ERROR(need(kX));
  point(src_layer_, inputs[kX]->data());
  if (bias_input_ >= 0) {
    KILN_RETURN_IF_ERROR(need(kB));
    fill_bias(inputs[kB]->data_ptr<float>());
  }
  for (size_t s = 0; s < 2; ++s) {
    if (!has_initial_[s] || held_[s]) continue;
    KILN_RETURN_IF_ERROR(need(kInitialH + s));
    const float* values = inputs[kInitialH + s]->data_ptr<float>();
    if (d_.layout == 0) {
      point(src_iter_[s], values);
    } else {
      copy_state(values, state_in_[s].data(), true);
    }
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (outputs[i] == nullptr) {
      return Status(Error::InvalidArgument,
                    "run op '" + op_ + "' (oneDNN): output " + std::to_string(i) + " is null");
    }
  }
  if (y_direct_) point(dst_layer_, outputs[0]->mutable_data());
  for (size_t s = 0; s + 1 < outputs.size(); ++s) {
    if (d_.layout == 0) point(dst_iter_[s], outputs[s + 1]->mutable_data());
  }
  KILN_RETURN_IF_ERROR(execute(primitive_, args_));
  if (!y_direct_) scatter_y(outputs[0]->mutable_data_ptr<float>());
  for (size_t s = 0; s + 1 < outputs.size(); ++s) {
    if (d_.layout == 1)
      copy_state(state_out_[s].data(), outputs[s + 1]->mutable_data_ptr<float>(), false);
  }
  return Status();
}

}  // namespace

Result<std::unique_ptr<CpuOp>> create_rnn(const OpDesc& desc) { return RnnOp::create(desc); }

}  // namespace kiln::engine::cpu::dnnl_impl
