// The load-time options API of DESIGN.md §2 compiles and works as written there. Until the
// real KilnBackend lands, a StubBackend stands under its id with the same option keys.

#include <kiln/extension/module/module.h>
#include <kiln/extension/module/test/test_files.h>
#include <kiln/runtime/backend/options.h>
#include <kiln/runtime/backend/options_map.h>
#include <kiln/testing/program_builder.h>
#include <kiln/testing/stub_backend.h>

#include <gtest/gtest.h>

namespace kiln::extension {
namespace {

using namespace kiln::runtime;  // NOLINT(google-build-using-namespace): as a user would write
using kiln::testing::F32;
using kiln::testing::ProgramBuilder;

TEST(DesignApi, SectionTwoSnippetCompilesAndRoutesOptions) {
  auto backend = kiln::testing::StubBackend::install("KilnBackend");
  backend->backend->specs = {
      {"compute_unit", OptionType::String, "", {"all", "cpu_only", "cpu_and_gpu", "prefer_cpu",
                                                "prefer_gpu"}},
      {"expect_frequent_reshapes", OptionType::Bool, ""}};
  test::TempDir dir;
  std::string path = dir.write(ProgramBuilder()
                  .method("forward")
                  .input("x", F32, {2})
                  .delegate("KilnBackend", {}, {"x"}, {"y"})
                  .output("y")
                  .method("prefill")
                  .input("x", F32, {4})
                  .delegate("KilnBackend", {}, {"x"}, {"y"})
                  .output("y"),
                  "design_api.kiln");

  // --- as written in DESIGN.md §2 ---
  BackendOptions<3> opts;                                   // capacity, for source compatibility
  (void)opts.set_option("compute_unit", "prefer_gpu");
  (void)opts.set_option("expect_frequent_reshapes", true);
  LoadBackendOptionsMap map;
  (void)map.set_options("KilnBackend", opts.view());        // or map.set_options(builder)
  Module module(path);
  ASSERT_TRUE(module.load(map).ok());                       // options for every method
  ASSERT_TRUE(module.load("forward", map).ok());            // load + load_method, one call
  ASSERT_TRUE(module.load_method("prefill", map).ok());
  // ---

  auto inits = backend->backend->inits();
  ASSERT_EQ(inits.size(), 2u);
  for (const auto& init : inits) {
    ASSERT_EQ(init.options.size(), 2u);
    EXPECT_EQ(init.options[0], (BackendOption{"compute_unit", std::string("prefer_gpu")}));
    EXPECT_EQ(init.options[1], (BackendOption{"expect_frequent_reshapes", true}));
  }
  EXPECT_EQ(inits[0].method_name, "forward");
  EXPECT_EQ(inits[1].method_name, "prefill");
}

}  // namespace
}  // namespace kiln::extension
