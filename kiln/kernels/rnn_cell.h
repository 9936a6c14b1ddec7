#pragma once

// The recurrent cells shared by RNN, GRU and LSTM: gate counts, the activation functions and
// the runner that steps a validated problem through the gate equations of each cell.
// Internal to kiln/kernels; rnn.cpp validates the operands and drives it.

#include <kiln/kernels/dispatch.h>
#include <kiln/kernels/gemm_rows.h>
#include <kiln/kernels/rnn_ops.h>
#include <kiln/runtime/core/tensor.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>
#include <vector>

namespace kiln::kernels::internal {

/// The gate blocks of W, R and B: RNN 1, GRU 3 (z, r, h), LSTM 4 (i, o, f, c).
inline int64_t num_gates(RnnCell cell) {
  if (cell == RnnCell::Gru) return 3;
  return cell == RnnCell::Lstm ? 4 : 1;
}

/// Activation functions per direction: RNN f; GRU f, g; LSTM f, g, h.
inline int64_t num_activations(RnnCell cell) {
  if (cell == RnnCell::Gru) return 2;
  return cell == RnnCell::Lstm ? 3 : 1;
}

/// `a` applied to `x`, in compute type C.
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

/// Everything `rnn` needs besides the data, derived from validated inputs and options.
struct RnnProblem {
  int64_t seq = 0, batch = 0, input = 0, hidden = 0, dirs = 1, gates = 1;
  std::vector<RnnActivation> activations;  ///< num_activations per direction, dirs times
};

/// Runs the layer one direction at a time over validated operands: the input products up
/// front, then per step and batch row the recurrent product and the cell's gate equations.
/// Holds per-direction state and scratch in compute type C; the referenced problem, operands
/// and lengths must outlive it.
template <typename T>
class RnnRunner {
 public:
  using C = ComputeType<T>;

  RnnRunner(const RnnProblem& p, const RnnInputs& in, const RnnOptions& o, const RnnOutputs& out,
            const std::vector<int64_t>& lens)
      : p_(p), in_(in), o_(o), out_(out), lens_(lens) {}

  /// Runs direction `d` (0, or 1 for the reverse half of a bidirectional layer), writing its
  /// part of Y, Y_h and Y_c.
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
    const GemmProblem problem{rows, gh, p_.input, false, true};
    gemm_rows(problem, in_.x->data_ptr<T>(), in_.w->data_ptr<T>() + d * gh * p_.input, row.data(),
              [&](int64_t i, const C* values) {
                C* dst = xw_.data() + i * gh;
                for (int64_t j = 0; j < gh; ++j) dst[j] = values[j] + wb_[j];
              });
  }

  int64_t state_offset(int64_t d, int64_t b) const {
    return (o_.layout == 0 ? d * p_.batch + b : b * p_.dirs + d) * p_.hidden;
  }

  void init_state(const runtime::Tensor* initial, int64_t d, std::vector<C>& state) {
    state.assign(static_cast<size_t>(p_.batch * p_.hidden), C{0});
    if (initial == nullptr) return;
    for (int64_t b = 0; b < p_.batch; ++b) {
      const T* src = initial->data_ptr<T>() + state_offset(d, b);
      for (int64_t j = 0; j < p_.hidden; ++j) state[b * p_.hidden + j] = load(src[j]);
    }
  }

  void write_state(runtime::Tensor* out, int64_t d, const std::vector<C>& state) {
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

  const RnnProblem& p_;
  const RnnInputs& in_;
  const RnnOptions& o_;
  const RnnOutputs& out_;
  const std::vector<int64_t>& lens_;
  int64_t d_ = 0;
  const RnnActivation* act_ = nullptr;
  const C* r_ = nullptr;
  std::vector<C> r_copy_, wb_, rb_, xw_, h_, c_, gate_, next_;
};

}  // namespace kiln::kernels::internal
