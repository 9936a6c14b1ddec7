// parse_manifest: the "function" form parses; malformed manifests fail naming the field.
#include <kiln/backends/kiln/manifest.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

namespace kiln::backends {
namespace {

using runtime::Error;
using ::testing::HasSubstr;

runtime::Result<Manifest> parse(const std::string& text) {
  return parse_manifest(
      runtime::Span<const uint8_t>(reinterpret_cast<const uint8_t*>(text.data()), text.size()));
}

TEST(Manifest, FunctionFormParses) {
  auto m = parse(R"({"package": "kiln/package/ab", "input_names": ["x", "mask"],
                     "output_names": ["y"], "function": "main"})");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->package, "kiln/package/ab");
  EXPECT_EQ(m->input_names, (std::vector<std::string>{"x", "mask"}));
  EXPECT_EQ(m->output_names, (std::vector<std::string>{"y"}));
  EXPECT_EQ(m->function, "main");
}

struct BadCase {
  const char* name;
  const char* text;
  Error code;
  const char* substring;
};

class MalformedManifest : public ::testing::TestWithParam<BadCase> {};

TEST_P(MalformedManifest, IsRejectedNamingTheField) {
  auto m = parse(GetParam().text);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), GetParam().code) << m.status();
  EXPECT_THAT(m.status().message(), HasSubstr(GetParam().substring));
}

INSTANTIATE_TEST_SUITE_P(
    Cases, MalformedManifest,
    ::testing::Values(
        BadCase{"NotJson", "{package: main", Error::InvalidArgument, "are not JSON"},
        BadCase{"NotAnObject", "[1, 2]", Error::InvalidArgument, "expected a JSON object"},
        BadCase{"MissingPackage",
                R"({"input_names": ["x"], "output_names": ["y"], "function": "main"})",
                Error::InvalidArgument, "field 'package' is missing"},
        BadCase{"UnknownField",
                R"({"package": "p", "input_names": ["x"], "output_names": ["y"],
                    "function": "main", "functon": "main"})",
                Error::InvalidArgument, "field 'functon' is unknown"},
        BadCase{"FunctionAndEnumerated",
                R"({"package": "p", "input_names": ["x"], "output_names": ["y"],
                    "function": "main", "enumerated": true})",
                Error::InvalidArgument, "field 'enumerated' is given with 'function'"},
        BadCase{"Neither", R"({"package": "p", "input_names": ["x"], "output_names": ["y"]})",
                Error::InvalidArgument, "field 'function' is missing"},
        BadCase{"EnumeratedNotYet",
                R"({"package": "p", "input_names": ["x"], "output_names": ["y"],
                    "enumerated": true, "enumerated_functions": []})",
                Error::NotSupported, "field 'enumerated' is not supported"},
        BadCase{"PackageNotString",
                R"({"package": 7, "input_names": ["x"], "output_names": ["y"],
                    "function": "main"})",
                Error::InvalidArgument, "field 'package' is a number (expected a string)"},
        BadCase{"InputNamesNotArray",
                R"({"package": "p", "input_names": "x", "output_names": ["y"],
                    "function": "main"})",
                Error::InvalidArgument, "field 'input_names' is a string (expected an array"},
        BadCase{"OutputNameNotString",
                R"({"package": "p", "input_names": ["x"], "output_names": [1],
                    "function": "main"})",
                Error::InvalidArgument, "field 'output_names' item 0 is a number"},
        BadCase{"FunctionNotString",
                R"({"package": "p", "input_names": ["x"], "output_names": ["y"],
                    "function": ["main"]})",
                Error::InvalidArgument, "field 'function' is a array"},
        BadCase{"DuplicateInput",
                R"({"package": "p", "input_names": ["x", "x"], "output_names": ["y"],
                    "function": "main"})",
                Error::InvalidArgument, "field 'input_names' item 1 repeats the name 'x'"},
        BadCase{"EmptyFunction",
                R"({"package": "p", "input_names": ["x"], "output_names": ["y"],
                    "function": ""})",
                Error::InvalidArgument, "field 'function' is empty"}),
    [](const ::testing::TestParamInfo<BadCase>& info) { return std::string(info.param.name); });

TEST(Manifest, EmptyBytesAreNotJson) {
  auto m = parse("");
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m.status().message(), HasSubstr("not JSON"));
}

}  // namespace
}  // namespace kiln::backends
