// Parsing `--option BACKEND.KEY=VALUE` and `--input NAME=FILE`.

#include <tools/kiln/option_args.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace kiln::tools {
namespace {

using runtime::BackendOption;
using runtime::Error;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

BackendOption opt(std::string key, std::variant<bool, int64_t, std::string> value) {
  return BackendOption{std::move(key), std::move(value)};
}

TEST(OptionArg, TypesValues) {
  struct Case {
    const char* text;
    BackendOption expected;
  };
  const Case cases[] = {
      {"KilnBackend.expect_frequent_reshapes=true", opt("expect_frequent_reshapes", true)},
      {"KilnBackend.share=false", opt("share", false)},
      {"KilnBackend.num_threads=4", opt("num_threads", int64_t{4})},
      {"KilnBackend.offset=-12", opt("offset", int64_t{-12})},
      {"KilnBackend.offset=+3", opt("offset", int64_t{3})},
      {"KilnBackend.compute_unit=cpu_only", opt("compute_unit", std::string("cpu_only"))},
      {"KilnBackend.cache_dir=", opt("cache_dir", std::string(""))},
      {"KilnBackend.cache_dir=/tmp/a=b", opt("cache_dir", std::string("/tmp/a=b"))},
      {"KilnBackend.version=1.5", opt("version", std::string("1.5"))},
      {"KilnBackend.flag=True", opt("flag", std::string("True"))},
      {"KilnBackend.big=99999999999999999999", opt("big", std::string("99999999999999999999"))},
  };
  for (const auto& c : cases) {
    auto arg = parse_option_arg(c.text);
    ASSERT_TRUE(arg.ok()) << c.text << ": " << arg.status();
    EXPECT_EQ(arg->backend_id, "KilnBackend") << c.text;
    EXPECT_EQ(arg->option, c.expected) << c.text;
  }
}

TEST(OptionArg, RejectsMalformedArguments) {
  const std::pair<const char*, const char*> cases[] = {
      {"KilnBackend.num_threads", "has no '='"},
      {"num_threads=4", "has no '.'"},
      {".num_threads=4", "backend id is empty"},
      {"KilnBackend.=4", "key is empty"},
  };
  for (const auto& [text, problem] : cases) {
    auto arg = parse_option_arg(text);
    ASSERT_FALSE(arg.ok()) << text;
    EXPECT_EQ(arg.error(), Error::InvalidArgument);
    EXPECT_THAT(arg.status().message(), HasSubstr(std::string("'") + text + "'"));
    EXPECT_THAT(arg.status().message(), HasSubstr(problem));
    EXPECT_THAT(arg.status().message(), HasSubstr("expected BACKEND.KEY=VALUE"));
  }
}

TEST(OptionArgs, GroupsByBackendInOrder) {
  auto map = parse_option_args({"B.x=1", "A.y=true", "B.z=s"});
  ASSERT_TRUE(map.ok()) << map.status();
  EXPECT_THAT(map->backend_ids(), ElementsAre("B", "A"));
  EXPECT_THAT(map->get_options("B"), ElementsAre(opt("x", int64_t{1}), opt("z", std::string("s"))));
  EXPECT_THAT(map->get_options("A"), ElementsAre(opt("y", true)));
  EXPECT_TRUE(parse_option_args({})->empty());
}

TEST(OptionArgs, RejectsAKeyGivenTwice) {
  auto map = parse_option_args({"A.x=1", "A.x=2"});
  EXPECT_EQ(map.error(), Error::InvalidArgument);
  EXPECT_THAT(map.status().message(), HasSubstr("key 'x' of backend 'A' is already set to 1"));
}

TEST(NameValue, SplitsAtTheFirstEquals) {
  auto pair = parse_name_value("x=dir/a=b.npy", "--input");
  ASSERT_TRUE(pair.ok());
  EXPECT_EQ(pair->first, "x");
  EXPECT_EQ(pair->second, "dir/a=b.npy");
  for (const char* bad : {"x.npy", "=x.npy", "x="}) {
    auto result = parse_name_value(bad, "--input");
    EXPECT_EQ(result.error(), Error::InvalidArgument) << bad;
    EXPECT_THAT(result.status().message(), HasSubstr("--input"));
  }
}

}  // namespace
}  // namespace kiln::tools
