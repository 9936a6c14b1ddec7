#pragma once

#include <kiln/engine/specialization/specialization_options.h>

#include <string>
#include <string_view>
#include <vector>

namespace kiln::engine::specialization {

/// A compute unit found on this machine.
struct Device {
  /// What the system calls it, e.g. the CPU's model name; "cpu" when unknown.
  std::string name;
  ComputeKind kind = ComputeKind::Cpu;
  /// Cores this process may run on (its CPU affinity), at least 1.
  int num_cores = 1;
  /// The instruction-set features that change compiled code, sorted, e.g. {"avx2", "fma"}.
  std::vector<std::string> features;
};

/// The devices of this machine. Today: exactly one CPU device (GPU and NPU devices are not
/// probed yet, so placement skips those kinds). Reads /proc/cpuinfo where present; elsewhere
/// the CPU device has no name and no features. Thread-safe; cheap enough to call per load.
std::vector<Device> available_devices();

/// The CPU's architecture and code-relevant features as one stable string for cache keys,
/// e.g. "x86_64:avx,avx2,avx512f,fma". Only the features in a fixed list that matters to
/// code generation count (see devices.cpp), so unrelated flags (a new microcode bug flag,
/// "hypervisor") do not invalidate caches. Thread-safe.
std::string cpu_features();

/// What `available_devices()` reads from /proc/cpuinfo, split out for tests.
struct CpuInfo {
  std::string model_name;
  std::vector<std::string> features;  ///< Sorted, deduplicated, only code-relevant ones.
};

/// Parses the text of /proc/cpuinfo (x86 "flags" or Arm "Features" lines; the first
/// processor's block is enough). Unknown layouts give an empty CpuInfo.
CpuInfo parse_cpuinfo(std::string_view text);

}  // namespace kiln::engine::specialization
