// Step profiling: off by default, per-step times of profiled runs, reset.
#include <kiln/engine/compile/step_profile.h>
#include <kiln/engine/compile/test/test_models.h>

namespace kiln::engine {
namespace {

using namespace test_models;  // NOLINT(google-build-using-namespace): test helpers

TEST(StepProfile, TimesEachStepOfTheProfiledRunsOnly) {
  ir::Model model = conv_residual_model();
  auto f = check_against_reference(model, {{1, 8, 10, 10}}, /*fuse=*/true);
  ASSERT_NE(f, nullptr);
  std::vector<Buffer> inputs;
  inputs.push_back(random_input(ScalarType::Float32, {1, 8, 10, 10}, 3));
  auto outputs = output_buffers(*f);

  profiling::reset();
  ASSERT_FALSE(profiling::enabled());
  ASSERT_TRUE(run(*f, inputs, outputs).ok());
  EXPECT_TRUE(profiling::step_times().empty());  // off: nothing recorded

  profiling::set_enabled(true);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(run(*f, inputs, outputs).ok());
  profiling::set_enabled(false);
  ASSERT_TRUE(run(*f, inputs, outputs).ok());

  std::vector<profiling::StepTime> times = profiling::step_times();
  ASSERT_EQ(times.size(), f->placement().size());
  for (const auto& t : times) {
    EXPECT_EQ(t.calls, 3u) << t.node;
    EXPECT_EQ(t.function, f->name());
    EXPECT_EQ(t.op, "Conv");
    EXPECT_THAT(t.device, ::testing::AnyOf("cpu:onednn", "cpu:kiln"));  // not the reference
    EXPECT_GT(t.total_ms, 0.0);
    // Each Conv: 8 x 10 x 10 outputs, each of 8 x 3 x 3 multiply-adds, over 3 runs.
    EXPECT_DOUBLE_EQ(t.total_flops, 3 * 2.0 * 800 * 72) << t.node;
  }
  EXPECT_GE(times[0].total_ms, times[1].total_ms);  // slowest first
  profiling::reset();
  EXPECT_TRUE(profiling::step_times().empty());
}

// A build's phases in order (a phase put at the front comes first), a second build of the same
// function and shapes kept apart, and the steps of the latest; reset forgets them.
TEST(StepProfile, RecordsBuildsPhaseByPhase) {
  profiling::reset();
  const std::string shapes = profiling::shapes_text({{1, 8}, {2}});
  EXPECT_EQ(shapes, "[1, 8], [2]");
  profiling::add_build_phase("f", shapes, "steps", 2.0, profiling::PhaseAt::NewBuild);
  profiling::add_build_step("f", shapes, {"conv1", "Conv", "cpu:onednn", 1.5});
  profiling::add_build_phase("f", shapes, "memory plan", 0.5);
  profiling::add_build_phase("f", shapes, "cache lookup", 0.25, profiling::PhaseAt::Front);
  profiling::add_build_phase("f", shapes, "steps", 1.0, profiling::PhaseAt::NewBuild);
  profiling::add_build_step("f", shapes, {"relu1", "Relu", "cpu:kiln", 0.5});
  profiling::add_build_phase("g", "any", "steps", 3.0);  // none of g yet: a new build

  std::vector<profiling::BuildTime> builds = profiling::builds();
  ASSERT_EQ(builds.size(), 3u);
  ASSERT_EQ(builds[0].phases.size(), 3u);
  EXPECT_EQ(builds[0].phases[0].name, "cache lookup");
  EXPECT_EQ(builds[0].phases[1].name, "steps");
  EXPECT_EQ(builds[0].phases[2].name, "memory plan");
  ASSERT_EQ(builds[0].steps.size(), 1u);
  EXPECT_EQ(builds[0].steps[0].node, "conv1");
  EXPECT_DOUBLE_EQ(builds[0].steps[0].create_ms, 1.5);
  ASSERT_EQ(builds[1].steps.size(), 1u);
  EXPECT_EQ(builds[1].steps[0].node, "relu1");
  EXPECT_EQ(builds[2].function, "g");
  EXPECT_EQ(builds[2].shapes, "any");
  profiling::reset();
  EXPECT_TRUE(profiling::builds().empty());
}

// A compiled function built while profiling records its phases and each step's creation.
TEST(StepProfile, SpecializingRecordsTheBuild) {
  ir::Model model = conv_residual_model();
  profiling::reset();
  profiling::set_enabled(true);
  auto f = check_against_reference(model, {{1, 8, 10, 10}}, /*fuse=*/true);
  profiling::set_enabled(false);
  ASSERT_NE(f, nullptr);
  std::vector<profiling::BuildTime> builds = profiling::builds();
  ASSERT_FALSE(builds.empty());
  const profiling::BuildTime& build = builds.back();
  EXPECT_EQ(build.function, f->name());
  EXPECT_EQ(build.shapes, "[1, 8, 10, 10]");
  std::vector<std::string> phases;
  for (const auto& phase : build.phases) phases.push_back(phase.name);
  EXPECT_THAT(phases, ::testing::ElementsAre("weight checks", "shapes and folding", "steps",
                                             "layouts", "memory plan"));
  ASSERT_EQ(build.steps.size(), f->placement().size());
  for (size_t i = 0; i < build.steps.size(); ++i) {
    EXPECT_EQ(build.steps[i].node, f->placement()[i].node);
    EXPECT_EQ(build.steps[i].device, f->placement()[i].device);
  }
  profiling::reset();
}

}  // namespace
}  // namespace kiln::engine
