#pragma once

#include <kiln/backends/kiln/kiln_backend.h>
#include <kiln/runtime/backend/options.h>
#include <kiln/runtime/core/span.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace kiln::backends {

/// The values of KilnBackend's `compute_unit` option (see `kComputeUnitKey`). The enumerator
/// names follow the option's values (and the peers' spelling of the same enum).
enum class ComputeUnit {
  ALL,          ///< "all": cpu, gpu and npu, no preference (the backend's default)
  CPU_ONLY,     ///< "cpu_only": the cpu alone
  CPU_AND_GPU,  ///< "cpu_and_gpu": cpu and gpu, no preference
  PREFER_CPU,   ///< "prefer_cpu": cpu, gpu and npu, preferring the cpu
  PREFER_GPU,   ///< "prefer_gpu": cpu, gpu and npu, preferring the gpu
};

/// The `compute_unit` option value of `unit`: "all", "cpu_only", "cpu_and_gpu", "prefer_cpu" or
/// "prefer_gpu".
std::string_view to_string(ComputeUnit unit);

/// A typed builder of KilnBackend's load-time options (DESIGN.md §2, §3), for
/// `LoadBackendOptionsMap::set_options(const Builder&)`:
///
///   LoadBackendOptionsMap map;
///   map.set_options(KilnBackendOptions().setComputeUnit(ComputeUnit::CPU_ONLY).setNumThreads(2));
///
/// Each setter records one option (see the keys in `kiln_backend.h` for what each does, its
/// trade-off, when it takes effect and its default) and returns the builder for chaining;
/// setting an option again replaces its value. Only options that were set appear in `view()`,
/// so the backend's defaults apply to the rest (an unset `cache_dir` is the environment's
/// default directory, not "no persistence"). The builder validates nothing: an out-of-range
/// value (e.g. `setNumThreads(0)`) fails the delegate's `init` with InvalidArgument naming the
/// option. The builder owns its keys and strings; the map copies them, so the builder may be a
/// temporary. Thread-safety: not synchronized (a value type).
class KilnBackendOptions {
 public:
  /// `compute_unit`: the compute unit kinds a specialization may use and the one it prefers.
  KilnBackendOptions& setComputeUnit(ComputeUnit unit);
  /// `expect_frequent_reshapes`: the inputs' shapes change between calls.
  KilnBackendOptions& setExpectFrequentReshapes(bool expect);
  /// `share_multifunction_model`: delegates loading the same package and specialization share
  /// one loaded model.
  KilnBackendOptions& setShareMultifunctionModel(bool share);
  /// `cache_dir`: where specializations persist; "" turns persistence off.
  KilnBackendOptions& setCacheDirectory(std::string dir);
  /// `num_threads`: intra-op threads (1..1024, checked at init).
  KilnBackendOptions& setNumThreads(int num_threads);
  /// `winograd`: 3x3 stride-1 Convs on Winograd kernels (faster, more rounding).
  KilnBackendOptions& setWinograd(bool winograd);

  /// "KilnBackend", the id the options are registered under.
  std::string_view backend_id() const { return kKilnBackendId; }
  /// The options set so far, in the order first set; valid until the next setter call or the
  /// builder's destruction.
  runtime::Span<const runtime::BackendOption> view() const { return options_; }

 private:
  KilnBackendOptions& set(std::string_view key, std::variant<bool, int64_t, std::string> value);

  std::vector<runtime::BackendOption> options_;
};

}  // namespace kiln::backends
