#pragma once
// Models built in code and a reference interpreter, for the engine's compile and loader tests.
#include <kiln/engine/compile/compiled_function.h>
#include <kiln/engine/compile/reference_run.h>
#include <kiln/engine/cpu/thread_team.h>
#include <kiln/engine/loader/model_loader.h>
#include <kiln/engine/package/package.h>
#include <kiln/runtime/executor/kernel_registry.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <random>

namespace kiln::engine::test_models {

using compile::CompileOptions;
using compile::PlacementEntry;
using runtime::Error;
using runtime::EValue;
using runtime::ScalarType;
using runtime::Status;
using runtime::Tensor;
using specialization::ComputeKind;
using specialization::SpecializationOptions;
using ::testing::HasSubstr;

inline SpecializationOptions cpu_only() {
  SpecializationOptions options;
  options.allowed_kinds = {ComputeKind::Cpu};
  return options;
}

/// `cache::CacheKey::specialization` of a load with `cpu_only()` and default compile options
/// (ModelLoader::load documents it): the identifier and the thread count.
inline std::string cpu_only_key_specialization() {
  return cpu_only().identifier() + ";threads=" + std::to_string(cpu::team_size(0));
}

/// Builds one-function models in code, with seeded random weights.
class ModelBuilder {
 public:
  explicit ModelBuilder(uint32_t seed = 1) : rng_(seed) { graph_.name = "main"; }

  int input(const std::string& name, const std::vector<ir::Dim>& shape,
            ScalarType dtype = ScalarType::Float32) {
    int v = value(name, shape, dtype);
    graph_.inputs.push_back(v);
    return v;
  }
  int value(const std::string& name, const std::vector<ir::Dim>& shape,
            ScalarType dtype = ScalarType::Float32) {
    ir::Value value;
    value.name = name;
    value.type.dtype = dtype;
    value.type.shape = shape;
    return graph_.add_value(std::move(value));
  }
  /// A value whose shape the model does not know.
  int unknown(const std::string& name, ScalarType dtype = ScalarType::Float32) {
    ir::Value value;
    value.name = name;
    value.type.dtype = dtype;
    value.type.rank_known = false;
    return graph_.add_value(std::move(value));
  }
  int weight(const std::string& name, const std::vector<int64_t>& sizes, float scale = 0.5f) {
    std::uniform_real_distribution<float> dist(-scale, scale);
    std::vector<float> data(static_cast<size_t>(numel(sizes)));
    for (float& x : data) x = dist(rng_);
    return weight_of(name, sizes, data);
  }
  int weight_of(const std::string& name, const std::vector<int64_t>& sizes,
                const std::vector<float>& data) {
    return raw_weight(name, ScalarType::Float32, sizes, data.data(), data.size() * 4);
  }
  int int_weight(const std::string& name, const std::vector<int64_t>& data) {
    return raw_weight(name, ScalarType::Int64, {static_cast<int64_t>(data.size())}, data.data(),
                      data.size() * 8);
  }
  void node(const std::string& op, std::vector<int> inputs, std::vector<int> outputs,
            std::vector<ir::Attribute> attributes = {}) {
    ir::Node node;
    node.name = op + "_" + std::to_string(graph_.nodes.size());
    node.op = op;
    node.inputs = std::move(inputs);
    node.outputs = std::move(outputs);
    node.attributes = std::move(attributes);
    graph_.nodes.push_back(std::move(node));
  }
  void output(int v) { graph_.outputs.push_back(v); }
  ir::Model build() {
    ir::Model model = model_;
    model.functions.push_back(graph_);
    return model;
  }

  static int64_t numel(const std::vector<int64_t>& sizes) {
    int64_t n = 1;
    for (int64_t s : sizes) n *= s;
    return n;
  }

 private:
  int raw_weight(const std::string& name, ScalarType dtype, const std::vector<int64_t>& sizes,
                 const void* data, size_t bytes) {
    ir::Weight w;
    w.name = name;
    w.dtype = dtype;
    w.sizes = sizes;
    w.data.resize(bytes);
    if (bytes > 0) std::memcpy(w.data.data(), data, bytes);
    int index = model_.add_weight(std::move(w));
    ir::Value value;
    value.name = name;
    value.type.dtype = dtype;
    value.type.shape.assign(sizes.begin(), sizes.end());
    value.weight = index;
    return graph_.add_value(std::move(value));
  }

  std::mt19937 rng_;
  ir::Model model_;
  ir::Graph graph_;
};

/// A buffer and the tensor over it.
struct Buffer {
  std::vector<uint8_t> bytes;
  Tensor tensor;
};

inline Buffer random_input(ScalarType dtype, const std::vector<int64_t>& sizes, uint32_t seed) {
  Buffer b;
  auto n = static_cast<size_t>(ModelBuilder::numel(sizes));
  b.bytes.resize(std::max<size_t>(n * runtime::element_size(dtype), 1));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (size_t i = 0; i < n; ++i) {
    float x = dist(rng);
    if (dtype == ScalarType::Float32) std::memcpy(b.bytes.data() + 4 * i, &x, 4);
  }
  b.tensor = Tensor(dtype, sizes, b.bytes.data());
  return b;
}

/// Runs the model's first function on the reference kernels (`compile::run_reference`).
inline std::vector<Buffer> interpret(const ir::Model& model,
                                     const std::vector<const Tensor*>& inputs) {
  auto run = compile::run_reference(model, model.functions[0].name, inputs);
  EXPECT_TRUE(run.ok()) << run.status().to_string();
  std::vector<Buffer> results;
  if (!run.ok()) return results;
  for (compile::ReferenceValue& value : *run) {
    Buffer b;
    b.bytes = std::move(value.bytes);
    b.tensor = Tensor(value.dtype, value.sizes, b.bytes.data());
    results.push_back(std::move(b));
  }
  return results;
}

/// Output buffers for a compiled function (Unbounded, of 1 MiB, when the shape depends on
/// data).
inline std::vector<Buffer> output_buffers(const compile::CompiledFunction& f) {
  std::vector<Buffer> outputs(f.num_outputs());
  for (size_t i = 0; i < f.num_outputs(); ++i) {
    const auto& sizes = f.output_sizes(i);
    size_t bytes = size_t{1} << 20;
    if (sizes) {
      int64_t numel = 1;
      for (int64_t size : *sizes) numel *= size;
      bytes =
          std::max(bytes, static_cast<size_t>(numel) * runtime::element_size(f.output_dtype(i)));
    }
    outputs[i].bytes.resize(bytes);
    outputs[i].tensor = sizes ? Tensor(f.output_dtype(i), *sizes, outputs[i].bytes.data())
                              : Tensor(f.output_dtype(i), {0}, outputs[i].bytes.data(),
                                       runtime::ShapeDynamism::Unbounded, outputs[i].bytes.size());
  }
  return outputs;
}

inline Status run(compile::CompiledFunction& f, std::vector<Buffer>& inputs,
                  std::vector<Buffer>& outputs) {
  std::vector<const Tensor*> in;
  std::vector<Tensor*> out;
  for (auto& b : inputs) in.push_back(&b.tensor);
  for (auto& b : outputs) out.push_back(&b.tensor);
  return f.run(in, out);
}

inline void expect_close(const Tensor& actual, const Tensor& expected, double rtol = 1e-4,
                         double atol = 1e-5) {
  ASSERT_EQ(actual.dtype(), expected.dtype());
  ASSERT_EQ(runtime::shape_to_string(actual.sizes()), runtime::shape_to_string(expected.sizes()));
  if (actual.dtype() != ScalarType::Float32) {
    EXPECT_EQ(std::memcmp(actual.data(), expected.data(), actual.nbytes()), 0);
    return;
  }
  const float* a = actual.data_ptr<float>();
  const float* e = expected.data_ptr<float>();
  for (int64_t i = 0; i < actual.numel(); ++i) {
    ASSERT_NEAR(a[i], e[i], atol + rtol * std::fabs(e[i])) << "element " << i;
  }
}

/// Whether a step's placement detail names a Winograd kernel (oneDNN's "wino" kernels or
/// kiln's "Winograd" loops).
inline bool is_winograd(const std::string& detail) {
  return detail.find("wino") != std::string::npos || detail.find("Winograd") != std::string::npos;
}

/// Compiles the model's function for its inputs' shapes (fusion on or off; `spec`, else
/// `cpu_only()`), runs it on seeded random inputs and compares every output with the reference
/// interpreter's (within `atol + rtol * |expected|`).
inline std::unique_ptr<compile::CompiledFunction> check_against_reference(
    const ir::Model& model, const std::vector<std::vector<int64_t>>& sizes,
    const CompileOptions& options, double rtol = 1e-4, double atol = 1e-5,
    const SpecializationOptions& spec = cpu_only()) {
  auto compiled = compile::specialize(model, "main", sizes, spec, options);
  EXPECT_TRUE(compiled.ok()) << compiled.status().to_string();
  if (!compiled.ok()) return nullptr;
  auto& f = **compiled;
  std::vector<Buffer> inputs;
  for (size_t i = 0; i < sizes.size(); ++i) {
    inputs.push_back(random_input(f.input_dtype(i), sizes[i], 100 + static_cast<uint32_t>(i)));
  }
  std::vector<const Tensor*> in;
  for (auto& b : inputs) in.push_back(&b.tensor);
  std::vector<Buffer> expected = interpret(model, in);
  std::vector<Buffer> outputs = output_buffers(f);
  Status status = run(f, inputs, outputs);
  EXPECT_TRUE(status.ok()) << status.to_string();
  EXPECT_EQ(expected.size(), outputs.size()) << "the reference run failed";
  for (size_t i = 0; i < outputs.size() && i < expected.size(); ++i) {
    expect_close(outputs[i].tensor, expected[i].tensor, rtol, atol);
  }
  return std::move(*compiled);
}

inline std::unique_ptr<compile::CompiledFunction> check_against_reference(
    const ir::Model& model, const std::vector<std::vector<int64_t>>& sizes, bool fuse) {
  CompileOptions options;
  options.fuse = fuse;
  return check_against_reference(model, sizes, options);
}

inline ir::Attribute ints(const std::string& name, std::vector<int64_t> v) { return {name, v}; }
inline ir::Attribute int_attr(const std::string& name, int64_t v) { return {name, v}; }

/// x → Conv → Add(bias) → Relu → Conv(+B) → Add(x) → Relu: two fusable chains, the second
/// with a residual. `batch` may be a symbol.
inline ir::Model conv_residual_model(const ir::Dim& batch = 1) {
  ModelBuilder b(3);
  int x = b.input("x", {batch, 8, 10, 10});
  int w1 = b.weight("w1", {8, 8, 3, 3}, 0.2f);
  int b1 = b.weight("b1", {1, 8, 1, 1});
  int w2 = b.weight("w2", {8, 8, 3, 3}, 0.2f);
  int b2 = b.weight("b2", {8});
  std::vector<ir::Dim> shape = {batch, 8, 10, 10};
  int c1 = b.value("c1", shape), a1 = b.value("a1", shape), r1 = b.value("r1", shape);
  int c2 = b.value("c2", shape), a2 = b.value("a2", shape), y = b.value("y", shape);
  std::vector<ir::Attribute> conv = {ints("pads", {1, 1, 1, 1}), ints("kernel_shape", {3, 3})};
  b.node("Conv", {x, w1}, {c1}, conv);
  b.node("Add", {c1, b1}, {a1});
  b.node("Relu", {a1}, {r1});
  b.node("Conv", {r1, w2, b2}, {c2}, conv);
  b.node("Add", {c2, x}, {a2});
  b.node("Relu", {a2}, {y});
  b.output(y);
  return b.build();
}

}  // namespace kiln::engine::test_models
