// RNN, GRU and LSTM: operand and attribute validation, the typed function and the adapters.
// The cells' gate equations live in rnn_cell.h.

#include <kiln/kernels/adapter.h>
#include <kiln/kernels/dispatch.h>
#include <kiln/kernels/kernels.h>
#include <kiln/kernels/rnn_cell.h>
#include <kiln/kernels/rnn_ops.h>

#include <algorithm>
#include <cctype>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

namespace kiln::kernels {

using runtime::Error;
using runtime::Result;
using runtime::ScalarType;
using runtime::Span;
using runtime::Status;
using runtime::Tensor;

namespace {

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

Result<internal::RnnProblem> make_problem(const RnnInputs& in, const RnnOptions& options) {
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
  internal::RnnProblem p;
  p.dirs = options.direction == RnnDirection::Bidirectional ? 2 : 1;
  p.gates = internal::num_gates(options.cell);
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

  const int64_t per_dir = internal::num_activations(options.cell);
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
  KILN_ASSIGN_OR_RETURN(internal::RnnProblem p, make_problem(inputs, options));
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
  KILN_ASSIGN_OR_RETURN(const internal::RnnProblem p, make_problem(inputs, options));
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
    internal::RnnRunner<T> runner(p, inputs, options, outputs, lens);
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
