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

}  // namespace
}  // namespace kiln::engine
