// Load-time options reach exactly the backend they are registered for, are checked against the
// backend's declared options, and a failed delegate init leaves nothing behind.
#include <kiln/runtime/backend/options.h>
#include <kiln/runtime/backend/options_map.h>
#include <kiln/runtime/executor/method.h>
#include <kiln/runtime/executor/test/test_util.h>
#include <kiln/testing/stub_backend.h>

#include <gtest/gtest.h>

namespace kiln::runtime {
namespace {

using testing::F32;
using testing::ProgramBuilder;
using testing::StubBackend;

std::vector<OptionSpec> kiln_like_specs() {
  return {{"expect_frequent_reshapes", OptionType::Bool, "shape hint"},
          {"num_threads", OptionType::Int, "threads", {}, 1, 256},
          {"compute_unit", OptionType::String, "units", {"all", "cpu_only", "prefer_gpu"}}};
}

// Two delegates: one for StubA, one for StubB.
std::shared_ptr<Program> two_backend_program() {
  return test::load_or_die(ProgramBuilder()
                               .input("x", F32, {2})
                               .delegate("StubA", {'a'}, {"x"}, {"y"})
                               .delegate("StubB", {'b'}, {"y"}, {"z"})
                               .output("z"));
}

class LoadOptionsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    a_ = StubBackend::install("StubA");
    b_ = StubBackend::install("StubB");
    a_->backend->specs = kiln_like_specs();
    b_->backend->specs = kiln_like_specs();
  }
  std::unique_ptr<StubBackend::Installed> a_, b_;
};

TEST_F(LoadOptionsTest, AbsentOptionsReachInitAsAbsent) {
  auto program = two_backend_program();
  auto method = program->load_method("forward");
  ASSERT_TRUE(method.ok()) << method.status();
  ASSERT_EQ(a_->backend->inits().size(), 1u);
  EXPECT_TRUE(a_->backend->inits()[0].options.empty());
  EXPECT_EQ(a_->backend->inits()[0].method_name, "forward");
  EXPECT_EQ(a_->backend->inits()[0].delegate_id, "forward_0");
  EXPECT_EQ(a_->backend->inits()[0].processed, std::vector<uint8_t>{'a'});
}

TEST_F(LoadOptionsTest, EachValueArrivesExactlyAsSet) {
  for (bool flag : {false, true}) {
    BackendOptions<3> opts;
    ASSERT_TRUE(opts.set_option("expect_frequent_reshapes", flag).ok());
    ASSERT_TRUE(opts.set_option("num_threads", 3).ok());
    ASSERT_TRUE(opts.set_option("compute_unit", "prefer_gpu").ok());
    LoadBackendOptionsMap map;
    ASSERT_TRUE(map.set_options("StubA", opts.view()).ok());
    auto method = two_backend_program()->load_method("forward", &map);
    ASSERT_TRUE(method.ok()) << method.status();
    auto inits = a_->backend->inits();
    const auto& seen = inits.back().options;
    ASSERT_EQ(seen.size(), 3u);
    EXPECT_EQ(seen[0], (BackendOption{"expect_frequent_reshapes", flag}));
    EXPECT_EQ(seen[1], (BackendOption{"num_threads", int64_t{3}}));
    EXPECT_EQ(seen[2], (BackendOption{"compute_unit", std::string("prefer_gpu")}));
  }
}

TEST_F(LoadOptionsTest, OptionsForOneBackendAreNotSeenByAnother) {
  BackendOptions<1> opts;
  ASSERT_TRUE(opts.set_option("num_threads", 2).ok());
  LoadBackendOptionsMap map;
  ASSERT_TRUE(map.set_options("StubA", opts.view()).ok());
  auto method = two_backend_program()->load_method("forward", &map);
  ASSERT_TRUE(method.ok()) << method.status();
  EXPECT_EQ(a_->backend->inits().back().options.size(), 1u);
  EXPECT_TRUE(b_->backend->inits().back().options.empty());
}

TEST_F(LoadOptionsTest, CallerOptionsMayDieBeforeLoadAndExecute) {
  auto map = std::make_unique<LoadBackendOptionsMap>();
  {
    BackendOptions<1> opts;
    ASSERT_TRUE(opts.set_option("compute_unit", std::string("cpu") + "_only").ok());
    ASSERT_TRUE(map->set_options("StubA", opts.view()).ok());
  }
  auto method = two_backend_program()->load_method("forward", map.get());
  map.reset();
  ASSERT_TRUE(method.ok());
  EXPECT_EQ(a_->backend->inits().back().options[0].value, (std::variant<bool, int64_t, std::string>(
                                                              std::string("cpu_only"))));
  float x[2] = {1, 2};
  ASSERT_TRUE((*method)->set_input(0, EValue(Tensor(ScalarType::Float32, {2}, x))).ok());
  ASSERT_TRUE((*method)->execute().ok());
  EXPECT_EQ((*method)->get_output(0).to_tensor().data_ptr<float>()[1], 2.0f);
}

TEST_F(LoadOptionsTest, OneMapServesSeveralLoads) {
  BackendOptions<1> opts;
  ASSERT_TRUE(opts.set_option("num_threads", 7).ok());
  LoadBackendOptionsMap map;
  ASSERT_TRUE(map.set_options("StubB", opts.view()).ok());
  auto first = two_backend_program()->load_method("forward", &map);
  auto second = two_backend_program()->load_method("forward", &map);
  ASSERT_TRUE(first.ok() && second.ok());
  auto inits = b_->backend->inits();
  ASSERT_EQ(inits.size(), 2u);
  EXPECT_EQ(inits[0].options, inits[1].options);
}

struct BadOption {
  const char* name;
  BackendOption option;
  const char* substring;
};

class BadOptionTest : public LoadOptionsTest, public ::testing::WithParamInterface<BadOption> {};

TEST_P(BadOptionTest, FailsInitWithInvalidArgumentNamingTheKey) {
  LoadBackendOptionsMap map;
  std::vector<BackendOption> opts = {GetParam().option};
  ASSERT_TRUE(map.set_options("StubA", opts).ok());
  auto method = two_backend_program()->load_method("forward", &map);
  ASSERT_FALSE(method.ok());
  EXPECT_EQ(method.error(), Error::InvalidArgument);
  const std::string& message = method.status().message();
  EXPECT_NE(message.find("'" + GetParam().option.key + "'"), std::string::npos) << message;
  EXPECT_NE(message.find("'StubA'"), std::string::npos) << message;
  EXPECT_NE(message.find(GetParam().substring), std::string::npos) << message;
  EXPECT_EQ(a_->backend->num_inits(), 0);
}

INSTANTIATE_TEST_SUITE_P(
    Options, BadOptionTest,
    ::testing::Values(
        BadOption{"UnknownKey", {"num_thread", int64_t{2}}, "did you mean 'num_threads'?"},
        BadOption{"WrongType", {"expect_frequent_reshapes", int64_t{1}}, "(expected bool)"},
        BadOption{"StringForInt", {"num_threads", std::string("4")}, "(expected int)"},
        BadOption{"OutOfRange", {"num_threads", int64_t{0}}, "(expected 1..256)"},
        BadOption{"NotAChoice", {"compute_unit", std::string("gpu")}, "expected one of"}),
    [](const auto& info) { return info.param.name; });

TEST_F(LoadOptionsTest, OptionsForAnUnregisteredBackendAreRejected) {
  LoadBackendOptionsMap map;
  std::vector<BackendOption> opts = {{"num_threads", int64_t{1}}};
  ASSERT_TRUE(map.set_options("StubC", opts).ok());
  auto method = two_backend_program()->load_method("forward", &map);
  EXPECT_EQ(method.error(), Error::InvalidArgument);
  EXPECT_NE(method.status().message().find("'StubC' is not registered"), std::string::npos);
  EXPECT_NE(method.status().message().find("did you mean"), std::string::npos);
}

TEST_F(LoadOptionsTest, FailedInitDestroysEarlierDelegatesAndNamesTheDelegate) {
  b_->backend->on_init = [](BackendInitContext&, FreeableBuffer*, Span<const CompileSpec>)
      -> Result<DelegateHandle*> {
    return Status(Error::DelegateInvalidCompatibility, "blob version 9 (expected 1)");
  };
  auto program = two_backend_program();
  auto method = program->load_method("forward");
  ASSERT_FALSE(method.ok());
  EXPECT_EQ(method.error(), Error::DelegateInvalidCompatibility);
  EXPECT_NE(method.status().message().find("method 'forward'"), std::string::npos);
  EXPECT_NE(method.status().message().find("delegate 'forward_1' (backend 'StubB')"),
            std::string::npos)
      << method.status().message();
  EXPECT_EQ(a_->backend->num_inits(), 1);
  EXPECT_EQ(a_->backend->destroy_count.load(), 1);
  // The program is still usable once the backend is fixed.
  b_->backend->on_init = nullptr;
  EXPECT_TRUE(program->load_method("forward").ok());
}

TEST_F(LoadOptionsTest, MissingOrUnavailableBackendIsNamed) {
  a_.reset();  // unregisters StubA
  auto method = two_backend_program()->load_method("forward");
  EXPECT_EQ(method.error(), Error::BackendNotFound);
  EXPECT_NE(method.status().message().find("'StubA'"), std::string::npos);
  b_->backend->available = false;
  auto only_b = test::load_or_die(
      ProgramBuilder().input("x", F32, {2}).delegate("StubB", {}, {"x"}, {"y"}).output("y"));
  EXPECT_EQ(only_b->load_method("forward").error(), Error::DelegateInvalidCompatibility);
}

TEST_F(LoadOptionsTest, NamedDataIsSharedByDelegates) {
  std::vector<std::string> seen;
  a_->backend->on_init = [&](BackendInitContext& context, FreeableBuffer*,
                             Span<const CompileSpec>) -> Result<DelegateHandle*> {
    auto data = context.named_data().get_data("package");
    if (!data.ok()) return data.status();
    seen.emplace_back(static_cast<const char*>(data->data()), data->size());
    auto missing = context.named_data().get_data("nope");
    EXPECT_EQ(missing.error(), Error::NotFound);
    return static_cast<DelegateHandle*>(nullptr);
  };
  a_->backend->on_destroy = [](DelegateHandle*) {};
  auto program = test::load_or_die(ProgramBuilder()
                                       .named_data("package", {'w', 't', 's'})
                                       .input("x", F32, {2})
                                       .delegate("StubA", {}, {"x"}, {"y"})
                                       .delegate("StubA", {}, {"y"}, {"z"})
                                       .output("z"));
  ASSERT_TRUE(program->load_method("forward").ok());
  EXPECT_EQ(seen, (std::vector<std::string>{"wts", "wts"}));
}

}  // namespace
}  // namespace kiln::runtime
