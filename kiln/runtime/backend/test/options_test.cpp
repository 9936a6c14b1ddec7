#include <kiln/runtime/backend/option_schema.h>
#include <kiln/runtime/backend/options.h>
#include <kiln/runtime/backend/options_map.h>

#include <gtest/gtest.h>

#include <memory>

namespace kiln::runtime {
namespace {

TEST(BackendOptions, StoresEachTypeAndReplacesByKey) {
  BackendOptions<4> opts;
  ASSERT_TRUE(opts.set_option("flag", true).ok());
  ASSERT_TRUE(opts.set_option("threads", 4).ok());
  ASSERT_TRUE(opts.set_option("unit", "prefer_gpu").ok());
  ASSERT_TRUE(opts.set_option("flag", false).ok());
  ASSERT_EQ(opts.size(), 3u);
  EXPECT_EQ(*get_option<bool>(opts.view(), "flag"), false);
  EXPECT_EQ(*get_option<int64_t>(opts.view(), "threads"), 4);
  EXPECT_EQ(*get_option<std::string>(opts.view(), "unit"), "prefer_gpu");
}

TEST(BackendOptions, StringLiteralIsAStringNotABool) {
  BackendOptions<1> opts;
  ASSERT_TRUE(opts.set_option("unit", "all").ok());
  EXPECT_TRUE(std::holds_alternative<std::string>(opts.view()[0].value));
}

TEST(BackendOptions, CapacityIsEnforcedWithAMessage) {
  BackendOptions<1> opts;
  ASSERT_TRUE(opts.set_option("a", true).ok());
  Status s = opts.set_option("b", true);
  EXPECT_EQ(s.code(), Error::InvalidArgument);
  EXPECT_NE(s.message().find("'b'"), std::string::npos);
  EXPECT_EQ(opts.set_option("", true).code(), Error::InvalidArgument);
}

TEST(BackendOptions, RuntimeKeysAndValuesAreCopied) {
  BackendOptions<2> opts;
  {
    std::string key = std::string("cache_") + "dir";
    std::string value = "/tmp/" + std::to_string(42);
    ASSERT_TRUE(opts.set_option(key, value).ok());
    key.assign(key.size(), 'x');
    value.assign(value.size(), 'y');
  }
  EXPECT_EQ(opts.view()[0].key, "cache_dir");
  EXPECT_EQ(*get_option<std::string>(opts.view(), "cache_dir"), "/tmp/42");
}

TEST(GetOption, AbsentValueOrWrongType) {
  BackendOptions<2> opts;
  ASSERT_TRUE(opts.set_option("expect_frequent_reshapes", 1).ok());
  auto absent = get_option<bool>(opts.view(), "num_threads");
  ASSERT_TRUE(absent.ok());
  EXPECT_FALSE(absent->has_value());
  auto wrong = get_option<bool>(opts.view(), "expect_frequent_reshapes");
  EXPECT_EQ(wrong.error(), Error::InvalidType);
  EXPECT_NE(wrong.status().message().find("'expect_frequent_reshapes'"), std::string::npos);
  EXPECT_NE(wrong.status().message().find("expected bool"), std::string::npos);
}

TEST(LoadBackendOptionsMap, CopiesWhatItIsGiven) {
  LoadBackendOptionsMap map;
  {
    auto opts = std::make_unique<BackendOptions<2>>();
    ASSERT_TRUE(opts->set_option("unit", std::string("cpu_only")).ok());
    std::string id = "Kiln" + std::string("Backend");
    ASSERT_TRUE(map.set_options(id, opts->view()).ok());
  }  // the options and the id are gone
  auto got = get_option<std::string>(map.get_options("KilnBackend"), "unit");
  EXPECT_EQ(**got, "cpu_only");
}

struct FakeBuilder {
  std::string_view backend_id() const { return "FakeBackend"; }
  Span<const BackendOption> view() const { return options.view(); }
  BackendOptions<2> options;
};

TEST(LoadBackendOptionsMap, AcceptsTypedBuildersAndReplacesPerId) {
  FakeBuilder builder;
  ASSERT_TRUE(builder.options.set_option("a", true).ok());
  LoadBackendOptionsMap map;
  ASSERT_TRUE(map.set_options(builder).ok());
  EXPECT_TRUE(map.has_options("FakeBackend"));
  BackendOptions<1> other;
  ASSERT_TRUE(other.set_option("b", 2).ok());
  ASSERT_TRUE(map.set_options("FakeBackend", other.view()).ok());
  ASSERT_EQ(map.size(), 1u);
  ASSERT_EQ(map.get_options("FakeBackend").size(), 1u);
  EXPECT_EQ(map.get_options("FakeBackend")[0].key, "b");
  EXPECT_TRUE(map.get_options("Other").empty());
  EXPECT_TRUE(map.erase("FakeBackend"));
  EXPECT_TRUE(map.empty());
}

TEST(LoadBackendOptionsMap, RejectsEmptyIdAndDuplicateKeys) {
  LoadBackendOptionsMap map;
  BackendOptions<1> opts;
  EXPECT_EQ(map.set_options("", opts.view()).code(), Error::InvalidArgument);
  std::vector<BackendOption> twice = {{"k", true}, {"k", false}};
  Status s = map.set_options("B", twice);
  EXPECT_EQ(s.code(), Error::InvalidArgument);
  EXPECT_NE(s.message().find("'k'"), std::string::npos);
}

std::vector<OptionSpec> specs() {
  return {
      {"compute_unit", OptionType::String, "", {"all", "cpu_only", "prefer_gpu"}},
      {"num_threads", OptionType::Int, "", {}, 1, 256},
      {"expect_frequent_reshapes", OptionType::Bool, ""},
  };
}

TEST(ValidateOptions, AcceptsDeclaredOptions) {
  std::vector<BackendOption> opts = {
      {"compute_unit", std::string("prefer_gpu")}, {"num_threads", int64_t{2}},
      {"expect_frequent_reshapes", true}};
  EXPECT_TRUE(validate_options("KilnBackend", specs(), opts).ok());
}

TEST(ValidateOptions, UnknownKeyNamesBackendKeyAndSuggestsNearMiss) {
  std::vector<BackendOption> opts = {{"expect_frequent_reshape", true}};
  Status s = validate_options("KilnBackend", specs(), opts);
  EXPECT_EQ(s.code(), Error::InvalidArgument);
  EXPECT_NE(s.message().find("'KilnBackend'"), std::string::npos);
  EXPECT_NE(s.message().find("'expect_frequent_reshape'"), std::string::npos);
  EXPECT_NE(s.message().find("did you mean 'expect_frequent_reshapes'?"), std::string::npos);
  std::vector<BackendOption> far = {{"zzz", true}};
  EXPECT_EQ(validate_options("KilnBackend", specs(), far).message().find("did you mean"),
            std::string::npos);
}

TEST(ValidateOptions, WrongTypeSaysGivenAndExpected) {
  std::vector<BackendOption> opts = {{"expect_frequent_reshapes", int64_t{1}}};
  Status s = validate_options("KilnBackend", specs(), opts);
  EXPECT_EQ(s.code(), Error::InvalidArgument);
  EXPECT_NE(s.message().find("option 'expect_frequent_reshapes' has int value 1 (expected bool)"),
            std::string::npos)
      << s.message();
}

TEST(ValidateOptions, InvalidValuesListWhatIsAccepted) {
  std::vector<BackendOption> unit = {{"compute_unit", std::string("prefer_gpux")}};
  Status s = validate_options("KilnBackend", specs(), unit);
  EXPECT_EQ(s.code(), Error::InvalidArgument);
  EXPECT_NE(s.message().find("'all', 'cpu_only', 'prefer_gpu'"), std::string::npos);
  EXPECT_NE(s.message().find("did you mean 'prefer_gpu'?"), std::string::npos);
  std::vector<BackendOption> threads = {{"num_threads", int64_t{-2}}};
  s = validate_options("KilnBackend", specs(), threads);
  EXPECT_NE(s.message().find("option 'num_threads' has value -2 (expected 1..256)"),
            std::string::npos)
      << s.message();
}

TEST(ValidateOptions, BackendWithoutSpecsAcceptsNothing) {
  std::vector<BackendOption> opts = {{"anything", true}};
  Status s = validate_options("Plain", {}, opts);
  EXPECT_NE(s.message().find("expected no options"), std::string::npos);
}

}  // namespace
}  // namespace kiln::runtime
