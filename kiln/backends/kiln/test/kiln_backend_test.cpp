// KilnBackend end to end: programs written with ProgramBuilder that hold a model package (an IR
// model built in code) as named data and a manifest as the delegate blob, loaded through
// Program and run, compared with the same graph run on the reference kernels.
#include <kiln/backends/kiln/kiln_backend.h>
#include <kiln/engine/ir/graph.h>
#include <kiln/engine/package/package.h>
#include <kiln/runtime/backend/options.h>
#include <kiln/runtime/backend/options_map.h>
#include <kiln/runtime/backend/registry.h>
#include <kiln/runtime/core/data_loader.h>
#include <kiln/runtime/executor/method.h>
#include <kiln/runtime/executor/program.h>
#include <kiln/testing/program_builder.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>

namespace kiln::backends {
namespace {

namespace ir = engine::ir;
using runtime::BackendOptions;
using runtime::Error;
using runtime::EValue;
using runtime::LoadBackendOptionsMap;
using runtime::Method;
using runtime::Program;
using runtime::Result;
using runtime::ShapeDynamism;
using runtime::Tensor;
using testing::F32;
using ::testing::HasSubstr;
using testing::ProgramBuilder;

constexpr const char* kPackageKey = "kiln/package/test";
constexpr int64_t kIn = 4;
constexpr int64_t kOut = 3;

std::vector<float> random_floats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

const std::vector<float>& weights() {
  static const std::vector<float> w = random_floats(kIn * kOut, 7);
  return w;
}
const std::vector<float>& bias() {
  static const std::vector<float> b = random_floats(kOut, 8);
  return b;
}

// y = Relu(MatMul(x, W) + b), x: [batch, 4], as a one-function IR model named `function`.
ir::Model matmul_add_relu(ir::Dim batch, const std::string& function = "main") {
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

std::vector<uint8_t> package_of(const ir::Model& model) {
  auto bytes = engine::package::write_package(model);
  EXPECT_TRUE(bytes.ok()) << bytes.status();
  return bytes.ok() ? *bytes : std::vector<uint8_t>{};
}

std::vector<uint8_t> bytes_of(const std::string& text) {
  return std::vector<uint8_t>(text.begin(), text.end());
}

std::string function_manifest(const std::string& function = "main") {
  return R"({"package": ")" + std::string(kPackageKey) +
         R"(", "input_names": ["x"], "output_names": ["y"], "function": ")" + function + R"("})";
}

// A program whose method "forward" is one KilnBackend delegate. `batch` 0: a symbolic batch.
ProgramBuilder kiln_program(const std::vector<uint8_t>& package, const std::string& manifest,
                            int64_t batch) {
  ProgramBuilder builder;
  builder.method("forward");
  if (batch > 0) {
    builder.input("x", F32, {batch, kIn}).tensor("y", F32, {batch, kOut});
  } else {
    builder.input("x", F32, {0, kIn}, ShapeDynamism::Unbounded, {"batch", ""})
        .tensor("y", F32, {0, kOut}, ShapeDynamism::Unbounded);
  }
  return builder.delegate("KilnBackend", bytes_of(manifest), {"x"}, {"y"})
      .output("y")
      .named_data(kPackageKey, package);
}

// The same graph on the reference kernels.
ProgramBuilder reference_program(int64_t batch) {
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

Result<Loaded> load(const ProgramBuilder& builder, const LoadBackendOptionsMap* options = nullptr) {
  KILN_ASSIGN_OR_RETURN(auto bytes, builder.build());
  auto owned = std::make_shared<std::vector<uint8_t>>(std::move(bytes));
  auto loader = std::make_shared<runtime::BufferDataLoader>(owned->data(), owned->size(), owned);
  Loaded loaded;
  KILN_ASSIGN_OR_RETURN(loaded.program, Program::load(loader));
  KILN_ASSIGN_OR_RETURN(loaded.method, loaded.program->load_method("forward", options));
  return loaded;
}

// Runs `method` on x of shape [batch, 4]; returns y's values (and checks its shape).
std::vector<float> run(Method& method, int64_t batch, uint32_t seed) {
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

void expect_near(const std::vector<float>& got, const std::vector<float>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-5f) << "element " << i;
}

TEST(KilnBackend, IsRegisteredWithItsOptions) {
  auto backend = runtime::get_backend("KilnBackend");
  ASSERT_NE(backend, nullptr);
  std::vector<std::string> keys;
  for (const auto& spec : backend->option_specs()) keys.push_back(spec.key);
  EXPECT_THAT(keys, ::testing::UnorderedElementsAre("compute_unit", "expect_frequent_reshapes",
                                                    "share_multifunction_model", "cache_dir",
                                                    "num_threads"));
}

TEST(KilnBackend, StaticModelMatchesReferenceKernels) {
  auto package = package_of(matmul_add_relu(2));
  auto kiln = load(kiln_program(package, function_manifest(), 2));
  ASSERT_TRUE(kiln.ok()) << kiln.status();
  auto reference = load(reference_program(2));
  ASSERT_TRUE(reference.ok()) << reference.status();
  for (uint32_t seed : {1u, 2u}) {
    auto want = run(*reference->method, 2, seed);
    expect_near(run(*kiln->method, 2, seed), want);
  }
}

TEST(KilnBackend, SymbolicBatchRunsAtTwoBatchSizes) {
  auto package = package_of(matmul_add_relu(ir::Dim::symbol("batch")));
  auto kiln = load(kiln_program(package, function_manifest(), 0));
  ASSERT_TRUE(kiln.ok()) << kiln.status();
  for (int64_t batch : {3, 17, 3}) {
    auto reference = load(reference_program(batch));
    ASSERT_TRUE(reference.ok()) << reference.status();
    uint32_t seed = static_cast<uint32_t>(batch);
    expect_near(run(*kiln->method, batch, seed), run(*reference->method, batch, seed));
  }
}

TEST(KilnBackend, OptionsReachTheDelegate) {
  auto package = package_of(matmul_add_relu(2));
  BackendOptions<5> opts;
  ASSERT_TRUE(opts.set_option("compute_unit", "cpu_only").ok());
  ASSERT_TRUE(opts.set_option("num_threads", 2).ok());
  ASSERT_TRUE(opts.set_option("cache_dir", "").ok());
  ASSERT_TRUE(opts.set_option("share_multifunction_model", true).ok());
  LoadBackendOptionsMap map;
  ASSERT_TRUE(map.set_options("KilnBackend", opts.view()).ok());
  auto kiln = load(kiln_program(package, function_manifest(), 2), &map);
  ASSERT_TRUE(kiln.ok()) << kiln.status();
  auto reference = load(reference_program(2));
  ASSERT_TRUE(reference.ok());
  expect_near(run(*kiln->method, 2, 5), run(*reference->method, 2, 5));
}

Result<Loaded> load_with(runtime::BackendOption option) {
  LoadBackendOptionsMap map;
  KILN_RETURN_IF_ERROR(
      map.set_options("KilnBackend", runtime::Span<const runtime::BackendOption>(&option, 1)));
  static const auto package = package_of(matmul_add_relu(2));
  return load(kiln_program(package, function_manifest(), 2), &map);
}

TEST(KilnBackend, BadOptionsFailInitNamingTheOption) {
  auto unit = load_with({"compute_unit", std::string("gpu_maybe")});
  ASSERT_FALSE(unit.ok());
  EXPECT_EQ(unit.status().code(), Error::InvalidArgument);
  EXPECT_THAT(unit.status().message(), HasSubstr("compute_unit"));
  EXPECT_THAT(unit.status().message(), HasSubstr("gpu_maybe"));

  auto reshapes = load_with({"expect_frequent_reshapes", int64_t{1}});
  ASSERT_FALSE(reshapes.ok());
  EXPECT_EQ(reshapes.status().code(), Error::InvalidArgument);
  EXPECT_THAT(reshapes.status().message(), HasSubstr("expect_frequent_reshapes"));

  auto threads = load_with({"num_threads", int64_t{0}});
  ASSERT_FALSE(threads.ok());
  EXPECT_THAT(threads.status().message(), HasSubstr("num_threads"));

  auto unknown = load_with({"compute_units", std::string("all")});
  ASSERT_FALSE(unknown.ok());
  EXPECT_THAT(unknown.status().message(), HasSubstr("did you mean 'compute_unit'"));
}

struct BadManifest {
  const char* name;
  std::string manifest;
  const char* substring;
};

class KilnBackendManifest : public ::testing::TestWithParam<BadManifest> {};

TEST_P(KilnBackendManifest, InitFailsNamingTheField) {
  auto package = package_of(matmul_add_relu(2));
  auto kiln = load(kiln_program(package, GetParam().manifest, 2));
  ASSERT_FALSE(kiln.ok());
  EXPECT_THAT(kiln.status().message(), HasSubstr(GetParam().substring));
  EXPECT_THAT(kiln.status().message(), HasSubstr("delegate 'forward_0'"));
}

std::string manifest_with(const std::string& package, const std::string& inputs,
                          const std::string& function) {
  return R"({"package": ")" + package + R"(", "input_names": )" + inputs +
         R"(, "output_names": ["y"], "function": ")" + function + R"("})";
}

INSTANTIATE_TEST_SUITE_P(
    Cases, KilnBackendManifest,
    ::testing::Values(
        BadManifest{"NotJson", "not json", "not JSON"},
        BadManifest{"MissingPackage",
                    R"({"input_names": ["x"], "output_names": ["y"], "function": "main"})",
                    "field 'package' is missing"},
        BadManifest{"UnknownField",
                    R"({"package": "kiln/package/test", "input_names": ["x"],
                        "output_names": ["y"], "function": "main", "shapes": []})",
                    "field 'shapes' is unknown"},
        BadManifest{"FunctionAndEnumerated",
                    R"({"package": "kiln/package/test", "input_names": ["x"],
                        "output_names": ["y"], "function": "main", "enumerated": true})",
                    "field 'enumerated'"},
        BadManifest{"WrongType",
                    R"({"package": "kiln/package/test", "input_names": ["x"],
                        "output_names": "y", "function": "main"})",
                    "field 'output_names' is a string"},
        BadManifest{"UnknownNamedDataKey", manifest_with("kiln/package/nope", R"(["x"])", "main"),
                    "field 'package'"},
        BadManifest{"FunctionNotInPackage", manifest_with(kPackageKey, R"(["x"])", "forward_0"),
                    "field 'function' is 'forward_0', which package"},
        BadManifest{"InputCountMismatch", manifest_with(kPackageKey, R"(["x", "z"])", "main"),
                    "field 'input_names' is ['x', 'z'] (expected ['x']"},
        BadManifest{"InputNameMismatch", manifest_with(kPackageKey, R"(["input"])", "main"),
                    "field 'input_names'"}),
    [](const ::testing::TestParamInfo<BadManifest>& info) { return std::string(info.param.name); });

TEST(KilnBackend, CorruptPackageFailsInit) {
  auto package = package_of(matmul_add_relu(2));
  package[package.size() - 1] ^= 0xff;
  auto kiln = load(kiln_program(package, function_manifest(), 2));
  ASSERT_FALSE(kiln.ok());
  EXPECT_THAT(kiln.status().message(), HasSubstr("open model package 'kiln/package/test'"));
}

TEST(KilnBackend, WrongShapeForStaticFunctionIsRejected) {
  // The program declares x with a bounded batch, the package a static batch of 2.
  auto package = package_of(matmul_add_relu(2));
  ProgramBuilder builder;
  builder.method("forward")
      .input("x", F32, {4, kIn}, ShapeDynamism::Bounded)
      .tensor("y", F32, {4, kOut}, ShapeDynamism::Bounded)
      .delegate("KilnBackend", bytes_of(function_manifest()), {"x"}, {"y"})
      .output("y")
      .named_data(kPackageKey, package);
  auto kiln = load(builder);
  ASSERT_TRUE(kiln.ok()) << kiln.status();
  std::vector<float> x(3 * kIn, 1.0f);
  ASSERT_TRUE(kiln->method->set_input(0, EValue(Tensor(F32, {3, kIn}, x.data()))).ok());
  auto status = kiln->method->execute();
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.code(), Error::InvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("input shapes ([3, 4]) (expected ([2, 4]))"));
}

}  // namespace
}  // namespace kiln::backends
