#include <fuzz/reference_check.h>

#include <kiln/engine/compile/reference_run.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>

namespace kiln::fuzz {

namespace {

using runtime::ScalarType;
using runtime::Tensor;

// The largest magnitude a compared run may hold, and the absolute tolerance per scale^2.
constexpr double kMaxScale = 1024;
constexpr double kAbsPerScale2 = 1e-5;
constexpr double kRelative = 1e-3;

// What the reference run may take (its kernels are plain loops: slower than the engine's).
constexpr uint64_t kMaxReferenceBytes = uint64_t{64} << 20;
constexpr double kMaxReferenceFlops = 2e7;

// The largest magnitude among `t`'s floats, or infinity if one is not finite (0 for other
// dtypes).
double scale_of(const Tensor& t) {
  if (t.dtype() != ScalarType::Float32 || t.data() == nullptr) return 0;
  const float* x = t.data_ptr<float>();
  double scale = 0;
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (!std::isfinite(x[i])) return INFINITY;
    scale = std::max(scale, static_cast<double>(std::fabs(x[i])));
  }
  return scale;
}

std::string shape(const Tensor& t) { return runtime::shape_to_string(t.sizes()); }

// Compares output `index`; false (with `detail`) when they differ.
bool agree(size_t index, const Tensor& engine, engine::compile::ReferenceValue& reference,
           double scale, std::string& detail) {
  const Tensor expected = reference.tensor();
  const std::string which = "output " + std::to_string(index) + ": ";
  if (engine.dtype() != expected.dtype() || shape(engine) != shape(expected)) {
    detail = which + "the engine gave " + std::string(runtime::to_string(engine.dtype())) +
             shape(engine) + ", the reference " +
             std::string(runtime::to_string(expected.dtype())) + shape(expected);
    return false;
  }
  if (engine.dtype() != ScalarType::Float32) {
    if (engine.nbytes() == 0 || std::memcmp(engine.data(), expected.data(), engine.nbytes()) == 0) {
      return true;
    }
    detail = which + "its bytes differ from the reference's";
    return false;
  }
  const float* a = engine.data_ptr<float>();
  const float* e = expected.data_ptr<float>();
  const double atol = kAbsPerScale2 * std::max(1.0, scale * scale);
  for (int64_t i = 0; i < engine.numel(); ++i) {
    const double diff = std::fabs(static_cast<double>(a[i]) - e[i]);
    if (!(diff <= atol + kRelative * std::fabs(e[i]))) {
      detail = which + "element " + std::to_string(i) + " is " + std::to_string(a[i]) +
               ", the reference's " + std::to_string(e[i]) + " (scale " + std::to_string(scale) +
               ")";
      return false;
    }
  }
  return true;
}

}  // namespace

bool continuous_op(const std::string& op) {
  static const std::set<std::string> kOps = {"Abs",
                                             "Add",
                                             "AveragePool",
                                             "BatchNormalization",
                                             "Celu",
                                             "Clip",
                                             "Concat",
                                             "Conv",
                                             "ConvTranspose",
                                             "Cos",
                                             "DepthToSpace",
                                             "Einsum",
                                             "Elu",
                                             "Erf",
                                             "Exp",
                                             "Expand",
                                             "Flatten",
                                             "Gelu",
                                             "Gemm",
                                             "GlobalAveragePool",
                                             "GlobalMaxPool",
                                             "GroupNormalization",
                                             "HardSigmoid",
                                             "HardSwish",
                                             "Identity",
                                             "InstanceNormalization",
                                             "LayerNormalization",
                                             "LeakyRelu",
                                             "LogSoftmax",
                                             "MatMul",
                                             "Max",
                                             "MaxPool",
                                             "Mean",
                                             "Min",
                                             "Mish",
                                             "Mul",
                                             "Neg",
                                             "PRelu",
                                             "Pad",
                                             "ReduceMax",
                                             "ReduceMean",
                                             "ReduceMin",
                                             "ReduceSum",
                                             "Relu",
                                             "Reshape",
                                             "Selu",
                                             "Shape",
                                             "Sigmoid",
                                             "Sin",
                                             "Size",
                                             "Slice",
                                             "Softmax",
                                             "Softplus",
                                             "Softsign",
                                             "SpaceToDepth",
                                             "Split",
                                             "Squeeze",
                                             "Sub",
                                             "Sum",
                                             "Tanh",
                                             "Tile",
                                             "Transpose",
                                             "Unsqueeze"};
  return kOps.count(op) != 0;
}

ReferenceVerdict check_against_reference(
    const engine::ir::Model& model, const engine::ir::Graph& function,
    const std::vector<runtime::Span<const uint8_t>>& weight_data,
    const std::vector<const Tensor*>& inputs, const std::vector<Tensor*>& outputs,
    std::string& detail) {
  // A weight's floats as `weight_data` gives them (or the model's own bytes).
  auto weight_tensor = [&](size_t index) {
    const engine::ir::Weight& w = model.weights[index];
    const uint8_t* bytes = index < weight_data.size() ? weight_data[index].data() : w.data.data();
    return Tensor(w.dtype, w.sizes, const_cast<uint8_t*>(bytes));
  };
  // Whether value `v` is a float weight of magnitude at least 1 / kMaxScale everywhere.
  auto safe_divisor = [&](int v) {
    if (v < 0 || static_cast<size_t>(v) >= function.values.size()) return false;
    const int w = function.values[static_cast<size_t>(v)].weight;
    if (w < 0 || static_cast<size_t>(w) >= model.weights.size()) return false;
    const Tensor t = weight_tensor(static_cast<size_t>(w));
    if (t.dtype() != ScalarType::Float32 || t.data() == nullptr) return false;
    const float* x = t.data_ptr<float>();
    for (int64_t i = 0; i < t.numel(); ++i) {
      if (!(std::fabs(x[i]) >= 1.0 / kMaxScale)) return false;  // (NaN fails too)
    }
    return true;
  };
  for (const engine::ir::Node& node : function.nodes) {
    const bool division =
        node.op == "Div" && node.inputs.size() == 2 && safe_divisor(node.inputs[1]);
    if ((!continuous_op(node.op) && !division) || !node.domain.empty() || !node.regions.empty()) {
      return ReferenceVerdict::Skipped;
    }
    // MaxPool's indices jump between equal neighbours.
    if (node.op == "MaxPool" && node.outputs.size() > 1) return ReferenceVerdict::Skipped;
  }
  double scale = 0;
  for (const Tensor* input : inputs) scale = std::max(scale, scale_of(*input));
  for (const engine::ir::Value& value : function.values) {
    if (value.weight < 0 || static_cast<size_t>(value.weight) >= model.weights.size()) continue;
    scale = std::max(scale, scale_of(weight_tensor(static_cast<size_t>(value.weight))));
  }
  engine::compile::ReferenceLimits limits;
  limits.max_bytes = kMaxReferenceBytes;
  limits.max_flops = kMaxReferenceFlops;
  auto reference = engine::compile::run_reference(
      model, function.name, inputs, limits, weight_data,
      [&](const engine::ir::Node&, const Tensor& t) { scale = std::max(scale, scale_of(t)); });
  if (!reference.ok() || !(scale <= kMaxScale) || reference->size() != outputs.size()) {
    return ReferenceVerdict::Skipped;
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (!agree(i, *outputs[i], (*reference)[i], scale, detail)) return ReferenceVerdict::Disagree;
  }
  return ReferenceVerdict::Agree;
}

}  // namespace kiln::fuzz
