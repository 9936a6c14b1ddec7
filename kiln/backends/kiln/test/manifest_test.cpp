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

TEST(Manifest, EnumeratedFormParses) {
  auto m = parse(R"({"package": "p", "input_names": ["ids", "mask"], "output_names": ["logits"],
                     "enumerated": true, "enumerated_functions": [
                       {"function": "prefill_seq_64", "input_shapes": [[1, 64], [1, 64]]},
                       {"input_shapes": [[1, 128], [1, 128]], "function": "prefill_seq_128"},
                       {"function": "decode", "input_shapes": [[1, 1], [1, 129]]}]})");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_TRUE(m->enumerated);
  EXPECT_EQ(m->function, "");
  ASSERT_EQ(m->enumerated_functions.size(), 3u);
  EXPECT_EQ(m->enumerated_functions[0].function, "prefill_seq_64");
  EXPECT_EQ(m->enumerated_functions[0].input_shapes, (Shapes{{1, 64}, {1, 64}}));
  EXPECT_EQ(m->enumerated_functions[1].function, "prefill_seq_128");
  EXPECT_EQ(m->enumerated_functions[1].input_shapes, (Shapes{{1, 128}, {1, 128}}));
  EXPECT_EQ(m->enumerated_functions[2].function, "decode");
  EXPECT_EQ(m->enumerated_functions[2].input_shapes, (Shapes{{1, 1}, {1, 129}}));
}

TEST(Manifest, EnumeratedScalarInputAndLargestDimParse) {
  auto m = parse(R"({"package": "p", "input_names": ["n"], "output_names": ["y"],
                     "enumerated": true, "enumerated_functions": [
                       {"function": "scalar", "input_shapes": [[]]},
                       {"function": "big", "input_shapes": [[2147483647]]}]})");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->enumerated_functions[0].input_shapes, (Shapes{{}}));
  EXPECT_EQ(m->enumerated_functions[1].input_shapes, (Shapes{{kMaxManifestDim}}));
}

// Enumerated manifests with one defect each; `body` follows `"output_names": ["y"], ` of a
// manifest whose inputs are x and m.
struct BadEnumerated {
  const char* name;
  const char* body;
  const char* substring;
};

class MalformedEnumeratedManifest : public ::testing::TestWithParam<BadEnumerated> {};

TEST_P(MalformedEnumeratedManifest, IsRejectedNamingTheField) {
  auto m =
      parse(std::string(R"({"package": "p", "input_names": ["x", "m"], "output_names": ["y"], )") +
            GetParam().body + "}");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), Error::InvalidArgument) << m.status();
  EXPECT_THAT(m.status().message(), HasSubstr(GetParam().substring));
}

#define KILN_ENTRY(name, shapes) R"({"function": ")" name R"(", "input_shapes": )" shapes "}"
#define KILN_LIST(...) R"("enumerated": true, "enumerated_functions": [)" __VA_ARGS__ "]"

INSTANTIATE_TEST_SUITE_P(
    Cases, MalformedEnumeratedManifest,
    ::testing::Values(
        BadEnumerated{"FunctionAndList", R"("function": "main", "enumerated_functions": [])",
                      "field 'enumerated_functions' is given with 'function'"},
        BadEnumerated{"FlagWithoutList", R"("enumerated": true)",
                      "field 'enumerated_functions' is missing"},
        BadEnumerated{"FlagMissing",
                      R"("enumerated_functions": [)" KILN_ENTRY("a", "[[1], [1]]") "]",
                      "field 'enumerated' is missing (expected true"},
        BadEnumerated{
            "FlagFalse",
            R"("enumerated": false, "enumerated_functions": [)" KILN_ENTRY("a", "[[1], [1]]") "]",
            "field 'enumerated' is false (expected true)"},
        BadEnumerated{
            "FlagNotBool",
            R"("enumerated": "yes", "enumerated_functions": [)" KILN_ENTRY("a", "[[1], [1]]") "]",
            "field 'enumerated' is \"yes\" (expected true)"},
        BadEnumerated{"ListNotArray", R"("enumerated": true, "enumerated_functions": {})",
                      "field 'enumerated_functions' is a object (expected an array"},
        BadEnumerated{"EmptyList", KILN_LIST(""),
                      "field 'enumerated_functions' is empty (expected at least one"},
        BadEnumerated{"EntryNotObject", KILN_LIST(R"("a")"),
                      "field 'enumerated_functions[0]' is a string (expected an object"},
        BadEnumerated{"EntryUnknownField",
                      KILN_LIST(R"({"function": "a", "input_shapes": [[1], [1]], "shape": 1})"),
                      "field 'enumerated_functions[0].shape' is unknown"},
        BadEnumerated{"EntryFunctionMissing", KILN_LIST(R"({"input_shapes": [[1], [1]]})"),
                      "field 'enumerated_functions[0].function' is missing"},
        BadEnumerated{"EntryFunctionNotString",
                      KILN_LIST(R"({"function": 3, "input_shapes": [[1], [1]]})"),
                      "field 'enumerated_functions[0].function' is a number"},
        BadEnumerated{"EntryFunctionEmpty", KILN_LIST(KILN_ENTRY("", "[[1], [1]]")),
                      "field 'enumerated_functions[0].function' is empty"},
        BadEnumerated{"DuplicateFunction",
                      KILN_LIST(KILN_ENTRY("a", "[[1], [1]]") ", " KILN_ENTRY(
                          "b", "[[2], [2]]") ", " KILN_ENTRY("a", "[[3], [3]]")),
                      "field 'enumerated_functions[2].function' repeats 'a' of item 0"},
        BadEnumerated{"ShapesMissing", KILN_LIST(R"({"function": "a"})"),
                      "field 'enumerated_functions[0].input_shapes' is missing"},
        BadEnumerated{"ShapesNotArray", KILN_LIST(KILN_ENTRY("a", R"("[1]")")),
                      "field 'enumerated_functions[0].input_shapes' is a string"},
        BadEnumerated{"TooFewShapes", KILN_LIST(KILN_ENTRY("a", "[[1]]")),
                      "field 'enumerated_functions[0].input_shapes' has 1 shapes (expected an "
                      "array of 2 shapes"},
        BadEnumerated{
            "TooManyShapes",
            KILN_LIST(KILN_ENTRY("a", "[[1], [1]]") ", " KILN_ENTRY("b", "[[1], [1], [1]]")),
            "field 'enumerated_functions[1].input_shapes' has 3 shapes"},
        BadEnumerated{"ShapeNotArray", KILN_LIST(KILN_ENTRY("a", "[[1], 4]")),
                      "field 'enumerated_functions[0].input_shapes[1]' is a number (expected an "
                      "array of dims)"},
        BadEnumerated{"ZeroDim", KILN_LIST(KILN_ENTRY("a", "[[1, 0], [1]]")),
                      "field 'enumerated_functions[0].input_shapes[0][1]' is 0 (expected an "
                      "integer in 1..2147483647)"},
        BadEnumerated{"NegativeDim", KILN_LIST(KILN_ENTRY("a", "[[1], [-4]]")),
                      "field 'enumerated_functions[0].input_shapes[1][0]' is -4"},
        BadEnumerated{"FractionalDim", KILN_LIST(KILN_ENTRY("a", "[[1.5], [1]]")),
                      "field 'enumerated_functions[0].input_shapes[0][0]' is 1.5, not an integer"},
        BadEnumerated{"FloatWholeDim", KILN_LIST(KILN_ENTRY("a", "[[64.0], [1]]")),
                      "input_shapes[0][0]' is 64.0, not an integer"},
        BadEnumerated{"StringDim", KILN_LIST(KILN_ENTRY("a", R"([["64"], [1]])")),
                      "input_shapes[0][0]' is a string (expected an integer"},
        BadEnumerated{"NullDim", KILN_LIST(KILN_ENTRY("a", "[[null], [1]]")),
                      "input_shapes[0][0]' is a null"},
        BadEnumerated{"TooLargeDim", KILN_LIST(KILN_ENTRY("a", "[[2147483648], [1]]")),
                      "input_shapes[0][0]' is 2147483648, too large"},
        BadEnumerated{"HugeDim", KILN_LIST(KILN_ENTRY("a", "[[1], [18446744073709551615]]")),
                      "input_shapes[1][0]' is 18446744073709551615, too large"},
        BadEnumerated{"EqualShapes",
                      KILN_LIST(KILN_ENTRY("a", "[[1, 64], [1]]") ", " KILN_ENTRY(
                          "b", "[[1, 32], [1]]") ", " KILN_ENTRY("c", "[[1, 64], [1]]")),
                      "field 'enumerated_functions[2].input_shapes' is [[1, 64], [1]], equal to "
                      "that of item 0"}),
    [](const ::testing::TestParamInfo<BadEnumerated>& info) {
      return std::string(info.param.name);
    });

#undef KILN_LIST
#undef KILN_ENTRY

TEST(Manifest, EmptyBytesAreNotJson) {
  auto m = parse("");
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m.status().message(), HasSubstr("not JSON"));
}

}  // namespace
}  // namespace kiln::backends
