// KilnBackend end to end: programs written with ProgramBuilder that hold a model package (an IR
// model built in code) as named data and a manifest as the delegate blob, loaded through
// Program and run, compared with the same graph run on the reference kernels.
#include <kiln/backends/kiln/kiln_backend.h>
#include <kiln/backends/kiln/test/kiln_test_programs.h>
#include <kiln/engine/ir/graph.h>
#include <kiln/engine/loader/model_loader.h>
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
using namespace kiln_test;  // the programs and helpers shared by the backend's tests

TEST(KilnBackend, IsRegisteredWithItsOptions) {
  auto backend = runtime::get_backend("KilnBackend");
  ASSERT_NE(backend, nullptr);
  std::vector<std::string> keys;
  for (const auto& spec : backend->option_specs()) keys.push_back(spec.key);
  EXPECT_THAT(keys, ::testing::UnorderedElementsAre("compute_unit", "expect_frequent_reshapes",
                                                    "share_multifunction_model", "cache_dir",
                                                    "num_threads", "winograd"));
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

// More batch sizes than the delegate keeps sessions for (engine::kShapePlansKept), and than the
// engine builds per-shape plans for: the early ones keep their plans, later new ones run on the
// shape-generic plan, and shapes that come back after their session was dropped are bound
// again.
TEST(KilnBackend, SymbolicBatchRunsAtManyBatchSizes) {
  auto package = package_of(matmul_add_relu(ir::Dim::symbol("batch")));
  auto kiln = load(kiln_program(package, function_manifest(), 0));
  ASSERT_TRUE(kiln.ok()) << kiln.status();
  for (int round = 0; round < 2; ++round) {
    for (int64_t batch = 1; batch <= static_cast<int64_t>(engine::kShapePlansKept) + 4; ++batch) {
      auto reference = load(reference_program(batch));
      ASSERT_TRUE(reference.ok()) << reference.status();
      uint32_t seed = static_cast<uint32_t>(batch + 10 * round);
      expect_near(run(*kiln->method, batch, seed), run(*reference->method, batch, seed));
    }
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
