// Module: load-time backend options reach delegates, are copied, follow the documented
// precedence, and a failed load leaves the Module as it was.

#include <kiln/extension/module/module.h>
#include <kiln/extension/module/tensor_ptr.h>
#include <kiln/extension/module/test/test_files.h>
#include <kiln/runtime/backend/options.h>
#include <kiln/runtime/backend/options_map.h>
#include <kiln/testing/program_builder.h>
#include <kiln/testing/stub_backend.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

namespace kiln::extension {
namespace {

using kiln::testing::F32;
using kiln::testing::ProgramBuilder;
using kiln::testing::StubBackend;
using runtime::BackendOption;
using runtime::BackendOptions;
using runtime::Error;
using runtime::EValue;
using runtime::LoadBackendOptionsMap;
using runtime::OptionSpec;
using runtime::OptionType;
using runtime::Status;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// Methods "forward" and "prefill", each one StubA delegate y = x; "forward" also has a StubB
// delegate z = y, so routing by backend id can be checked.
ProgramBuilder delegated_program() {
  ProgramBuilder builder;
  builder.input("x", F32, {1, 4})
      .tensor("y", F32, {1, 4})
      .tensor("z", F32, {1, 4})
      .delegate("StubA", {1, 2, 3}, {"x"}, {"y"})
      .delegate("StubB", {4, 5}, {"y"}, {"z"})
      .output("z");
  builder.method("prefill")
      .input("x", F32, {1, 4})
      .tensor("y", F32, {1, 4})
      .delegate("StubA", {6}, {"x"}, {"y"})
      .output("y");
  return builder;
}

std::vector<OptionSpec> stub_specs() {
  return {
      OptionSpec{"compute_unit", OptionType::String, "where to run", {"cpu", "gpu"}},
      OptionSpec{"num_threads", OptionType::Int, "threads", {}, 1, 64},
      OptionSpec{"fast", OptionType::Bool, "trade accuracy for speed", {}},
  };
}

BackendOption option(std::string key, std::variant<bool, int64_t, std::string> value) {
  return BackendOption{std::move(key), std::move(value)};
}

// The options StubA's init saw for the delegates of `method`, in init order.
std::vector<std::vector<BackendOption>> seen_by(const StubBackend& stub,
                                                const std::string& method) {
  std::vector<std::vector<BackendOption>> out;
  for (const auto& record : stub.inits()) {
    if (record.method_name == method) out.push_back(record.options);
  }
  return out;
}

class ModuleOptionsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    stub_a_ = StubBackend::install("StubA");
    stub_b_ = StubBackend::install("StubB");
    stub_a_->backend->specs = stub_specs();
    stub_b_->backend->specs = stub_specs();
    path_ = dir_.write(delegated_program(), "delegated.kiln");
  }

  // A map with StubA options compute_unit=gpu, num_threads=4, built from temporaries.
  static LoadBackendOptionsMap gpu_map() {
    BackendOptions<4> opts;
    EXPECT_TRUE(opts.set_option("compute_unit", "gpu").ok());
    EXPECT_TRUE(opts.set_option("num_threads", 4).ok());
    LoadBackendOptionsMap map;
    EXPECT_TRUE(map.set_options("StubA", opts.view()).ok());
    return map;
  }

  static TensorPtr input() {
    auto x = make_tensor_ptr({1, 4}, std::vector<float>{1, 2, 3, 4});
    EXPECT_TRUE(x.ok());
    return *x;
  }

  test::TempDir dir_;
  std::unique_ptr<StubBackend::Installed> stub_a_;
  std::unique_ptr<StubBackend::Installed> stub_b_;
  std::string path_;
};

TEST_F(ModuleOptionsTest, OptionsReachOnlyTheirOwnBackend) {
  BackendOptions<2> b_opts;
  ASSERT_TRUE(b_opts.set_option("fast", true).ok());
  LoadBackendOptionsMap map = gpu_map();
  ASSERT_TRUE(map.set_options("StubB", b_opts.view()).ok());

  Module module(path_);
  ASSERT_TRUE(module.load("forward", map).ok());
  EXPECT_THAT(seen_by(*stub_a_->backend, "forward"),
              ElementsAre(ElementsAre(option("compute_unit", std::string("gpu")),
                                      option("num_threads", int64_t{4}))));
  EXPECT_THAT(seen_by(*stub_b_->backend, "forward"),
              ElementsAre(ElementsAre(option("fast", true))));

  auto outputs = module.forward({EValue(*input())});
  ASSERT_TRUE(outputs.ok()) << outputs.status();
  EXPECT_EQ((*outputs)[0].to_tensor().data_ptr<float>()[3], 4.0f);  // stubs copy through
}

// A typed builder in the style of KilnBackendOptions: backend_id() and view().
class StubAOptions {
 public:
  StubAOptions& setNumThreads(int n) {
    (void)options_.set_option("num_threads", n);
    return *this;
  }
  std::string_view backend_id() const { return "StubA"; }
  runtime::Span<const BackendOption> view() const { return options_.view(); }

 private:
  BackendOptions<4> options_;
};

TEST_F(ModuleOptionsTest, BuilderOverloadAndOneMapForTwoModules) {
  LoadBackendOptionsMap map;
  ASSERT_TRUE(map.set_options(StubAOptions().setNumThreads(3)).ok());  // builder is a temporary
  Module first(path_);
  Module second(path_);
  ASSERT_TRUE(first.load("prefill", map).ok());
  ASSERT_TRUE(second.load("prefill", map).ok());
  EXPECT_THAT(seen_by(*stub_a_->backend, "prefill"),
              ElementsAre(ElementsAre(option("num_threads", int64_t{3})),
                          ElementsAre(option("num_threads", int64_t{3}))));
  ASSERT_TRUE(map.set_options(StubAOptions().setNumThreads(5)).ok());  // replaces for the id
  ASSERT_TRUE(second.load_method("prefill", map).ok());
  EXPECT_EQ(seen_by(*stub_a_->backend, "prefill").back(),
            (std::vector<BackendOption>{option("num_threads", int64_t{5})}));
}

TEST_F(ModuleOptionsTest, NoOptionsMeansBackendDefaults) {
  Module module(path_);
  ASSERT_TRUE(module.load_method("forward").ok());
  EXPECT_THAT(seen_by(*stub_a_->backend, "forward"), ElementsAre(IsEmpty()));
}

TEST_F(ModuleOptionsTest, DefaultMapIsCopiedBeforeLoadMethod) {
  Module module(path_);
  {
    // Runtime (non-literal) keys and values that die before the method is loaded.
    std::string key = std::string("compute_") + "unit";
    std::string value = "g" + std::string("pu");
    auto opts = std::make_unique<BackendOptions<1>>();
    ASSERT_TRUE(opts->set_option(key, value).ok());
    auto map = std::make_unique<LoadBackendOptionsMap>();
    ASSERT_TRUE(map->set_options("StubA", opts->view()).ok());
    ASSERT_TRUE(module.load(*map).ok());
    key.assign("overwritten");
    value.assign("overwritten");
  }
  ASSERT_TRUE(module.load_method("forward").ok());
  EXPECT_THAT(seen_by(*stub_a_->backend, "forward"),
              ElementsAre(ElementsAre(option("compute_unit", std::string("gpu")))));
}

TEST_F(ModuleOptionsTest, DefaultMapIsCopiedBeforeExecute) {
  Module module(path_);
  {
    auto map = std::make_unique<LoadBackendOptionsMap>(gpu_map());
    ASSERT_TRUE(module.load(*map).ok());
  }
  EXPECT_EQ(stub_a_->backend->num_inits(), 0);
  auto outputs = module.execute("prefill", {EValue(*input())});  // loads lazily
  ASSERT_TRUE(outputs.ok()) << outputs.status();
  EXPECT_THAT(seen_by(*stub_a_->backend, "prefill"),
              ElementsAre(ElementsAre(option("compute_unit", std::string("gpu")),
                                      option("num_threads", int64_t{4}))));
}

TEST_F(ModuleOptionsTest, ExplicitMapOverridesDefaultForThatMethodOnly) {
  Module module(path_);
  ASSERT_TRUE(module.load(gpu_map()).ok());

  BackendOptions<1> fast;
  ASSERT_TRUE(fast.set_option("fast", true).ok());
  LoadBackendOptionsMap override_map;
  ASSERT_TRUE(override_map.set_options("StubA", fast.view()).ok());
  ASSERT_TRUE(module.load_method("prefill", override_map).ok());
  ASSERT_TRUE(module.load_method("forward").ok());

  // Maps are not merged: prefill sees only the override.
  EXPECT_THAT(seen_by(*stub_a_->backend, "prefill"),
              ElementsAre(ElementsAre(option("fast", true))));
  EXPECT_THAT(seen_by(*stub_a_->backend, "forward"),
              ElementsAre(ElementsAre(option("compute_unit", std::string("gpu")),
                                      option("num_threads", int64_t{4}))));
}

TEST_F(ModuleOptionsTest, LoadWithMethodDoesNotChangeTheDefault) {
  Module module(path_);
  ASSERT_TRUE(module.load("forward", gpu_map()).ok());
  ASSERT_TRUE(module.load_method("prefill").ok());
  EXPECT_THAT(seen_by(*stub_a_->backend, "prefill"), ElementsAre(IsEmpty()));
}

TEST_F(ModuleOptionsTest, LaterLoadMapReplacesTheDefault) {
  Module module(path_);
  ASSERT_TRUE(module.load(gpu_map()).ok());
  ASSERT_TRUE(module.load(LoadBackendOptionsMap()).ok());
  ASSERT_TRUE(module.load_method("prefill").ok());
  EXPECT_THAT(seen_by(*stub_a_->backend, "prefill"), ElementsAre(IsEmpty()));
}

TEST_F(ModuleOptionsTest, RejectedOptionNamesTheKeyAndKeepsTheModule) {
  Module module(path_);
  ASSERT_TRUE(module.load_method("forward").ok());
  BackendOptions<1> bad;
  ASSERT_TRUE(bad.set_option("num_thread", 4).ok());  // typo
  LoadBackendOptionsMap map;
  ASSERT_TRUE(map.set_options("StubA", bad.view()).ok());

  Status status = module.load_method("prefill", map);
  EXPECT_EQ(status.code(), Error::InvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("num_thread"));
  EXPECT_FALSE(module.is_method_loaded("prefill"));
  EXPECT_TRUE(module.is_method_loaded("forward"));
  EXPECT_TRUE(module.forward({EValue(*input())}).ok());
}

TEST_F(ModuleOptionsTest, UnregisteredBackendInDefaultMapFailsAtLoad) {
  Module module(path_);
  ASSERT_TRUE(module.load(gpu_map()).ok());
  BackendOptions<1> opts;
  ASSERT_TRUE(opts.set_option("fast", true).ok());
  LoadBackendOptionsMap typo;
  ASSERT_TRUE(typo.set_options("StubC", opts.view()).ok());

  Status status = module.load(typo);
  EXPECT_EQ(status.code(), Error::InvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("'StubC'"));
  EXPECT_THAT(status.message(), HasSubstr("did you mean"));
  // The previous default is kept.
  ASSERT_TRUE(module.load_method("prefill").ok());
  EXPECT_THAT(seen_by(*stub_a_->backend, "prefill"),
              ElementsAre(ElementsAre(option("compute_unit", std::string("gpu")),
                                      option("num_threads", int64_t{4}))));
}

TEST_F(ModuleOptionsTest, FailedInitKeepsEarlierMethodsUsable) {
  Module module(path_);
  ASSERT_TRUE(module.load_method("forward").ok());
  stub_a_->backend->on_init =
      [](runtime::BackendInitContext& context, runtime::FreeableBuffer*,
         runtime::Span<const runtime::CompileSpec>) -> runtime::Result<runtime::DelegateHandle*> {
    return Status(Error::DelegateInvalidCompatibility,
                  "init delegate '" + context.delegate_id() + "': refused by test");
  };

  Status status = module.load_method("prefill");
  EXPECT_EQ(status.code(), Error::DelegateInvalidCompatibility);
  EXPECT_THAT(status.message(), HasSubstr("refused by test"));
  EXPECT_FALSE(module.is_method_loaded("prefill"));
  EXPECT_TRUE(module.is_loaded());
  EXPECT_TRUE(module.is_method_loaded("forward"));
  auto outputs = module.forward({EValue(*input())});
  EXPECT_TRUE(outputs.ok()) << outputs.status();
  // StubBackend frees its default handles only while no init hook is installed.
  stub_a_->backend->on_init = nullptr;
}

TEST_F(ModuleOptionsTest, FailedReloadKeepsThePreviousMethod) {
  Module module(path_);
  ASSERT_TRUE(module.load_method("prefill", gpu_map()).ok());
  auto before = module.method("prefill");
  ASSERT_TRUE(before.ok());
  const int destroyed = stub_a_->backend->destroy_count.load();
  stub_a_->backend->on_init =
      [](runtime::BackendInitContext&, runtime::FreeableBuffer*,
         runtime::Span<const runtime::CompileSpec>) -> runtime::Result<runtime::DelegateHandle*> {
    return Status(Error::OutOfResources, "init: no memory left in test");
  };

  Status status = module.load_method("prefill");
  EXPECT_EQ(status.code(), Error::OutOfResources);
  EXPECT_TRUE(module.is_method_loaded("prefill"));
  auto after = module.method("prefill");
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(*before, *after);
  EXPECT_EQ(stub_a_->backend->destroy_count.load(), destroyed);  // old delegate alive
  auto outputs = module.execute("prefill", {EValue(*input())});
  EXPECT_TRUE(outputs.ok()) << outputs.status();
  stub_a_->backend->on_init = nullptr;  // see FailedInitKeepsEarlierMethodsUsable
}

TEST_F(ModuleOptionsTest, SuccessfulReloadUsesTheNewOptions) {
  Module module(path_);
  ASSERT_TRUE(module.load_method("prefill").ok());
  ASSERT_TRUE(module.load_method("prefill", gpu_map()).ok());
  EXPECT_THAT(seen_by(*stub_a_->backend, "prefill"),
              ElementsAre(IsEmpty(), ElementsAre(option("compute_unit", std::string("gpu")),
                                                 option("num_threads", int64_t{4}))));
  EXPECT_EQ(stub_a_->backend->destroy_count.load(), 1);  // the old delegate went away
}

TEST_F(ModuleOptionsTest, RunTimeErrorNamesTheMethodOnce) {
  Module module(path_);
  stub_b_->backend->on_execute = [](runtime::DelegateHandle*, runtime::Span<EValue* const>,
                                    runtime::Span<EValue* const>) {
    return Status(Error::Internal, "stub b failed on purpose");
  };
  auto outputs = module.forward({EValue(*input())});
  ASSERT_FALSE(outputs.ok());
  const std::string& message = outputs.status().message();
  EXPECT_THAT(message, HasSubstr("stub b failed on purpose"));
  const std::string method = "method 'forward'";
  ASSERT_NE(message.find(method), std::string::npos) << message;
  EXPECT_EQ(message.find(method, message.find(method) + 1), std::string::npos) << message;
  // The method stays loaded and runs again once the backend recovers.
  stub_b_->backend->on_execute = nullptr;
  EXPECT_TRUE(module.forward({EValue(*input())}).ok());
}

TEST_F(ModuleOptionsTest, FailedLoadWithMethodOnFreshModuleLeavesItUnloaded) {
  stub_a_->backend->available = false;
  Module module(path_);
  Status status = module.load("forward", gpu_map());
  EXPECT_FALSE(status.ok());
  EXPECT_FALSE(module.is_loaded());
  EXPECT_FALSE(module.is_method_loaded("forward"));
}

TEST_F(ModuleOptionsTest, MissingFileLeavesALoadedModuleAsItWas) {
  const std::string path = dir_.write(delegated_program(), "gone.kiln");
  Module module(path);
  ASSERT_TRUE(module.load(gpu_map()).ok());
  ASSERT_TRUE(module.load_method("forward").ok());
  std::filesystem::remove(path);

  Module other(path);
  EXPECT_EQ(other.load(gpu_map()).code(), Error::AccessFailed);
  EXPECT_FALSE(other.is_loaded());

  // The loaded module does not need the file again, and its default map is intact.
  ASSERT_TRUE(module.load_method("prefill").ok());
  EXPECT_THAT(seen_by(*stub_a_->backend, "prefill"),
              ElementsAre(ElementsAre(option("compute_unit", std::string("gpu")),
                                      option("num_threads", int64_t{4}))));
  EXPECT_TRUE(module.forward({EValue(*input())}).ok());
}

}  // namespace
}  // namespace kiln::extension
