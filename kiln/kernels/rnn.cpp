#include <kiln/kernels/adapter.h>
#include <kiln/kernels/dispatch.h>
#include <kiln/kernels/gemm_rows.h>
#include <kiln/kernels/kernels.h>
#include <kiln/kernels/rnn_ops.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

namespace kiln::kernels {

using runtime::Error;
using runtime::Result;
using runtime::ScalarType;
using runtime::Span;
using runtime::Status;
using runtime::Tensor;

namespace {

int64_t num_gates(RnnCell cell) {
  if (cell == RnnCell::Gru) return 3;
  return cell == RnnCell::Lstm ? 4 : 1;
}

// Activation functions per direction: RNN f; GRU f, g; LSTM f, g, h.
int64_t num_activations(RnnCell cell) {
  if (cell == RnnCell::Gru) return 2;
  return cell == RnnCell::Lstm ? 3 : 1;
}

std::vector<RnnActivation> default_activations(RnnCell cell) {
  using Kind = RnnActivation::Kind;
  if (cell == RnnCell::Rnn) return {{Kind::Tanh}};
  if (cell == RnnCell::Gru) return {{Kind::Sigmoid}, {Kind::Tanh}};
  return {{Kind::Sigmoid}, {Kind::Tanh}, {Kind::Tanh}};
}

struct ActivationSpec {
  const char* name;
  RnnActivation::Kind kind;
  bool has_alpha;
  bool has_beta;
  double alpha;
  double beta;
};

constexpr ActivationSpec kActivationSpecs[] = {
    {"relu", RnnActivation::Kind::Relu, false, false, 0.0, 0.0},
    {"tanh", RnnActivation::Kind::Tanh, false, false, 0.0, 0.0},
    {"sigmoid", RnnActivation::Kind::Sigmoid, false, false, 0.0, 0.0},
    {"affine", RnnActivation::Kind::Affine, true, true, 1.0, 0.0},
    {"leakyrelu", RnnActivation::Kind::LeakyRelu, true, false, 0.01, 0.0},
    {"thresholdedrelu", RnnActivation::Kind::ThresholdedRelu, true, false, 1.0, 0.0},
    {"scaledtanh", RnnActivation::Kind::ScaledTanh, true, true, 1.0, 1.0},
    {"hardsigmoid", RnnActivation::Kind::HardSigmoid, true, true, 0.2, 0.5},
    {"elu", RnnActivation::Kind::Elu, true, false, 1.0, 0.0},
    {"softsign", RnnActivation::Kind::Softsign, false, false, 0.0, 0.0},
    {"softplus", RnnActivation::Kind::Softplus, false, false, 0.0, 0.0},
};

template <typename C>
C activate(const RnnActivation& a, C x) {
  using Kind = RnnActivation::Kind;
  const C alpha = static_cast<C>(a.alpha);
  const C beta = static_cast<C>(a.beta);
  switch (a.kind) {
    case Kind::Relu:
      return x > C{0} ? x : C{0};
    case Kind::Tanh:
      return std::tanh(x);
    case Kind::Sigmoid:
      // Written so that exp never overflows for large |x|.
      if (x >= C{0}) return C{1} / (C{1} + std::exp(-x));
      return std::exp(x) / (C{1} + std::exp(x));
    case Kind::Affine:
      return alpha * x + beta;
    case Kind::LeakyRelu:
      return x >= C{0} ? x : alpha * x;
    case Kind::ThresholdedRelu:
      return x > alpha ? x : C{0};
    case Kind::ScaledTanh:
      return alpha * std::tanh(beta * x);
    case Kind::HardSigmoid:
      return std::min(std::max(alpha * x + beta, C{0}), C{1});
    case Kind::Elu:
      return x >= C{0} ? x : alpha * (std::exp(x) - C{1});
    case Kind::Softsign:
      return x / (C{1} + std::abs(x));
    case Kind::Softplus:
      return x > C{0} ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x));
  }
  return x;
}

std::string lower(std::string_view text) {
  std::string out(text);
  for (char& ch : out) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return out;
}

std::string shape_of(const Tensor& t) { return runtime::shape_to_string(t.sizes()); }

// InvalidArgument "<name> has shape [..] (expected [..])" unless `t` has `expected` sizes.
Status check_shape(std::string_view op, std::string_view name, const Tensor& t,
                   const std::vector<int64_t>& expected) {
  if (std::equal(t.sizes().begin(), t.sizes().end(), expected.begin(), expected.end())) {
    return Status();
  }
  return internal::invalid_argument(op, std::string(name) + " has shape " + shape_of(t) +
                                            " (expected " + runtime::shape_to_string(expected) +
                                            ")");
}

// Everything `rnn` needs besides the data, derived from validated inputs and options.
struct Problem {
  int64_t seq = 0, batch = 0, input = 0, hidden = 0, dirs = 1, gates = 1;
  std::vector<RnnActivation> activations;  // num_activations per direction, dirs times
};

Result<Problem> make_problem(const RnnInputs& in, const RnnOptions& options) {
  const std::string_view op = rnn_op_name(options.cell);
  if (in.x == nullptr || in.w == nullptr || in.r == nullptr) {
    return internal::invalid_argument(op, "inputs X, W and R are required");
  }
  KILN_RETURN_IF_ERROR(check_dtype(op, "input 0 (X)", in.x->dtype(), kFloatDtypes));
  const char* names[] = {"input 1 (W)",         "input 2 (R)",         "input 3 (B)",
                         "input 5 (initial_h)", "input 6 (initial_c)", "input 7 (P)"};
  const Tensor* same_dtype[] = {in.w, in.r, in.b, in.initial_h, in.initial_c, in.p};
  for (size_t i = 0; i < 6; ++i) {
    if (same_dtype[i] == nullptr) continue;
    KILN_RETURN_IF_ERROR(
        internal::check_same_dtype(op, names[i], same_dtype[i]->dtype(), in.x->dtype()));
  }
  if (options.cell != RnnCell::Lstm && (in.initial_c != nullptr || in.p != nullptr)) {
    return internal::invalid_argument(op, "inputs initial_c and P belong to LSTM only");
  }
  if (options.layout != 0 && options.layout != 1) {
    return internal::invalid_argument(
        op, "attribute 'layout' is " + std::to_string(options.layout) + " (expected 0 or 1)");
  }
  if (options.clip && !(*options.clip > 0.0)) {
    return internal::invalid_argument(
        op, "attribute 'clip' is " + std::to_string(*options.clip) + " (expected > 0)");
  }
  if (options.linear_before_reset && options.cell != RnnCell::Gru) {
    return internal::invalid_argument(op, "attribute 'linear_before_reset' belongs to GRU only");
  }
  if (options.input_forget && options.cell != RnnCell::Lstm) {
    return internal::invalid_argument(op, "attribute 'input_forget' belongs to LSTM only");
  }
  for (auto [name, t] : {std::pair{"input 0 (X)", in.x}, std::pair{"input 1 (W)", in.w},
                         std::pair{"input 2 (R)", in.r}}) {
    if (t->dim() != 3) {
      return internal::invalid_argument(
          op, std::string(name) + " has shape " + shape_of(*t) + " (expected rank 3)");
    }
  }
  Problem p;
  p.dirs = options.direction == RnnDirection::Bidirectional ? 2 : 1;
  p.gates = num_gates(options.cell);
  p.seq = in.x->size(options.layout == 0 ? 0 : 1);
  p.batch = in.x->size(options.layout == 0 ? 1 : 0);
  p.input = in.x->size(2);
  p.hidden = options.hidden_size != 0 ? options.hidden_size : in.r->size(2);
  if (p.hidden <= 0) {
    return internal::invalid_argument(
        op, "attribute 'hidden_size' is " + std::to_string(p.hidden) + " (expected > 0)");
  }
  const int64_t gh = p.gates * p.hidden;
  KILN_RETURN_IF_ERROR(check_shape(op, "input 1 (W)", *in.w, {p.dirs, gh, p.input}));
  KILN_RETURN_IF_ERROR(check_shape(op, "input 2 (R)", *in.r, {p.dirs, gh, p.hidden}));
  if (in.b != nullptr)
    KILN_RETURN_IF_ERROR(check_shape(op, "input 3 (B)", *in.b, {p.dirs, 2 * gh}));
  if (in.sequence_lens != nullptr) {
    KILN_RETURN_IF_ERROR(
        check_dtype(op, "input 4 (sequence_lens)", in.sequence_lens->dtype(), kIndexDtypes));
    KILN_RETURN_IF_ERROR(check_shape(op, "input 4 (sequence_lens)", *in.sequence_lens, {p.batch}));
  }
  const std::vector<int64_t> state = options.layout == 0
                                         ? std::vector<int64_t>{p.dirs, p.batch, p.hidden}
                                         : std::vector<int64_t>{p.batch, p.dirs, p.hidden};
  if (in.initial_h != nullptr) {
    KILN_RETURN_IF_ERROR(check_shape(op, "input 5 (initial_h)", *in.initial_h, state));
  }
  if (in.initial_c != nullptr) {
    KILN_RETURN_IF_ERROR(check_shape(op, "input 6 (initial_c)", *in.initial_c, state));
  }
  if (in.p != nullptr)
    KILN_RETURN_IF_ERROR(check_shape(op, "input 7 (P)", *in.p, {p.dirs, 3 * p.hidden}));

  const int64_t per_dir = num_activations(options.cell);
  p.activations =
      options.activations.empty() ? default_activations(options.cell) : options.activations;
  const auto given = static_cast<int64_t>(p.activations.size());
  if (given == per_dir && p.dirs == 2) {
    // One set for both directions.
    const std::vector<RnnActivation> forward = p.activations;
    p.activations.insert(p.activations.end(), forward.begin(), forward.end());
  } else if (given != per_dir * p.dirs) {
    return internal::invalid_argument(op, "attribute 'activations' lists " + std::to_string(given) +
                                              " functions (expected " +
                                              std::to_string(per_dir * p.dirs) + ": " +
                                              std::to_string(per_dir) + " per direction)");
  }
  return p;
}

// Per-direction state and scratch, in compute type C.
template <typename T>
class Runner {
 public:
  using C = ComputeType<T>;

  Runner(const Problem& p, const RnnInputs& in, const RnnOptions& o, const RnnOutputs& out,
         const std::vector<int64_t>& lens)
      : p_(p), in_(in), o_(o), out_(out), lens_(lens) {}

  void run_direction(int64_t d) {
    const bool reverse = o_.direction == RnnDirection::Reverse || d == 1;
    const int64_t gh = p_.gates * p_.hidden;
    const int64_t H = p_.hidden;
    d_ = d;
    act_ = p_.activations.data() + d * num_activations(o_.cell);
    load_weights(d);
    input_products(d);
    init_state(in_.initial_h, d, h_);
    if (o_.cell == RnnCell::Lstm) init_state(in_.initial_c, d, c_);
    gate_.assign(static_cast<size_t>(gh), C{0});
    next_.assign(static_cast<size_t>(H), C{0});
    for (int64_t s = 0; s < p_.seq; ++s) {
      for (int64_t b = 0; b < p_.batch; ++b) {
        const int64_t len = lens_[static_cast<size_t>(b)];
        if (s >= len) continue;
        const int64_t t = reverse ? len - 1 - s : s;
        const int64_t row = o_.layout == 0 ? t * p_.batch + b : b * p_.seq + t;
        step(xw_.data() + row * gh, b);
        if (out_.y != nullptr) {
          const int64_t at = o_.layout == 0 ? ((t * p_.dirs + d) * p_.batch + b) * H
                                            : ((b * p_.seq + t) * p_.dirs + d) * H;
          T* y = out_.y->mutable_data_ptr<T>() + at;
          for (int64_t j = 0; j < H; ++j) y[j] = store<T>(h_[static_cast<size_t>(b * H + j)]);
        }
      }
    }
    write_state(out_.y_h, d, h_);
    if (o_.cell == RnnCell::Lstm) write_state(out_.y_c, d, c_);
  }

 private:
  C clipped(C x) const {
    if (!o_.clip) return x;
    const auto limit = static_cast<C>(*o_.clip);
    return std::min(std::max(x, -limit), limit);
  }
  C f(int i, C x) const { return activate(act_[i], clipped(x)); }

  // R in compute type, and the R biases (zeros without B); W biases go into xw_.
  void load_weights(int64_t d) {
    const int64_t gh = p_.gates * p_.hidden;
    const T* r = in_.r->data_ptr<T>() + d * gh * p_.hidden;
    if constexpr (std::is_same_v<T, C>) {
      r_ = r;
    } else {
      r_copy_.resize(static_cast<size_t>(gh * p_.hidden));
      for (size_t i = 0; i < r_copy_.size(); ++i) r_copy_[i] = load(r[i]);
      r_ = r_copy_.data();
    }
    wb_.assign(static_cast<size_t>(gh), C{0});
    rb_.assign(static_cast<size_t>(gh), C{0});
    if (in_.b != nullptr) {
      const T* bias = in_.b->data_ptr<T>() + d * 2 * gh;
      for (int64_t j = 0; j < gh; ++j) {
        wb_[static_cast<size_t>(j)] = load(bias[j]);
        rb_[static_cast<size_t>(j)] = load(bias[gh + j]);
      }
    }
  }

  // xw_ = X W^T + Wb for every (step, batch) row of X in storage order, one product up front
  // so the loop over steps only does the recurrent part.
  void input_products(int64_t d) {
    const int64_t gh = p_.gates * p_.hidden;
    const int64_t rows = p_.seq * p_.batch;
    xw_.resize(static_cast<size_t>(rows * gh));
    std::vector<C> row(static_cast<size_t>(gh));
    const internal::GemmProblem problem{rows, gh, p_.input, false, true};
    internal::gemm_rows(problem, in_.x->data_ptr<T>(), in_.w->data_ptr<T>() + d * gh * p_.input,
                        row.data(), [&](int64_t i, const C* values) {
                          C* dst = xw_.data() + i * gh;
                          for (int64_t j = 0; j < gh; ++j) dst[j] = values[j] + wb_[j];
                        });
  }

  int64_t state_offset(int64_t d, int64_t b) const {
    return (o_.layout == 0 ? d * p_.batch + b : b * p_.dirs + d) * p_.hidden;
  }

  void init_state(const Tensor* initial, int64_t d, std::vector<C>& state) {
    state.assign(static_cast<size_t>(p_.batch * p_.hidden), C{0});
    if (initial == nullptr) return;
    for (int64_t b = 0; b < p_.batch; ++b) {
      const T* src = initial->data_ptr<T>() + state_offset(d, b);
      for (int64_t j = 0; j < p_.hidden; ++j) state[b * p_.hidden + j] = load(src[j]);
    }
  }

  void write_state(Tensor* out, int64_t d, const std::vector<C>& state) {
    if (out == nullptr) return;
    for (int64_t b = 0; b < p_.batch; ++b) {
      T* dst = out->mutable_data_ptr<T>() + state_offset(d, b);
      const bool ran = lens_[static_cast<size_t>(b)] > 0;
      for (int64_t j = 0; j < p_.hidden; ++j) {
        dst[j] = store<T>(ran ? state[b * p_.hidden + j] : C{0});
      }
    }
  }

  // gate_[j] += h . R[j] for rows j in [first, last): two contiguous rows per dot product.
  void recurrent(const C* h, int64_t first, int64_t last) {
    for (int64_t j = first; j < last; ++j) {
      const C* r_row = r_ + j * p_.hidden;
      C sum{0};
      for (int64_t k = 0; k < p_.hidden; ++k) sum += h[k] * r_row[k];
      gate_[j] += sum;
    }
  }

  void step(const C* xw, int64_t b) {
    const int64_t H = p_.hidden;
    C* h = h_.data() + b * H;
    std::copy(xw, xw + p_.gates * H, gate_.begin());
    if (o_.cell == RnnCell::Rnn) {
      recurrent(h, 0, H);
      for (int64_t j = 0; j < H; ++j) h[j] = f(0, gate_[j] + rb_[j]);
    } else if (o_.cell == RnnCell::Gru) {
      gru_step(h);
    } else {
      lstm_step(h, c_.data() + b * H);
    }
  }

  void gru_step(C* h) {
    const int64_t H = p_.hidden;
    recurrent(h, 0, 2 * H);  // z, r
    C* z = gate_.data();
    C* r = z + H;
    C* hh = r + H;
    for (int64_t j = 0; j < 2 * H; ++j) gate_[j] = f(0, gate_[j] + rb_[j]);
    if (o_.linear_before_reset) {
      std::fill(next_.begin(), next_.end(), C{0});
      for (int64_t j = 0; j < H; ++j) {
        const C* r_row = r_ + (2 * H + j) * H;
        C sum{0};
        for (int64_t k = 0; k < H; ++k) sum += h[k] * r_row[k];
        hh[j] = f(1, hh[j] + r[j] * (sum + rb_[2 * H + j]));
      }
    } else {
      for (int64_t k = 0; k < H; ++k) next_[k] = r[k] * h[k];
      recurrent(next_.data(), 2 * H, 3 * H);
      for (int64_t j = 0; j < H; ++j) hh[j] = f(1, hh[j] + rb_[2 * H + j]);
    }
    for (int64_t j = 0; j < H; ++j) h[j] = (C{1} - z[j]) * hh[j] + z[j] * h[j];
  }

  void lstm_step(C* h, C* c) {
    const int64_t H = p_.hidden;
    recurrent(h, 0, 4 * H);
    for (int64_t j = 0; j < 4 * H; ++j) gate_[j] += rb_[j];
    C* gi = gate_.data();
    C* go = gi + H;
    C* gf = go + H;
    C* gc = gf + H;
    const T* peep = in_.p != nullptr ? in_.p->data_ptr<T>() + d_ * 3 * H : nullptr;
    for (int64_t j = 0; j < H; ++j) {
      C i_pre = gi[j], f_pre = gf[j], o_pre = go[j];
      if (peep != nullptr) {
        i_pre += load(peep[j]) * c[j];
        f_pre += load(peep[2 * H + j]) * c[j];
      }
      const C i = f(0, i_pre);
      const C forget = o_.input_forget ? C{1} - i : f(0, f_pre);
      c[j] = forget * c[j] + i * f(1, gc[j]);
      if (peep != nullptr) o_pre += load(peep[H + j]) * c[j];
      h[j] = f(0, o_pre) * f(2, c[j]);
    }
  }

  const Problem& p_;
  const RnnInputs& in_;
  const RnnOptions& o_;
  const RnnOutputs& out_;
  const std::vector<int64_t>& lens_;
  int64_t d_ = 0;
  const RnnActivation* act_ = nullptr;
  const C* r_ = nullptr;
  std::vector<C> r_copy_, wb_, rb_, xw_, h_, c_, gate_, next_;
};

}  // namespace

std::string_view rnn_op_name(RnnCell cell) {
  if (cell == RnnCell::Gru) return "GRU";
  return cell == RnnCell::Lstm ? "LSTM" : "RNN";
}

Result<std::vector<RnnActivation>> parse_rnn_activations(std::string_view names,
                                                         Span<const double> alphas,
                                                         Span<const double> betas) {
  std::vector<RnnActivation> out;
  if (names.empty()) return out;
  size_t next_alpha = 0;
  size_t next_beta = 0;
  size_t start = 0;
  while (start <= names.size()) {
    size_t end = names.find(',', start);
    if (end == std::string_view::npos) end = names.size();
    const std::string name = lower(names.substr(start, end - start));
    const ActivationSpec* spec = nullptr;
    for (const auto& candidate : kActivationSpecs) {
      if (name == candidate.name) spec = &candidate;
    }
    if (spec == nullptr) {
      return Status(Error::InvalidArgument,
                    "attribute 'activations' names '" +
                        std::string(names.substr(start, end - start)) +
                        "' (expected Relu, Tanh, Sigmoid, Affine, LeakyRelu, ThresholdedRelu, "
                        "ScaledTanh, HardSigmoid, Elu, Softsign or Softplus)");
    }
    RnnActivation activation{spec->kind, spec->alpha, spec->beta};
    if (spec->has_alpha && next_alpha < alphas.size()) activation.alpha = alphas[next_alpha++];
    if (spec->has_beta && next_beta < betas.size()) activation.beta = betas[next_beta++];
    out.push_back(activation);
    start = end + 1;
  }
  return out;
}

Result<RnnShapes> rnn_shapes(const RnnInputs& inputs, const RnnOptions& options) {
  KILN_ASSIGN_OR_RETURN(Problem p, make_problem(inputs, options));
  RnnShapes shapes;
  if (options.layout == 0) {
    shapes.y = {p.seq, p.dirs, p.batch, p.hidden};
    shapes.y_h = {p.dirs, p.batch, p.hidden};
  } else {
    shapes.y = {p.batch, p.seq, p.dirs, p.hidden};
    shapes.y_h = {p.batch, p.dirs, p.hidden};
  }
  return shapes;
}

Status rnn(const RnnInputs& inputs, const RnnOptions& options, const RnnOutputs& outputs) {
  const std::string_view op = rnn_op_name(options.cell);
  KILN_ASSIGN_OR_RETURN(const Problem p, make_problem(inputs, options));
  const RnnShapes shapes = *rnn_shapes(inputs, options);
  for (const Tensor* t : {inputs.x, inputs.w, inputs.r, inputs.b, inputs.sequence_lens,
                          inputs.initial_h, inputs.initial_c, inputs.p}) {
    if (t != nullptr) KILN_RETURN_IF_ERROR(internal::check_contiguous(op, "an input", *t));
  }
  if (options.cell != RnnCell::Lstm && outputs.y_c != nullptr) {
    return internal::invalid_argument(op, "output Y_c belongs to LSTM only");
  }
  for (auto [name, t, shape] : {std::tuple{"output 0 (Y)", outputs.y, &shapes.y},
                                std::tuple{"output 1 (Y_h)", outputs.y_h, &shapes.y_h},
                                std::tuple{"output 2 (Y_c)", outputs.y_c, &shapes.y_h}}) {
    if (t == nullptr) continue;
    KILN_RETURN_IF_ERROR(internal::check_same_dtype(op, name, t->dtype(), inputs.x->dtype()));
    KILN_RETURN_IF_ERROR(internal::check_contiguous(op, name, *t));
    KILN_RETURN_IF_ERROR(check_shape(op, name, *t, *shape));
  }
  std::vector<int64_t> lens(static_cast<size_t>(p.batch), p.seq);
  if (inputs.sequence_lens != nullptr) {
    for (int64_t b = 0; b < p.batch; ++b) {
      const int64_t len = inputs.sequence_lens->dtype() == ScalarType::Int32
                              ? inputs.sequence_lens->data_ptr<int32_t>()[b]
                              : inputs.sequence_lens->data_ptr<int64_t>()[b];
      if (len < 0 || len > p.seq) {
        return internal::invalid_argument(op, "input 4 (sequence_lens) has " + std::to_string(len) +
                                                  " at index " + std::to_string(b) +
                                                  " (expected 0.." + std::to_string(p.seq) + ")");
      }
      lens[static_cast<size_t>(b)] = len;
    }
  }
  return dispatch<DtypeGroup::Float>(op, "input 0 (X)", inputs.x->dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    // Steps past a sequence's end are never written, so Y starts as zeros.
    if (outputs.y != nullptr) {
      T* y = outputs.y->mutable_data_ptr<T>();
      std::fill(y, y + outputs.y->numel(), store<T>(ComputeType<T>{0}));
    }
    Runner<T> runner(p, inputs, options, outputs, lens);
    for (int64_t d = 0; d < p.dirs; ++d) {
      runner.run_direction(d);
    }
    return Status();
  });
}

namespace {

Result<RnnOptions> read_options(RnnCell cell, const runtime::Attributes& attributes) {
  RnnOptions options;
  options.cell = cell;
  KILN_ASSIGN_OR_RETURN(std::string direction, attributes.get_string("direction", "forward"));
  if (direction == "forward") {
    options.direction = RnnDirection::Forward;
  } else if (direction == "reverse") {
    options.direction = RnnDirection::Reverse;
  } else if (direction == "bidirectional") {
    options.direction = RnnDirection::Bidirectional;
  } else {
    return Status(Error::InvalidArgument, "attribute 'direction' is '" + direction +
                                              "' (expected forward, reverse or bidirectional)");
  }
  KILN_ASSIGN_OR_RETURN(options.hidden_size, attributes.get_int("hidden_size", 0));
  if (attributes.has("hidden_size") && options.hidden_size <= 0) {
    return Status(
        Error::InvalidArgument,
        "attribute 'hidden_size' is " + std::to_string(options.hidden_size) + " (expected > 0)");
  }
  KILN_ASSIGN_OR_RETURN(std::string names, attributes.get_string("activations", ""));
  KILN_ASSIGN_OR_RETURN(std::vector<double> alphas, attributes.get_doubles("activation_alpha"));
  KILN_ASSIGN_OR_RETURN(std::vector<double> betas, attributes.get_doubles("activation_beta"));
  KILN_ASSIGN_OR_RETURN(options.activations, parse_rnn_activations(names, alphas, betas));
  if (attributes.has("clip")) {
    KILN_ASSIGN_OR_RETURN(double clip, attributes.get_double("clip", 0.0));
    options.clip = clip;
  }
  KILN_ASSIGN_OR_RETURN(options.layout, attributes.get_int("layout", 0));
  if (cell == RnnCell::Gru) {
    KILN_ASSIGN_OR_RETURN(int64_t linear, attributes.get_int("linear_before_reset", 0));
    options.linear_before_reset = linear != 0;
  }
  if (cell == RnnCell::Lstm) {
    KILN_ASSIGN_OR_RETURN(int64_t coupled, attributes.get_int("input_forget", 0));
    options.input_forget = coupled != 0;
  }
  return options;
}

// Inputs X, W, R, B, sequence_lens, initial_h (, initial_c, P for LSTM); outputs Y, Y_h (, Y_c),
// each optional past X, W, R. An absent output is not computed.
template <RnnCell kCell>
Status rnn_kernel(runtime::KernelContext& context, Span<runtime::EValue* const> inputs,
                  Span<runtime::EValue* const> outputs, const runtime::Attributes& attributes) {
  const std::string_view op = rnn_op_name(kCell);
  const size_t max_inputs = kCell == RnnCell::Lstm ? 8 : 6;
  const size_t max_outputs = kCell == RnnCell::Lstm ? 3 : 2;
  if (inputs.size() < 3 || inputs.size() > max_inputs || outputs.size() > max_outputs) {
    return internal::invalid_argument(op, "got " + std::to_string(inputs.size()) + " inputs and " +
                                              std::to_string(outputs.size()) +
                                              " outputs (expected 3.." +
                                              std::to_string(max_inputs) + " inputs and 0.." +
                                              std::to_string(max_outputs) + " outputs)");
  }
  auto options = read_options(kCell, attributes);
  if (!options.ok()) return options.status().with_context(internal::action(op));
  RnnInputs in;
  const Tensor** slots[] = {&in.x,         &in.w,         &in.r, &in.b, &in.sequence_lens,
                            &in.initial_h, &in.initial_c, &in.p};
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (internal::is_absent(inputs, i)) {
      if (i < 3)
        return internal::invalid_argument(
            op, "input " + std::to_string(i) + " is absent (expected X, W and R)");
      continue;
    }
    KILN_ASSIGN_OR_RETURN(*slots[i], internal::input_tensor(op, inputs, i));
  }
  KILN_ASSIGN_OR_RETURN(RnnShapes shapes, rnn_shapes(in, *options));
  RnnOutputs out;
  Tensor** targets[] = {&out.y, &out.y_h, &out.y_c};
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (outputs[i] == nullptr || outputs[i]->is_none()) continue;
    KILN_ASSIGN_OR_RETURN(runtime::EValue * value,
                          internal::output_tensor(op, outputs, i, in.x->dtype()));
    KILN_RETURN_IF_ERROR(
        internal::resize_output(context, op, *value, i == 0 ? shapes.y : shapes.y_h));
    *targets[i] = &value->to_tensor();
  }
  return rnn(in, *options, out);
}

const runtime::KernelRegistration kRegisterRnn("RNN", rnn_kernel<RnnCell::Rnn>);
const runtime::KernelRegistration kRegisterGru("GRU", rnn_kernel<RnnCell::Gru>);
const runtime::KernelRegistration kRegisterLstm("LSTM", rnn_kernel<RnnCell::Lstm>);

}  // namespace

}  // namespace kiln::kernels
