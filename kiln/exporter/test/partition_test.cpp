// Partitioning at graph breaks, multi-method (multifunction) export and their settings checks.
#include <kiln/backends/kiln/kiln_backend.h>
#include <kiln/engine/loader/background_stores.h>
#include <kiln/engine/package/package.h>
#include <kiln/exporter/export.h>
#include <kiln/exporter/lowering.h>
#include <kiln/exporter/onnx/onnx_importer.h>
#include <kiln/exporter/partition.h>
#include <kiln/exporter/test/onnx_model_builder.h>
#include <kiln/extension/module/module.h>
#include <kiln/extension/module/tensor_ptr.h>
#include <kiln/runtime/core/data_loader.h>
#include <kiln/runtime/executor/program.h>
#include <kiln/runtime/schema/program_generated.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace kiln::exporter {
namespace {

namespace fs = std::filesystem;
namespace ir = engine::ir;
using runtime::Error;
using ::testing::HasSubstr;

// x f32 [1, n] → relu(x * (sum(x) > 0 ? 2 : 3) + 0.5): a data-dependent If between two runs.
// `size` 0 leaves n symbolic; otherwise it is that size.
std::string break_model(int64_t size = 0) {
  test::OnnxModelBuilder b;
  const std::vector<std::string> dims =
      size == 0 ? std::vector<std::string>{"", "n"} : std::vector<std::string>{};
  b.input("x", onnx::TensorProto::FLOAT, {1, size}, dims);
  b.output("out", onnx::TensorProto::FLOAT, {1, size}, dims);
  b.initializer_f32("zero", {}, {0.0f});
  b.initializer_f32("two", {1}, {2.0f});
  b.initializer_f32("three", {1}, {3.0f});
  b.initializer_f32("w", {1}, {0.5f});
  auto& sum = b.node("ReduceSum", {"x"}, {"s"}, "sum");
  test::OnnxModelBuilder::int_attribute(sum, "keepdims", 0);
  b.node("Greater", {"s", "zero"}, {"cond"}, "positive");
  auto& when = b.node("If", {"cond"}, {"y1"}, "choose");
  test::OnnxModelBuilder::graph_attribute(
      when, "then_branch",
      test::OnnxModelBuilder::one_node_graph("then", "Mul", {"x", "two"}, "t_then", {1, size},
                                             dims));
  test::OnnxModelBuilder::graph_attribute(
      when, "else_branch",
      test::OnnxModelBuilder::one_node_graph("else", "Mul", {"x", "three"}, "t_else", {1, size},
                                             dims));
  b.node("Add", {"y1", "w"}, {"a"}, "bias");
  b.node("Relu", {"a"}, {"out"}, "relu");
  return b.bytes();
}

// x f32 [1, 4] → relu(x + 0.5), with the same weight `w` as the break model.
std::string static_model() {
  test::OnnxModelBuilder b;
  b.input("x", onnx::TensorProto::FLOAT, {1, 4});
  b.output("out", onnx::TensorProto::FLOAT, {1, 4});
  b.initializer_f32("w", {1}, {0.5f});
  b.node("Add", {"x", "w"}, {"a"}, "bias");
  b.node("Relu", {"a"}, {"out"}, "relu");
  return b.bytes();
}

float expected(const std::vector<float>& x, size_t i) {
  float sum = 0.0f;
  for (float v : x) sum += v;
  float y = x[i] * (sum > 0.0f ? 2.0f : 3.0f) + 0.5f;
  return y > 0.0f ? y : 0.0f;
}

class PartitionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) /
           ("kiln_partition_" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    std::ofstream(dir_ / "break.onnx", std::ios::binary) << break_model();
    std::ofstream(dir_ / "static.onnx", std::ios::binary) << static_model();
    const char* previous = std::getenv("KILN_CACHE_DIR");
    had_cache_dir_ = previous != nullptr;
    if (had_cache_dir_) saved_cache_dir_ = previous;
    setenv("KILN_CACHE_DIR", (dir_ / "cache").c_str(), 1);
  }
  void TearDown() override {
    if (had_cache_dir_) {
      setenv("KILN_CACHE_DIR", saved_cache_dir_.c_str(), 1);
    } else {
      unsetenv("KILN_CACHE_DIR");
    }
    engine::wait_for_background_stores();  // a cache miss writes its entry in the background
    std::error_code ignored;
    fs::remove_all(dir_, ignored);
  }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  fs::path write(const std::vector<uint8_t>& bytes, const std::string& name) const {
    fs::path p = dir_ / name;
    std::ofstream(p, std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes.data()),
               static_cast<std::streamsize>(bytes.size()));
    return p;
  }

  fs::path dir_;
  bool had_cache_dir_ = false;
  std::string saved_cache_dir_;
};

std::shared_ptr<runtime::Program> load_program(const std::vector<uint8_t>& bytes) {
  auto loader = std::make_shared<runtime::BufferDataLoader>(bytes.data(), bytes.size());
  auto program = runtime::Program::load(loader);
  EXPECT_TRUE(program.ok()) << program.status().to_string();
  return program.ok() ? *program : nullptr;
}

// The KilnBackend manifests of method `method`, in delegate order.
std::vector<nlohmann::json> manifests(const runtime::Program& program, const std::string& method) {
  std::vector<nlohmann::json> out;
  for (const auto* m : *program.flatbuffer()->methods()) {
    if (m->name()->str() != method || m->delegates() == nullptr) continue;
    for (const auto* d : *m->delegates()) {
      out.push_back(nlohmann::json::parse(d->processed()->begin(), d->processed()->end()));
      out.back()["id"] = d->id()->str();
      if (d->compile_specs() != nullptr) {
        for (const auto* spec : *d->compile_specs()) {
          out.back()["spec:" + spec->key()->str()] =
              std::string(spec->value()->begin(), spec->value()->end());
        }
      }
    }
  }
  return out;
}

void expect_runs(extension::Module& module, const std::string& method, int64_t n) {
  for (float sign : {1.0f, -1.0f}) {
    std::vector<float> x(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) x[static_cast<size_t>(i)] = sign * (0.25f + 0.5f * i);
    auto tensor = extension::make_tensor_ptr({1, n}, x);
    ASSERT_TRUE(tensor.ok());
    auto outputs = module.execute(method, {runtime::EValue(**tensor)});
    ASSERT_TRUE(outputs.ok()) << outputs.status().to_string();
    const runtime::Tensor& out = (*outputs)[0].to_tensor();
    ASSERT_EQ(out.numel(), n);
    for (int64_t i = 0; i < n; ++i) {
      EXPECT_FLOAT_EQ(out.data_ptr<float>()[i], expected(x, static_cast<size_t>(i)))
          << method << " n=" << n << " sign " << sign << " i=" << i;
    }
  }
}

TEST_F(PartitionTest, AnIfSplitsTheGraphIntoTwoRunsAndABreak) {
  auto model = import_onnx_file(path("break.onnx"));
  ASSERT_TRUE(model.ok()) << model.status().to_string();
  const ir::Graph& g = *model->find_function("forward");
  std::vector<Partition> parts = partition_graph(g);
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_FALSE(parts[0].is_break);
  EXPECT_TRUE(parts[1].is_break);
  EXPECT_FALSE(parts[2].is_break);
  auto names = [&](const std::vector<int>& values) {
    std::vector<std::string> out;
    for (int v : values) out.push_back(g.values[static_cast<size_t>(v)].name);
    return out;
  };
  EXPECT_EQ(names(parts[0].inputs), std::vector<std::string>{"x"});
  EXPECT_EQ(names(parts[0].outputs), std::vector<std::string>{"cond"});
  // The break reads x inside its branches; the weights stay out of every interface.
  EXPECT_THAT(names(parts[1].inputs), ::testing::UnorderedElementsAre("cond", "x"));
  EXPECT_EQ(names(parts[1].outputs), std::vector<std::string>{"y1"});
  EXPECT_EQ(names(parts[2].inputs), std::vector<std::string>{"y1"});
  EXPECT_EQ(names(parts[2].outputs), std::vector<std::string>{"out"});

  ir::Model target;
  ir::Graph f = extract_partition(*model, g, parts[2], "tail", target);
  EXPECT_EQ(f.nodes.size(), 2u);
  EXPECT_EQ(target.weights.size(), 1u);  // w only
  EXPECT_EQ(f.values.size(), 4u);        // y1, w, a, out
}

TEST_F(PartitionTest, AGraphBreakYieldsTwoDelegatesAroundReferenceKernelCalls) {
  std::vector<std::string> notes;
  ExportOptions options;
  options.on_note = [&](const std::string& note) { notes.push_back(note); };
  auto bytes = export_onnx_file(path("break.onnx"), options);
  ASSERT_TRUE(bytes.ok()) << bytes.status().to_string();
  auto program = load_program(*bytes);
  ASSERT_NE(program, nullptr);
  auto found = manifests(*program, "forward");
  ASSERT_EQ(found.size(), 2u);
  EXPECT_EQ(found[0]["id"], "forward_0");
  EXPECT_EQ(found[1]["id"], "forward_1");
  EXPECT_EQ(found[0]["function"], "main");
  EXPECT_EQ(found[1]["function"], "main");
  EXPECT_NE(found[0]["package"], found[1]["package"]);
  EXPECT_EQ(program->named_data().keys().size(), 2u);
  EXPECT_TRUE(notes.empty()) << notes[0];
  extension::Module module(write(*bytes, "break.kiln").string());
  for (int64_t n : {3, 5}) expect_runs(module, "forward", n);
}

// Static sizes: the If's condition (a sum of 6,000 values and a comparison) is less work than a
// delegate's load and stays on the reference kernels; the run after the If (24,000 values and
// more) keeps its delegate.
TEST_F(PartitionTest, ALightPartitionBesideABreakStaysOnTheReferenceKernels) {
  constexpr int64_t kSize = 6000;
  std::ofstream(dir_ / "break_static.onnx", std::ios::binary) << break_model(kSize);
  std::vector<std::string> notes;
  ExportOptions options;
  options.on_note = [&](const std::string& note) { notes.push_back(note); };
  auto bytes = export_onnx_file(path("break_static.onnx"), options);
  ASSERT_TRUE(bytes.ok()) << bytes.status().to_string();
  auto program = load_program(*bytes);
  ASSERT_NE(program, nullptr);
  auto found = manifests(*program, "forward");
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(program->named_data().keys().size(), 1u);
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_THAT(notes[0], HasSubstr("nodes 'sum'.."));
  EXPECT_THAT(notes[0], HasSubstr("2 element-wise, reduction or shape op(s) over 6004 values"));
  extension::Module module(write(*bytes, "break_static.kiln").string());
  expect_runs(module, "forward", kSize);
}

TEST_F(PartitionTest, PortableBackendHasNoDelegates) {
  ExportOptions options;
  options.backend = "portable";
  auto bytes = export_onnx_file(path("break.onnx"), options);
  ASSERT_TRUE(bytes.ok()) << bytes.status().to_string();
  auto program = load_program(*bytes);
  ASSERT_NE(program, nullptr);
  EXPECT_TRUE(manifests(*program, "forward").empty());
  extension::Module module(write(*bytes, "portable.kiln").string());
  expect_runs(module, "forward", 4);
}

TEST_F(PartitionTest, MultifunctionSharesOnePackageWithWeightsOnce) {
  ExportOptions options;
  options.multifunction = true;
  ASSERT_TRUE(parse_enumeration("prefill:x:1=4,8").ok());
  options.enumerations.push_back(*parse_enumeration("prefill:x:1=4,8"));
  auto bytes = export_program(
      {{"forward", path("static.onnx"), {}, {}, {}}, {"prefill", path("break.onnx"), {}, {}, {}}},
      options);
  ASSERT_TRUE(bytes.ok()) << bytes.status().to_string();
  auto program = load_program(*bytes);
  ASSERT_NE(program, nullptr);
  ASSERT_EQ(program->named_data().keys().size(), 1u);
  auto forward = manifests(*program, "forward");
  auto prefill = manifests(*program, "prefill");
  ASSERT_EQ(forward.size(), 1u);
  ASSERT_EQ(prefill.size(), 2u);
  EXPECT_EQ(forward[0]["function"], "forward_0");
  EXPECT_EQ(forward[0]["package"], prefill[0]["package"]);
  EXPECT_EQ(prefill[0]["enumerated"], true);
  std::vector<std::string> functions;
  for (const auto& f : prefill[0]["enumerated_functions"]) functions.push_back(f["function"]);
  EXPECT_EQ(functions, (std::vector<std::string>{"prefill_0_n_4", "prefill_0_n_8"}));
  EXPECT_EQ(prefill[0]["enumerated_functions"][1]["input_shapes"],
            nlohmann::json::parse("[[1, 8]]"));

  // One package: the functions of both methods, `w` once (plus `zero` of prefill_0).
  auto data = program->named_data().get_data(program->named_data().keys()[0]);
  ASSERT_TRUE(data.ok());
  auto view = engine::package::PackageView::open(
      runtime::Span<const uint8_t>(static_cast<const uint8_t*>(data->data()), data->size()));
  ASSERT_TRUE(view.ok()) << view.status().to_string();
  EXPECT_EQ(view->num_weights(), 2u);
  std::vector<std::string> in_package;
  for (const ir::Graph& f : view->model().functions) in_package.push_back(f.name);
  // y1, the break's output, is [1, n] too: the second partition is enumerated as well.
  EXPECT_EQ(in_package, (std::vector<std::string>{"forward_0", "prefill_0_n_4", "prefill_0_n_8",
                                                  "prefill_1_n_4", "prefill_1_n_8"}));

  extension::Module module(write(*bytes, "multi.kiln").string());
  for (int64_t n : {4, 8}) expect_runs(module, "prefill", n);
  auto five = extension::make_tensor_ptr({1, 5}, std::vector<float>(5, 1.0f));
  ASSERT_TRUE(five.ok());
  auto rejected = module.execute("prefill", {runtime::EValue(**five)});
  ASSERT_FALSE(rejected.ok());
  EXPECT_EQ(rejected.error(), Error::InvalidArgument);
  EXPECT_THAT(rejected.status().message(), HasSubstr("[1, 5]"));
  auto x = extension::make_tensor_ptr({1, 4}, std::vector<float>{-1.0f, 0.0f, 1.0f, 2.0f});
  ASSERT_TRUE(x.ok());
  auto out = module.execute("forward", {runtime::EValue(**x)});
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  EXPECT_FLOAT_EQ((*out)[0].to_tensor().data_ptr<float>()[0], 0.0f);
  EXPECT_FLOAT_EQ((*out)[0].to_tensor().data_ptr<float>()[3], 2.5f);
}

TEST_F(PartitionTest, WithoutMultifunctionEachDelegateHasItsOwnPackage) {
  auto bytes = export_program(
      {{"forward", path("static.onnx"), {}, {}, {}}, {"prefill", path("break.onnx"), {}, {}, {}}});
  ASSERT_TRUE(bytes.ok()) << bytes.status().to_string();
  auto program = load_program(*bytes);
  ASSERT_NE(program, nullptr);
  EXPECT_EQ(program->named_data().keys().size(), 3u);
  extension::Module module(write(*bytes, "two.kiln").string());
  expect_runs(module, "prefill", 6);
}

TEST_F(PartitionTest, ExportTimeReshapeHintBecomesACompileSpec) {
  ExportOptions options;
  options.expect_frequent_reshapes = true;
  auto bytes = export_onnx_file(path("break.onnx"), options);
  ASSERT_TRUE(bytes.ok()) << bytes.status().to_string();
  auto program = load_program(*bytes);
  ASSERT_NE(program, nullptr);
  for (const auto& m : manifests(*program, "forward")) {
    EXPECT_EQ(m["spec:expect_frequent_reshapes"], "true") << m.dump();
  }
}

TEST_F(PartitionTest, AotEmbedsTheArtifactSoTheFirstLoadCompilesNothing) {
  std::vector<std::string> notes;
  ExportOptions options;
  options.aot = true;
  options.on_note = [&](const std::string& note) { notes.push_back(note); };
  auto bytes = export_program(
      {{"forward", path("static.onnx"), {}, {}, {}}, {"prefill", path("break.onnx"), {}, {}, {}}},
      options);
  ASSERT_TRUE(bytes.ok()) << bytes.status().to_string();
  auto program = load_program(*bytes);
  ASSERT_NE(program, nullptr);
  auto forward = manifests(*program, "forward");
  ASSERT_EQ(forward.size(), 1u);
  EXPECT_EQ(forward[0]["spec:aot_artifact"],
            "kiln/aot/" + forward[0]["package"].get<std::string>().substr(13));
  // prefill's partitions have symbolic inputs: nothing to compile ahead of time, said so.
  for (const auto& m : manifests(*program, "prefill"))
    EXPECT_FALSE(m.contains("spec:aot_artifact"));
  ASSERT_EQ(notes.size(), 2u);
  EXPECT_THAT(notes[0], HasSubstr("no function of static input shapes"));

  backends::KilnLoadCounters before = backends::kiln_load_counters();
  extension::Module module(write(*bytes, "aot.kiln").string());
  auto x = extension::make_tensor_ptr({1, 4}, std::vector<float>{-1.0f, 0.0f, 1.0f, 2.0f});
  ASSERT_TRUE(x.ok());
  auto out = module.execute("forward", {runtime::EValue(**x)});
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  EXPECT_FLOAT_EQ((*out)[0].to_tensor().data_ptr<float>()[3], 2.5f);
  backends::KilnLoadCounters after = backends::kiln_load_counters();
  EXPECT_EQ(after.aot, before.aot + 1);
  EXPECT_EQ(after.cache_hits, before.cache_hits + 1);
  EXPECT_EQ(after.cache_misses, before.cache_misses);
}

TEST_F(PartitionTest, SettingsThatDisagreeFailNamingMethodsAndSetting) {
  struct Case {
    std::vector<MethodSource> methods;
    ExportOptions options;
    std::string problem;
  };
  ExportOptions multi;
  multi.multifunction = true;
  ExportOptions portable;
  portable.backend = "portable";
  portable.multifunction = true;
  std::vector<Case> cases = {
      {{{"forward", path("static.onnx"), true, {}, {}},
        {"prefill", path("break.onnx"), {}, {}, {}},
        {"decode", path("break.onnx"), false, {}, {}}},
       {},
       "methods 'forward' are exported multifunction and 'prefill', 'decode' are not"},
      {{{"forward", path("static.onnx"), {}, true, {}},
        {"prefill", path("break.onnx"), {}, {}, {}}},
       multi,
       "compile setting expect_frequent_reshapes is on for 'forward' and off for 'prefill'"},
      {{{"forward", path("static.onnx"), {}, {}, {}}, {"forward", path("break.onnx"), {}, {}, {}}},
       {},
       "method 'forward' is given twice"},
      {{}, {}, "no method"},
      {{{"forward", path("static.onnx"), {}, {}, {}}}, portable, "need --backend kiln"},
  };
  for (const Case& c : cases) {
    auto bytes = export_program(c.methods, c.options);
    ASSERT_FALSE(bytes.ok()) << c.problem;
    EXPECT_EQ(bytes.error(), Error::InvalidArgument) << c.problem;
    EXPECT_THAT(bytes.status().message(), HasSubstr(c.problem));
  }
  ExportOptions flagged;
  flagged.enumerations.push_back(*parse_enumeration("decode:x:1=4"));
  auto unknown = export_program({{"prefill", path("break.onnx"), {}, {}, {}}}, flagged);
  ASSERT_FALSE(unknown.ok());
  EXPECT_THAT(unknown.status().message(),
              HasSubstr("--enumerate names method 'decode' (expected one of 'prefill')"));
}

TEST(PackageSetTest, TwoDelegatesMakingOneFunctionNameFail) {
  PackageSet set(/*multifunction=*/true);
  int first = -1, second = -1;
  set.package_for_delegate(first);
  set.package_for_delegate(second);
  EXPECT_EQ(first, second);
  ASSERT_TRUE(set.claim(first, "a_1_n_4", "a_1").ok());
  auto status = set.claim(second, "a_1_n_4", "a_1_n_4_0");
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.code(), Error::InvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("delegates 'a_1' and 'a_1_n_4_0' both make function "
                                          "'a_1_n_4'"));
  PackageSet separate(/*multifunction=*/false);
  separate.package_for_delegate(first);
  separate.package_for_delegate(second);
  EXPECT_NE(first, second);
}

}  // namespace
}  // namespace kiln::exporter
