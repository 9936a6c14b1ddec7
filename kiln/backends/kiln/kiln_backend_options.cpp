#include <kiln/backends/kiln/kiln_backend_options.h>

#include <utility>

namespace kiln::backends {

std::string_view to_string(ComputeUnit unit) {
  switch (unit) {
    case ComputeUnit::ALL:
      return "all";
    case ComputeUnit::CPU_ONLY:
      return "cpu_only";
    case ComputeUnit::CPU_AND_GPU:
      return "cpu_and_gpu";
    case ComputeUnit::PREFER_CPU:
      return "prefer_cpu";
    case ComputeUnit::PREFER_GPU:
      return "prefer_gpu";
  }
  // Only reachable through a cast of an out-of-range integer; init rejects the value by name.
  return "invalid";
}

KilnBackendOptions& KilnBackendOptions::setComputeUnit(ComputeUnit unit) {
  return set(kComputeUnitKey, std::string(to_string(unit)));
}

KilnBackendOptions& KilnBackendOptions::setExpectFrequentReshapes(bool expect) {
  return set(kExpectFrequentReshapesKey, expect);
}

KilnBackendOptions& KilnBackendOptions::setShareMultifunctionModel(bool share) {
  return set(kShareMultifunctionModelKey, share);
}

KilnBackendOptions& KilnBackendOptions::setCacheDirectory(std::string dir) {
  return set(kCacheDirKey, std::move(dir));
}

KilnBackendOptions& KilnBackendOptions::setNumThreads(int num_threads) {
  return set(kNumThreadsKey, static_cast<int64_t>(num_threads));
}

KilnBackendOptions& KilnBackendOptions::setWinograd(bool winograd) {
  return set(kWinogradKey, winograd);
}

KilnBackendOptions& KilnBackendOptions::set(std::string_view key,
                                            std::variant<bool, int64_t, std::string> value) {
  for (auto& option : options_) {
    if (option.key == key) {
      option.value = std::move(value);
      return *this;
    }
  }
  options_.push_back(runtime::BackendOption{std::string(key), std::move(value)});
  return *this;
}

}  // namespace kiln::backends
