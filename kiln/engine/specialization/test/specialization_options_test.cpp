#include <kiln/engine/specialization/specialization_options.h>

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>

namespace kiln::engine::specialization {
namespace {

using runtime::Error;

// The identifiers are part of every cache key: changing one silently invalidates caches, so
// they are pinned here.
TEST(SpecializationOptions, IdentifiersAreStable) {
  const std::map<std::pair<std::string, bool>, std::string> golden = {
      {{"all", false}, "units=cpu+gpu+npu;prefer=none;reshapes=0"},
      {{"all", true}, "units=cpu+gpu+npu;prefer=none;reshapes=1"},
      {{"cpu_only", false}, "units=cpu;prefer=none;reshapes=0"},
      {{"cpu_only", true}, "units=cpu;prefer=none;reshapes=1"},
      {{"cpu_and_gpu", false}, "units=cpu+gpu;prefer=none;reshapes=0"},
      {{"cpu_and_gpu", true}, "units=cpu+gpu;prefer=none;reshapes=1"},
      {{"prefer_cpu", false}, "units=cpu+gpu+npu;prefer=cpu;reshapes=0"},
      {{"prefer_cpu", true}, "units=cpu+gpu+npu;prefer=cpu;reshapes=1"},
      {{"prefer_gpu", false}, "units=cpu+gpu+npu;prefer=gpu;reshapes=0"},
      {{"prefer_gpu", true}, "units=cpu+gpu+npu;prefer=gpu;reshapes=1"},
  };
  for (const auto& [setting, expected] : golden) {
    auto options = SpecializationOptions::from_compute_unit(setting.first, setting.second);
    ASSERT_TRUE(options.ok()) << options.status();
    EXPECT_EQ(options->identifier(), expected) << setting.first << " " << setting.second;
    EXPECT_EQ(options->expect_frequent_reshapes, setting.second);
  }
}

TEST(SpecializationOptions, TenSettingsGiveTenDistinctIdentifiers) {
  std::set<std::string> identifiers;
  for (const char* unit : {"all", "cpu_only", "cpu_and_gpu", "prefer_cpu", "prefer_gpu"}) {
    for (bool reshapes : {false, true}) {
      auto options = SpecializationOptions::from_compute_unit(unit, reshapes);
      ASSERT_TRUE(options.ok()) << options.status();
      identifiers.insert(options->identifier());
    }
  }
  EXPECT_EQ(identifiers.size(), 10u);
}

TEST(SpecializationOptions, MappingMatchesTheOptionTable) {
  auto cpu_only = SpecializationOptions::from_compute_unit("cpu_only", false);
  ASSERT_TRUE(cpu_only.ok());
  EXPECT_TRUE(cpu_only->allows(ComputeKind::Cpu));
  EXPECT_FALSE(cpu_only->allows(ComputeKind::Gpu));
  EXPECT_FALSE(cpu_only->allows(ComputeKind::Npu));
  EXPECT_FALSE(cpu_only->preferred_kind.has_value());

  auto cpu_and_gpu = SpecializationOptions::from_compute_unit("cpu_and_gpu", false);
  ASSERT_TRUE(cpu_and_gpu.ok());
  EXPECT_TRUE(cpu_and_gpu->allows(ComputeKind::Gpu));
  EXPECT_FALSE(cpu_and_gpu->allows(ComputeKind::Npu));

  auto prefer_gpu = SpecializationOptions::from_compute_unit("prefer_gpu", true);
  ASSERT_TRUE(prefer_gpu.ok());
  EXPECT_EQ(prefer_gpu->allowed_kinds.size(), 3u);
  EXPECT_EQ(prefer_gpu->preferred_kind, ComputeKind::Gpu);

  auto all = SpecializationOptions::from_compute_unit("all", false);
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(*all, SpecializationOptions{});  // `all` is the default
}

TEST(SpecializationOptions, IdentifierDoesNotDependOnHowTheSetWasBuilt) {
  SpecializationOptions a;
  a.allowed_kinds = {ComputeKind::Npu, ComputeKind::Cpu};
  SpecializationOptions b;
  b.allowed_kinds.clear();
  b.allowed_kinds.insert(ComputeKind::Cpu);
  b.allowed_kinds.insert(ComputeKind::Npu);
  EXPECT_EQ(a.identifier(), "units=cpu+npu;prefer=none;reshapes=0");
  EXPECT_EQ(a.identifier(), b.identifier());
  SpecializationOptions none;
  none.allowed_kinds.clear();
  EXPECT_EQ(none.identifier(), "units=none;prefer=none;reshapes=0");
}

TEST(SpecializationOptions, RejectsUnknownComputeUnits) {
  for (const char* bad : {"", "gpu", "ALL", "cpu-only", "prefer_npu", "all "}) {
    auto options = SpecializationOptions::from_compute_unit(bad, false);
    ASSERT_FALSE(options.ok()) << "'" << bad << "'";
    EXPECT_EQ(options.error(), Error::InvalidArgument);
    const std::string& message = options.status().message();
    EXPECT_NE(message.find("'compute_unit'"), std::string::npos) << message;
    EXPECT_NE(message.find("'" + std::string(bad) + "'"), std::string::npos) << message;
    EXPECT_NE(message.find("all, cpu_only, cpu_and_gpu, prefer_cpu, prefer_gpu"),
              std::string::npos)
        << message;
  }
}

TEST(ComputeKind, Names) {
  EXPECT_EQ(to_string(ComputeKind::Cpu), "cpu");
  EXPECT_EQ(to_string(ComputeKind::Gpu), "gpu");
  EXPECT_EQ(to_string(ComputeKind::Npu), "npu");
}

}  // namespace
}  // namespace kiln::engine::specialization
