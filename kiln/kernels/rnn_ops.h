#pragma once

#include <kiln/runtime/core/result.h>
#include <kiln/runtime/core/span.h>
#include <kiln/runtime/core/status.h>
#include <kiln/runtime/core/tensor.h>

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

/// Recurrent layers (ONNX RNN, GRU and LSTM, opset 7-14 forms). Part of the typed API that
/// `kernels.h` includes; its conventions hold here.
///
/// Shapes, with D = num_directions (2 for bidirectional, else 1), G = gates (RNN 1, GRU 3,
/// LSTM 4), H = hidden_size, and layout 0 (layout 1 swaps the leading seq/batch axes of X and
/// Y, and the direction/batch axes of the states):
/// - X [seq, batch, input], W [D, G*H, input], R [D, G*H, H], B [D, 2*G*H] (W biases, then
///   R biases), sequence_lens [batch] (i32 or i64), initial_h and initial_c [D, batch, H],
///   P [D, 3*H] (LSTM peepholes i, o, f).
/// - Y [seq, D, batch, H], Y_h and Y_c [D, batch, H].
/// Gate order in W, R and B: GRU z, r, h; LSTM i, o, f, c.
namespace kiln::kernels {

/// Which recurrent cell.
enum class RnnCell {
  Rnn,   ///< Ht = f(Xt W^T + Ht-1 R^T + Wb + Rb).
  Gru,   ///< Update z, reset r and hidden h gates.
  Lstm,  ///< Input, output, forget and cell gates, and the cell state C.
};

/// The ONNX op type of `cell`: "RNN", "GRU" or "LSTM".
std::string_view rnn_op_name(RnnCell cell);

/// Direction attribute.
enum class RnnDirection { Forward, Reverse, Bidirectional };

/// An activation function of a recurrent cell, with its alpha and beta.
struct RnnActivation {
  enum class Kind {
    Relu,             ///< max(0, x)
    Tanh,             ///< tanh(x)
    Sigmoid,          ///< 1 / (1 + e^-x)
    Affine,           ///< alpha * x + beta (defaults 1, 0)
    LeakyRelu,        ///< x if x >= 0 else alpha * x (default 0.01)
    ThresholdedRelu,  ///< x if x > alpha else 0 (default 1)
    ScaledTanh,       ///< alpha * tanh(beta * x) (defaults 1, 1)
    HardSigmoid,      ///< min(max(alpha * x + beta, 0), 1) (defaults 0.2, 0.5)
    Elu,              ///< x if x >= 0 else alpha * (e^x - 1) (default 1)
    Softsign,         ///< x / (1 + |x|)
    Softplus,         ///< log(1 + e^x)
  };
  Kind kind = Kind::Tanh;
  double alpha = 0.0;
  double beta = 0.0;
};

/// Parses the `activations` attribute, given as names joined by commas ("Sigmoid,Tanh"; the
/// program stores a list of strings that way), matching names case-insensitively. Alphas and
/// betas are taken in order by the functions that use them (Affine, LeakyRelu, ...); a
/// function whose value the lists do not reach gets its ONNX default. An empty `names` gives
/// an empty list. Errors: InvalidArgument naming an unknown function.
runtime::Result<std::vector<RnnActivation>> parse_rnn_activations(
    std::string_view names, runtime::Span<const double> alphas, runtime::Span<const double> betas);

/// The attributes of RNN, GRU and LSTM (ONNX defaults).
struct RnnOptions {
  RnnCell cell = RnnCell::Rnn;
  RnnDirection direction = RnnDirection::Forward;
  /// Must equal R's last dimension when set; 0 takes it from R.
  int64_t hidden_size = 0;
  /// Per direction, RNN f; GRU f, g; LSTM f, g, h (forward first when bidirectional).
  /// Empty: the defaults (RNN Tanh; GRU Sigmoid, Tanh; LSTM Sigmoid, Tanh, Tanh).
  std::vector<RnnActivation> activations;
  /// Clips every activation's input to [-clip, clip] when set.
  std::optional<double> clip;
  /// GRU: applies the reset gate after the recurrent product, r * (Ht-1 Rh^T + Rbh).
  bool linear_before_reset = false;
  /// LSTM: couples the forget gate to the input gate, f = 1 - i.
  bool input_forget = false;
  /// 0: X [seq, batch, input]; 1: X [batch, seq, input] (see the namespace comment).
  int64_t layout = 0;
};

/// The tensors of a recurrent layer; the optional ones are null when absent.
struct RnnInputs {
  const runtime::Tensor* x = nullptr;
  const runtime::Tensor* w = nullptr;
  const runtime::Tensor* r = nullptr;
  const runtime::Tensor* b = nullptr;
  const runtime::Tensor* sequence_lens = nullptr;
  const runtime::Tensor* initial_h = nullptr;
  const runtime::Tensor* initial_c = nullptr;  ///< LSTM only.
  const runtime::Tensor* p = nullptr;          ///< LSTM only.
};

/// Where the outputs go; each may be null (not computed).
struct RnnOutputs {
  runtime::Tensor* y = nullptr;
  runtime::Tensor* y_h = nullptr;
  runtime::Tensor* y_c = nullptr;  ///< LSTM only.
};

/// The output shapes of a recurrent layer.
struct RnnShapes {
  std::vector<int64_t> y;
  std::vector<int64_t> y_h;  ///< Also Y_c's.
};

/// Validates the inputs' ranks, shapes and dtypes (X's dtype for all but sequence_lens) and the
/// options (activation count, layout, hidden_size, no GRU/LSTM-only option on another cell),
/// and returns the output shapes. Errors: InvalidArgument (InvalidType for a dtype) naming the
/// input or attribute, its value and what was expected.
runtime::Result<RnnShapes> rnn_shapes(const RnnInputs& inputs, const RnnOptions& options);

/// Runs the recurrent layer: every present output must have its `rnn_shapes` shape and X's
/// dtype. Dtypes f32, f64, f16, bf16 (f16 and bf16 compute in f32). With sequence_lens,
/// batch entry b runs its first sequence_lens[b] steps only (the reverse direction starts at
/// step sequence_lens[b] - 1); Y is zero past them, and Y_h/Y_c hold the last step run (zero
/// for a length of 0). Allocates seq * batch * G * H compute-type values for the input
/// products, plus the states. Errors: as `rnn_shapes`, and InvalidArgument for a
/// sequence_lens value outside [0, seq].
runtime::Status rnn(const RnnInputs& inputs, const RnnOptions& options, const RnnOutputs& outputs);

}  // namespace kiln::kernels
