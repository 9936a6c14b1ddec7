#pragma once

#include <kiln/runtime/core/result.h>

#include <optional>
#include <set>
#include <string>
#include <string_view>

namespace kiln::engine::specialization {

/// A kind of compute unit a specialization may place work on.
enum class ComputeKind { Cpu, Gpu, Npu };

/// "cpu", "gpu" or "npu".
std::string_view to_string(ComputeKind kind);

/// The `compute_unit` values `SpecializationOptions::from_compute_unit` accepts, in the order
/// messages list them: "all, cpu_only, cpu_and_gpu, prefer_cpu, prefer_gpu".
std::string_view accepted_compute_units();

/// What a specialization of a model may use and favour (DESIGN.md §3 "Specialization").
/// Every distinct value has its own `identifier()`, hence its own specialization, cache entry
/// and shared model. A kind with no device on this machine is skipped at placement; it still
/// changes the identifier. Thread-safety: a value type.
struct SpecializationOptions {
  /// The kinds placement may use. Default: every kind.
  std::set<ComputeKind> allowed_kinds = {ComputeKind::Cpu, ComputeKind::Gpu, ComputeKind::Npu};
  /// The kind placement favours when several can run an op; none: placement's own choice.
  /// When set it is one of `allowed_kinds`. Default: none.
  std::optional<ComputeKind> preferred_kind;
  /// The inputs' shapes change between calls: run every shape on the shape-generic plan
  /// rather than building and keeping a static plan per new shape. Trade-off: no stall on a
  /// new shape, but each call runs the (slower) generic plan. Default: false.
  bool expect_frequent_reshapes = false;

  /// A stable, readable text that differs for every distinct value, used in cache keys and
  /// shared-model keys; it never changes between releases for the same value. Format:
  /// `units=<kinds joined by '+' in cpu, gpu, npu order, or "none">;prefer=<kind or
  /// "none">;reshapes=<0|1>`, e.g. "units=cpu+gpu+npu;prefer=none;reshapes=0".
  std::string identifier() const;

  /// True when `kind` is in `allowed_kinds`.
  bool allows(ComputeKind kind) const { return allowed_kinds.count(kind) != 0; }

  /// Maps the KilnBackend `compute_unit` option (DESIGN.md §3) and the reshape flag:
  /// - `all`: cpu, gpu and npu, no preference;
  /// - `cpu_only`: cpu alone (no preference to state);
  /// - `cpu_and_gpu`: cpu and gpu, no preference;
  /// - `prefer_cpu`: cpu, gpu and npu, preferring cpu;
  /// - `prefer_gpu`: cpu, gpu and npu, preferring gpu.
  /// Errors: InvalidArgument naming the value and the accepted ones for anything else
  /// (values are case-sensitive).
  static runtime::Result<SpecializationOptions> from_compute_unit(std::string_view compute_unit,
                                                                  bool expect_frequent_reshapes);

  friend bool operator==(const SpecializationOptions&, const SpecializationOptions&) = default;
};

}  // namespace kiln::engine::specialization
