#include <kiln/engine/specialization/devices.h>

#include <gtest/gtest.h>

#include <algorithm>

namespace kiln::engine::specialization {
namespace {

TEST(Devices, ThisMachineHasOneCpuDevice) {
  const std::vector<Device> devices = available_devices();
  ASSERT_EQ(devices.size(), 1u);
  EXPECT_EQ(devices[0].kind, ComputeKind::Cpu);
  EXPECT_FALSE(devices[0].name.empty());
  EXPECT_GE(devices[0].num_cores, 1);
  EXPECT_TRUE(std::is_sorted(devices[0].features.begin(), devices[0].features.end()));
}

TEST(Devices, CpuFeaturesAreStableAndNameTheArchitecture) {
  const std::string features = cpu_features();
  EXPECT_EQ(features, cpu_features());
  const size_t colon = features.find(':');
  ASSERT_NE(colon, std::string::npos) << features;
  EXPECT_GT(colon, 0u);
  // The same features as the device reports, in the same order.
  const std::vector<Device> devices = available_devices();
  std::string listed;
  for (const std::string& feature : devices[0].features) {
    if (!listed.empty()) listed += ',';
    listed += feature;
  }
  EXPECT_EQ(features.substr(colon + 1), listed);
}

TEST(Devices, ParsesX86CpuinfoKeepingOnlyCodeFeatures) {
  const char* text =
      "processor\t: 0\n"
      "model name\t: Example CPU @ 2.0GHz\n"
      "flags\t\t: fpu vme avx2 hypervisor fma avx512f sse4_2 avx2 avx512_vnni\n"
      "\n"
      "processor\t: 1\n"
      "model name\t: Other\n"
      "flags\t\t: fpu amx_tile\n";
  const CpuInfo info = parse_cpuinfo(text);
  EXPECT_EQ(info.model_name, "Example CPU @ 2.0GHz");
  EXPECT_EQ(info.features,
            (std::vector<std::string>{"avx2", "avx512_vnni", "avx512f", "fma", "sse4_2"}));
}

TEST(Devices, ParsesArmCpuinfo) {
  const char* text =
      "processor\t: 0\n"
      "BogoMIPS\t: 50.00\n"
      "Features\t: fp asimd evtstrm aes asimddp sve i8mm bf16 cpuid\n"
      "CPU part\t: 0xd40\n";
  const CpuInfo info = parse_cpuinfo(text);
  EXPECT_TRUE(info.model_name.empty());
  EXPECT_EQ(info.features,
            (std::vector<std::string>{"asimd", "asimddp", "bf16", "i8mm", "sve"}));
}

TEST(Devices, UnknownCpuinfoGivesNothing) {
  const CpuInfo info = parse_cpuinfo("garbage without colons\n\n:\n");
  EXPECT_TRUE(info.model_name.empty());
  EXPECT_TRUE(info.features.empty());
}

}  // namespace
}  // namespace kiln::engine::specialization
