#pragma once

// Programs with one KilnBackend delegate for the backend's tests: an IR model built in code
// (y = Relu(MatMul(x, W) + b)) stored as a model package in the program's named data, the
// manifest as the delegate blob, and the same graph on the reference kernels to compare with.
#include <kiln/engine/ir/graph.h>
#include <kiln/engine/package/package.h>
#include <kiln/runtime/backend/named_data.h>
#include <kiln/runtime/backend/options_map.h>
#include <kiln/runtime/core/data_loader.h>
#include <kiln/runtime/executor/method.h>
#include <kiln/runtime/executor/program.h>
#include <kiln/testing/program_builder.h>

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kiln::backends::kiln_test {

namespace ir = engine::ir;
using kiln::testing::F32;
using kiln::testing::ProgramBuilder;
using runtime::EValue;
using runtime::LoadBackendOptionsMap;
using runtime::Method;
using runtime::Program;
using runtime::Result;
using runtime::ShapeDynamism;
using runtime::Tensor;

inline constexpr const char* kPackageKey = "kiln/package/test";
inline constexpr int64_t kIn = 4;
inline constexpr int64_t kOut = 3;

inline std::vector<float> random_floats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

inline const std::vector<float>& weights() {
  static const std::vector<float> w = random_floats(kIn * kOut, 7);
  return w;
}
inline const std::vector<float>& bias() {
  static const std::vector<float> b = random_floats(kOut, 8);
  return b;
}

// y = Relu(MatMul(x, W) + b), x: [batch, 4], as a one-function IR model named `function`.
inline ir::Model matmul_add_relu(ir::Dim batch, const std::string& function = "main") {
  ir::Model model;
  ir::Graph g;
  g.name = function;
  auto value = [&](const std::string& name, std::vector<ir::Dim> shape) {
    ir::Value v;
    v.name = name;
    v.type.shape = std::move(shape);
    return g.add_value(std::move(v));
  };
  auto weight = [&](const std::string& name, std::vector<int64_t> sizes,
                    const std::vector<float>& data) {
    ir::Weight w;
    w.name = name;
    w.sizes = std::move(sizes);
    w.data = testing::to_bytes(data);
    ir::Value v;
    v.name = name;
    v.type.shape.assign(w.sizes.begin(), w.sizes.end());
    v.weight = model.add_weight(std::move(w));
    return g.add_value(std::move(v));
  };
  auto node = [&](const std::string& op, std::vector<int> in, std::vector<int> out) {
    ir::Node n;
    n.name = op + "_" + std::to_string(g.nodes.size());
    n.op = op;
    n.inputs = std::move(in);
    n.outputs = std::move(out);
    g.nodes.push_back(std::move(n));
  };
  int x = value("x", {batch, kIn});
  int w = weight("W", {kIn, kOut}, weights());
  int b = weight("b", {kOut}, bias());
  int mm = value("mm", {batch, kOut});
  int sum = value("sum", {batch, kOut});
  int y = value("y", {batch, kOut});
  node("MatMul", {x, w}, {mm});
  node("Add", {mm, b}, {sum});
  node("Relu", {sum}, {y});
  g.inputs = {x};
  g.outputs = {y};
  model.functions.push_back(std::move(g));
  return model;
}

inline std::vector<uint8_t> package_of(const ir::Model& model) {
  auto bytes = engine::package::write_package(model);
  EXPECT_TRUE(bytes.ok()) << bytes.status();
  return bytes.ok() ? *bytes : std::vector<uint8_t>{};
}

inline std::vector<uint8_t> bytes_of(const std::string& text) {
  return std::vector<uint8_t>(text.begin(), text.end());
}

inline std::string function_manifest(const std::string& function = "main") {
  return R"({"package": ")" + std::string(kPackageKey) +
         R"(", "input_names": ["x"], "output_names": ["y"], "function": ")" + function + R"("})";
}

// Named data holding one model package under `key`, for calling KilnBackend::init directly.
class OnePackage : public runtime::NamedDataMap {
 public:
  explicit OnePackage(std::vector<uint8_t> bytes, std::string key = kPackageKey)
      : bytes_(std::move(bytes)), key_(std::move(key)) {}
  Result<runtime::FreeableBuffer> get_data(std::string_view key) const override {
    if (key != key_) {
      return runtime::Status(runtime::Error::NotFound, "no key '" + std::string(key) + "'");
    }
    return runtime::FreeableBuffer(bytes_.data(), bytes_.size());
  }
  std::vector<std::string> keys() const override { return {key_}; }

 private:
  std::vector<uint8_t> bytes_;
  std::string key_;
};

using CompileSpecs = std::vector<std::pair<std::string, std::vector<uint8_t>>>;

// A program whose method "forward" is one KilnBackend delegate (with `compile_specs`). `batch` 0:
// a symbolic batch.
inline ProgramBuilder kiln_program(const std::vector<uint8_t>& package, const std::string& manifest,
                                   int64_t batch, CompileSpecs compile_specs = {}) {
  ProgramBuilder builder;
  builder.method("forward");
  if (batch > 0) {
    builder.input("x", F32, {batch, kIn}).tensor("y", F32, {batch, kOut});
  } else {
    builder.input("x", F32, {0, kIn}, ShapeDynamism::Unbounded, {"batch", ""})
        .tensor("y", F32, {0, kOut}, ShapeDynamism::Unbounded);
  }
  return builder.delegate("KilnBackend", bytes_of(manifest), {"x"}, {"y"}, std::move(compile_specs))
      .output("y")
      .named_data(kPackageKey, package);
}

// The same graph on the reference kernels.
inline ProgramBuilder reference_program(int64_t batch) {
  ProgramBuilder builder;
  builder.method("forward")
      .input("x", F32, {batch, kIn})
      .constant_f32("W", {kIn, kOut}, weights())
      .constant_f32("b", {kOut}, bias())
      .tensor("mm", F32, {batch, kOut})
      .tensor("sum", F32, {batch, kOut})
      .tensor("y", F32, {batch, kOut})
      .node("MatMul", {"x", "W"}, {"mm"})
      .node("Add", {"mm", "b"}, {"sum"})
      .node("Relu", {"sum"}, {"y"})
      .output("y");
  return builder;
}

struct Loaded {
  std::shared_ptr<Program> program;
  std::unique_ptr<Method> method;
};

inline Result<Loaded> load(const ProgramBuilder& builder,
                           const LoadBackendOptionsMap* options = nullptr) {
  KILN_ASSIGN_OR_RETURN(auto bytes, builder.build());
  auto owned = std::make_shared<std::vector<uint8_t>>(std::move(bytes));
  auto loader = std::make_shared<runtime::BufferDataLoader>(owned->data(), owned->size(), owned);
  Loaded loaded;
  KILN_ASSIGN_OR_RETURN(loaded.program, Program::load(loader));
  KILN_ASSIGN_OR_RETURN(loaded.method, loaded.program->load_method("forward", options));
  return loaded;
}

// Runs `method` on x of shape [batch, 4]; returns y's values (and checks its shape).
inline std::vector<float> run(Method& method, int64_t batch, uint32_t seed) {
  std::vector<float> x = random_floats(static_cast<size_t>(batch * kIn), seed);
  Tensor input(F32, {batch, kIn}, x.data());
  auto status = method.set_input(0, EValue(input));
  EXPECT_TRUE(status.ok()) << status;
  status = method.execute();
  EXPECT_TRUE(status.ok()) << status;
  if (!status.ok()) return {};
  const Tensor& y = method.get_output(0).to_tensor();
  EXPECT_EQ(std::vector<int64_t>(y.sizes().begin(), y.sizes().end()),
            (std::vector<int64_t>{batch, kOut}));
  return std::vector<float>(y.data_ptr<float>(), y.data_ptr<float>() + y.numel());
}

inline void expect_near(const std::vector<float>& got, const std::vector<float>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-5f) << "element " << i;
}

}  // namespace kiln::backends::kiln_test
