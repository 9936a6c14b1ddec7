// specialize() and the model loader against a reference interpreter over the same IR.
#include <kiln/engine/compile/compiled_function.h>
#include <kiln/engine/loader/model_loader.h>
#include <kiln/engine/package/package.h>
#include <kiln/runtime/executor/kernel_registry.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <random>

namespace kiln::engine {
namespace {

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

SpecializationOptions cpu_only() {
  SpecializationOptions options;
  options.allowed_kinds = {ComputeKind::Cpu};
  return options;
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

Buffer random_input(ScalarType dtype, const std::vector<int64_t>& sizes, uint32_t seed) {
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

/// Runs a function node by node on the reference kernels, with growing storage.
std::vector<Buffer> interpret(const ir::Model& model, const std::vector<const Tensor*>& inputs) {
  const ir::Graph& g = model.functions[0];
  std::vector<EValue> values(g.values.size());
  std::vector<std::vector<uint8_t>> storage(g.values.size());
  for (size_t v = 0; v < g.values.size(); ++v) {
    const ir::Value& value = g.values[v];
    if (value.weight >= 0) {
      auto& w = const_cast<ir::Weight&>(model.weights[value.weight]);
      values[v] = EValue(Tensor(w.dtype, w.sizes, w.data.data()));
    } else {
      values[v] =
          EValue(Tensor(value.type.dtype, {}, nullptr, runtime::ShapeDynamism::Unbounded, 0));
    }
  }
  for (size_t i = 0; i < g.inputs.size(); ++i) values[g.inputs[i]] = EValue(*inputs[i]);
  EValue none;
  for (const ir::Node& node : g.nodes) {
    std::vector<EValue*> in, out;
    for (int v : node.inputs) in.push_back(v >= 0 ? &values[v] : &none);
    std::vector<EValue> scratch(node.outputs.size());
    for (size_t i = 0; i < node.outputs.size(); ++i) {
      if (node.outputs[i] >= 0) {
        out.push_back(&values[node.outputs[i]]);
      } else {
        scratch[i] =
            EValue(Tensor(ScalarType::Float32, {}, nullptr, runtime::ShapeDynamism::Unbounded, 0));
        out.push_back(&scratch[i]);
      }
    }
    std::vector<std::unique_ptr<std::vector<uint8_t>>> scratch_storage;
    runtime::KernelContext context(node.op, [&](EValue& e, runtime::Span<const int64_t> s) {
      auto n = runtime::checked_numel(s);
      if (!n.ok()) return n.status();
      auto bytes = static_cast<size_t>(*n) * e.to_tensor().element_size() + 1;
      std::vector<uint8_t>* buffer = nullptr;
      for (size_t v = 0; v < values.size(); ++v) {
        if (&values[v] == &e) buffer = &storage[v];
      }
      if (buffer == nullptr) {
        scratch_storage.push_back(std::make_unique<std::vector<uint8_t>>());
        buffer = scratch_storage.back().get();
      }
      buffer->resize(bytes);
      e.to_tensor().set_data(buffer->data(), bytes);
      return e.to_tensor().resize(s);
    });
    std::vector<std::pair<std::string, EValue>> attributes;
    for (const auto& a : node.attributes)
      attributes.emplace_back(a.name, *ir::scalar_attribute(a.value));
    runtime::KernelFunction kernel = runtime::get_kernel(node.op);
    EXPECT_NE(kernel, nullptr) << node.op;
    Status status = kernel(context, in, out, runtime::Attributes(std::move(attributes)));
    EXPECT_TRUE(status.ok()) << status.to_string();
  }
  std::vector<Buffer> results;
  for (int v : g.outputs) {
    const Tensor& t = values[v].to_tensor();
    Buffer b;
    b.bytes.assign(static_cast<const uint8_t*>(t.data()),
                   static_cast<const uint8_t*>(t.data()) + t.nbytes());
    b.bytes.resize(std::max<size_t>(b.bytes.size(), 1));
    b.tensor =
        Tensor(t.dtype(), std::vector<int64_t>(t.sizes().begin(), t.sizes().end()), b.bytes.data());
    results.push_back(std::move(b));
  }
  return results;
}

/// Output buffers for a compiled function (Unbounded when the shape depends on data).
std::vector<Buffer> output_buffers(const compile::CompiledFunction& f) {
  std::vector<Buffer> outputs(f.num_outputs());
  for (size_t i = 0; i < f.num_outputs(); ++i) {
    outputs[i].bytes.resize(1 << 20);
    const auto& sizes = f.output_sizes(i);
    outputs[i].tensor = sizes ? Tensor(f.output_dtype(i), *sizes, outputs[i].bytes.data())
                              : Tensor(f.output_dtype(i), {0}, outputs[i].bytes.data(),
                                       runtime::ShapeDynamism::Unbounded, outputs[i].bytes.size());
  }
  return outputs;
}

Status run(compile::CompiledFunction& f, std::vector<Buffer>& inputs,
           std::vector<Buffer>& outputs) {
  std::vector<const Tensor*> in;
  std::vector<Tensor*> out;
  for (auto& b : inputs) in.push_back(&b.tensor);
  for (auto& b : outputs) out.push_back(&b.tensor);
  return f.run(in, out);
}

void expect_close(const Tensor& actual, const Tensor& expected, double rtol = 1e-4,
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

/// Compiles the model's function for its inputs' shapes (fusion on or off), runs it on seeded
/// random inputs and compares every output with the reference interpreter's.
std::unique_ptr<compile::CompiledFunction> check_against_reference(
    const ir::Model& model, const std::vector<std::vector<int64_t>>& sizes, bool fuse) {
  CompileOptions options;
  options.fuse = fuse;
  auto compiled = compile::specialize(model, "main", sizes, cpu_only(), options);
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
  for (size_t i = 0; i < outputs.size(); ++i) expect_close(outputs[i].tensor, expected[i].tensor);
  return std::move(*compiled);
}

ir::Attribute ints(const std::string& name, std::vector<int64_t> v) { return {name, v}; }
ir::Attribute int_attr(const std::string& name, int64_t v) { return {name, v}; }

/// x → Conv → Add(bias) → Relu → Conv(+B) → Add(x) → Relu: two fusable chains, the second
/// with a residual.
ir::Model conv_residual_model() {
  ModelBuilder b(3);
  int x = b.input("x", {1, 8, 10, 10});
  int w1 = b.weight("w1", {8, 8, 3, 3}, 0.2f);
  int b1 = b.weight("b1", {1, 8, 1, 1});
  int w2 = b.weight("w2", {8, 8, 3, 3}, 0.2f);
  int b2 = b.weight("b2", {8});
  std::vector<ir::Dim> shape = {1, 8, 10, 10};
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

TEST(Specialize, ConvBiasReluResidualMatchesReference) {
  ir::Model model = conv_residual_model();
  auto f = check_against_reference(model, {{1, 8, 10, 10}}, /*fuse=*/true);
  ASSERT_NE(f, nullptr);
  const auto& placement = f->placement();
  ASSERT_EQ(placement.size(), 2u);
  EXPECT_EQ(placement[0].op, "Conv");
  EXPECT_EQ(placement[0].device, "cpu:onednn");
  EXPECT_THAT(placement[0].fused, ::testing::ElementsAre("Add_1 (Add)", "Relu_2 (Relu)"));
  EXPECT_EQ(placement[1].device, "cpu:onednn");
  EXPECT_THAT(placement[1].fused, ::testing::ElementsAre("Add_4 (Add)", "Relu_5 (Relu)"));
  EXPECT_TRUE(f->is_static());
}

TEST(Specialize, FusionOffGivesTheSameResults) {
  ir::Model model = conv_residual_model();
  auto fused = check_against_reference(model, {{1, 8, 10, 10}}, true);
  auto unfused = check_against_reference(model, {{1, 8, 10, 10}}, false);
  ASSERT_NE(unfused, nullptr);
  EXPECT_EQ(unfused->placement().size(), 6u);
  for (const auto& entry : unfused->placement()) EXPECT_TRUE(entry.fused.empty());
  std::vector<Buffer> inputs;
  inputs.push_back(random_input(ScalarType::Float32, {1, 8, 10, 10}, 9));
  auto a = output_buffers(*fused), b = output_buffers(*unfused);
  ASSERT_TRUE(run(*fused, inputs, a).ok());
  ASSERT_TRUE(run(*unfused, inputs, b).ok());
  expect_close(a[0].tensor, b[0].tensor);
}

TEST(Specialize, MatMulBiasGeluFuses) {
  ModelBuilder b(4);
  int x = b.input("x", {ir::Dim::symbol("batch"), 16});
  int w = b.weight("w", {16, 32});
  int bias = b.weight("bias", {32});
  int m = b.value("m", {ir::Dim::symbol("batch"), 32});
  int a = b.value("a", {ir::Dim::symbol("batch"), 32});
  int y = b.value("y", {ir::Dim::symbol("batch"), 32});
  b.node("MatMul", {x, w}, {m});
  b.node("Add", {bias, m}, {a});
  b.node("Gelu", {a}, {y});
  b.output(y);
  ir::Model model = b.build();
  for (int64_t batch : {1, 5}) {
    auto f = check_against_reference(model, {{batch, 16}}, true);
    ASSERT_NE(f, nullptr);
    ASSERT_EQ(f->placement().size(), 1u);
    EXPECT_EQ(f->placement()[0].device, "cpu:onednn");
    EXPECT_THAT(f->placement()[0].fused, ::testing::ElementsAre("Add_1 (Add)", "Gelu_2 (Gelu)"));
    EXPECT_EQ(*f->output_sizes(0), (std::vector<int64_t>{batch, 32}));
  }
}

TEST(Specialize, LayerNormSoftmaxAndAReferenceOnlyOp) {
  ModelBuilder b(5);
  int x = b.input("x", {2, 5, 16});
  int scale = b.weight("scale", {16});
  int shift = b.weight("shift", {16});
  int k = b.int_weight("k", {3});
  int n = b.value("n", {2, 5, 16}), s = b.value("s", {2, 5, 16});
  int top = b.value("top", {2, 5, 3});
  int idx = b.value("idx", {2, 5, 3}, ScalarType::Int64);
  b.node("LayerNormalization", {x, scale, shift}, {n}, {int_attr("axis", -1)});
  b.node("Softmax", {n}, {s}, {int_attr("axis", -1)});
  b.node("TopK", {s, k}, {top, idx}, {int_attr("axis", -1)});
  b.output(s);
  b.output(top);
  b.output(idx);
  ir::Model model = b.build();
  auto f = check_against_reference(model, {{2, 5, 16}}, true);
  ASSERT_NE(f, nullptr);
  std::map<std::string, std::string> where;
  for (const auto& entry : f->placement()) where[entry.op] = entry.device;
  EXPECT_EQ(where["LayerNormalization"], "cpu:onednn");
  EXPECT_EQ(where["Softmax"], "cpu:onednn");
  EXPECT_EQ(where["TopK"], "cpu:reference");
}

TEST(Specialize, EinsumRunsOnTheReferenceKernel) {
  ModelBuilder b(6);
  int x = b.input("x", {3, 4});
  int w = b.weight("w", {4, 5});
  int y = b.value("y", {3, 5});
  b.node("Einsum", {x, w}, {y}, {{"equation", std::string("ij,jk->ik")}});
  b.output(y);
  auto f = check_against_reference(b.build(), {{3, 4}}, true);
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(f->placement().size(), 1u);
  EXPECT_EQ(f->placement()[0].device, "cpu:reference");
  EXPECT_THAT(f->placement()[0].detail, HasSubstr("no oneDNN implementation"));
}

TEST(Specialize, ConstantSubgraphsAreFoldedAndShapesProbed) {
  // Reshape(x, Concat(Shape(x)[0], -1)) with the model not knowing the result's shape.
  ModelBuilder b(7);
  int x = b.input("x", {ir::Dim::symbol("n"), 4, 3});
  int shape = b.value("shape", {3}, ScalarType::Int64);
  int zero = b.int_weight("zero", {0});
  int first = b.value("first", {1}, ScalarType::Int64);
  int minus_one = b.int_weight("minus_one", {-1});
  int target = b.value("target", {2}, ScalarType::Int64);
  int r = b.unknown("r");
  int w = b.weight("w", {12, 6});
  int y = b.unknown("y");
  b.node("Shape", {x}, {shape});
  b.node("Gather", {shape, zero}, {first});
  b.node("Concat", {first, minus_one}, {target}, {int_attr("axis", 0)});
  b.node("Reshape", {x, target}, {r});
  b.node("MatMul", {r, w}, {y});
  b.output(y);
  auto f = check_against_reference(b.build(), {{2, 4, 3}}, true);
  ASSERT_NE(f, nullptr);
  EXPECT_TRUE(f->is_static());
  ASSERT_EQ(f->placement().size(), 2u);  // Shape, Gather and Concat were folded
  EXPECT_EQ(f->placement()[0].op, "Reshape");
  EXPECT_EQ(f->placement()[1].device, "cpu:onednn");
  EXPECT_EQ(*f->output_sizes(0), (std::vector<int64_t>{2, 6}));
}

TEST(Specialize, DataDependentShapesRunOnTheReferencePath) {
  ModelBuilder b(8);
  int x = b.input("x", {6});
  int nz = b.unknown("nz", ScalarType::Int64);
  int c = b.unknown("c", ScalarType::Int64);
  b.node("NonZero", {x}, {nz});
  b.node("Add", {nz, nz}, {c});
  b.output(c);
  ir::Model model = b.build();
  auto compiled = compile::specialize(model, "main", {{6}}, cpu_only());
  ASSERT_TRUE(compiled.ok()) << compiled.status().to_string();
  auto& f = **compiled;
  EXPECT_FALSE(f.is_static());
  EXPECT_FALSE(f.output_sizes(0).has_value());
  for (const auto& entry : f.placement()) {
    EXPECT_EQ(entry.device, "cpu:reference");
    EXPECT_EQ(entry.detail, "shape known only at run time") << entry.node;
  }
  std::vector<float> data = {0, 1, 0, 2, 3, 0};
  std::vector<Buffer> inputs(1);
  inputs[0].tensor = Tensor(ScalarType::Float32, {6}, data.data());
  auto outputs = output_buffers(f);
  Status st = run(f, inputs, outputs);
  ASSERT_TRUE(st.ok()) << st.to_string();
  ASSERT_EQ(runtime::shape_to_string(outputs[0].tensor.sizes()), "[1, 3]");
  const int64_t* out = outputs[0].tensor.data_ptr<int64_t>();
  EXPECT_EQ(out[0], 2);
  EXPECT_EQ(out[1], 6);
  EXPECT_EQ(out[2], 8);
}

TEST(Specialize, RangeWithFloatBoundsFromDataIsDataDependent) {
  ModelBuilder b(9);
  int limit = b.input("limit", {});
  int start = b.weight_of("start", {}, {0.0f});
  int delta = b.weight_of("delta", {}, {1.0f});
  int r = b.unknown("r");
  b.node("Range", {start, limit, delta}, {r});
  b.output(r);
  ir::Model model = b.build();
  auto compiled = compile::specialize(model, "main", {{}}, cpu_only());
  ASSERT_TRUE(compiled.ok()) << compiled.status().to_string();
  auto& f = **compiled;
  EXPECT_FALSE(f.output_sizes(0).has_value());
  for (float value : {3.0f, 5.0f}) {
    std::vector<Buffer> inputs(1);
    inputs[0].tensor = Tensor(ScalarType::Float32, {}, &value);
    auto outputs = output_buffers(f);
    Status st = run(f, inputs, outputs);
    ASSERT_TRUE(st.ok()) << st.to_string();
    EXPECT_EQ(outputs[0].tensor.numel(), static_cast<int64_t>(value));
  }
}

TEST(Specialize, RunsAgainWithoutAllocating) {
  ir::Model model = conv_residual_model();
  auto compiled = compile::specialize(model, "main", {{1, 8, 10, 10}}, cpu_only());
  ASSERT_TRUE(compiled.ok());
  auto& f = **compiled;
  // Six 3200-byte activations, at most three alive at once: the arena reuses memory.
  EXPECT_GT(f.arena_bytes(), 0u);
  EXPECT_LE(f.arena_bytes(), 3u * 3200u + 3u * 64u);
  std::vector<Buffer> inputs;
  inputs.push_back(random_input(ScalarType::Float32, {1, 8, 10, 10}, 3));
  auto first = output_buffers(f), second = output_buffers(f);
  ASSERT_TRUE(run(f, inputs, first).ok());
  ASSERT_TRUE(run(f, inputs, second).ok());
  EXPECT_EQ(f.num_dynamic_allocations(), 0u);
  EXPECT_EQ(std::memcmp(first[0].bytes.data(), second[0].bytes.data(), 3200), 0);
}

TEST(Specialize, RejectsBadInputsWithTheirNames) {
  ir::Model model = conv_residual_model();
  auto compiled = compile::specialize(model, "main", {{1, 8, 10, 10}}, cpu_only());
  ASSERT_TRUE(compiled.ok());
  auto& f = **compiled;
  std::vector<Buffer> inputs;
  inputs.push_back(random_input(ScalarType::Float32, {1, 8, 10, 11}, 3));
  auto outputs = output_buffers(f);
  Status status = run(f, inputs, outputs);
  EXPECT_EQ(status.code(), Error::InvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("input 'x' has shape [1, 8, 10, 11] (expected "
                                          "[1, 8, 10, 10]"));
  inputs[0] = random_input(ScalarType::Int64, {1, 8, 10, 10}, 3);
  status = run(f, inputs, outputs);
  EXPECT_EQ(status.code(), Error::InvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("input 'x' has dtype"));
  inputs.clear();
  status = run(f, inputs, outputs);
  EXPECT_THAT(status.message(), HasSubstr("got 0 inputs (expected 1)"));

  auto wrong_rank = compile::specialize(model, "main", {{1, 8, 10}}, cpu_only());
  EXPECT_EQ(wrong_rank.error(), Error::InvalidArgument);
  EXPECT_THAT(wrong_rank.status().message(), HasSubstr("input 'x' has shape [1, 8, 10]"));
  auto missing = compile::specialize(model, "other", {{1}}, cpu_only());
  EXPECT_EQ(missing.error(), Error::NotFound);
}

TEST(Specialize, ConflictingSymbolBindingsAreRejected) {
  ModelBuilder b;
  int x = b.input("x", {ir::Dim::symbol("n"), 2});
  int y = b.input("y", {ir::Dim::symbol("n"), 2});
  int z = b.value("z", {ir::Dim::symbol("n"), 2});
  b.node("Add", {x, y}, {z});
  b.output(z);
  auto compiled = compile::specialize(b.build(), "main", {{3, 2}, {4, 2}}, cpu_only());
  EXPECT_EQ(compiled.error(), Error::InvalidArgument);
  EXPECT_THAT(compiled.status().message(), HasSubstr("symbol 'n' is bound by input 'x'"));
}

TEST(Specialize, OptionsWithoutTheCpuAreNotSupported) {
  SpecializationOptions gpu;
  gpu.allowed_kinds = {ComputeKind::Gpu};
  auto compiled = compile::specialize(conv_residual_model(), "main", {{1, 8, 10, 10}}, gpu);
  EXPECT_EQ(compiled.error(), Error::NotSupported);
  EXPECT_THAT(compiled.status().message(), HasSubstr(gpu.identifier()));
  auto loaded = ModelLoader::load(conv_residual_model(), gpu);
  EXPECT_EQ(loaded.error(), Error::NotSupported);
}

TEST(Specialize, DataDependentIfIsNotSupported) {
  ModelBuilder b;
  int c = b.input("c", {}, ScalarType::Bool);
  int y = b.unknown("y");
  b.node("If", {c}, {y});
  b.output(y);
  ir::Model model = b.build();
  model.functions[0].nodes[0].regions.resize(2);
  auto compiled = compile::specialize(model, "main", {{}}, cpu_only());
  EXPECT_EQ(compiled.error(), Error::NotSupported);
  EXPECT_THAT(compiled.status().message(), HasSubstr("node 'If_0' (If)"));
}

TEST(ModelLoader, LoadsBindsRunsAndReportsPlacement) {
  ir::Model model = conv_residual_model();
  auto loaded = ModelLoader::load(model, cpu_only(), /*cache=*/nullptr);
  ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
  // The static function was specialized at load.
  auto report = (*loaded)->placement();
  ASSERT_EQ(report.size(), 1u);
  EXPECT_EQ(report[0].function, "main");
  ASSERT_EQ(report[0].steps.size(), 2u);
  EXPECT_EQ(report[0].steps[0].device, "cpu:onednn");
  auto session = (*loaded)->bind("main", {{1, 8, 10, 10}});
  ASSERT_TRUE(session.ok()) << session.status().to_string();
  auto again = (*loaded)->bind("main", {{1, 8, 10, 10}});
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(&session->function(), &again->function());  // one compiled function, shared

  std::vector<Buffer> inputs;
  inputs.push_back(random_input(ScalarType::Float32, {1, 8, 10, 10}, 5));
  std::vector<const Tensor*> in = {&inputs[0].tensor};
  auto expected = interpret(model, in);
  auto outputs = output_buffers(session->function());
  std::vector<Tensor*> out = {&outputs[0].tensor};
  ASSERT_TRUE(session->run(in, out).ok());
  expect_close(outputs[0].tensor, expected[0].tensor);
}

TEST(ModelLoader, LoadsFromAPackageWithoutCopyingWeights) {
  ir::Model model = conv_residual_model();
  auto bytes = package::write_package(model);
  ASSERT_TRUE(bytes.ok());
  std::vector<uint64_t> aligned((bytes->size() + 7) / 8);
  std::memcpy(aligned.data(), bytes->data(), bytes->size());
  auto view = package::PackageView::open(runtime::Span<const uint8_t>(
      reinterpret_cast<const uint8_t*>(aligned.data()), bytes->size()));
  ASSERT_TRUE(view.ok()) << view.status().to_string();
  auto loaded = ModelLoader::load(*view, cpu_only());
  ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
  auto session = (*loaded)->bind("main", {{1, 8, 10, 10}});
  ASSERT_TRUE(session.ok());
  std::vector<Buffer> inputs;
  inputs.push_back(random_input(ScalarType::Float32, {1, 8, 10, 10}, 6));
  std::vector<const Tensor*> in = {&inputs[0].tensor};
  auto expected = interpret(model, in);
  auto outputs = output_buffers(session->function());
  std::vector<Tensor*> out = {&outputs[0].tensor};
  ASSERT_TRUE(session->run(in, out).ok());
  expect_close(outputs[0].tensor, expected[0].tensor);
}

}  // namespace
}  // namespace kiln::engine
