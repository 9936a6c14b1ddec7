#include <kiln/engine/specialization/specialization_options.h>

#include <array>
#include <utility>

namespace kiln::engine::specialization {
namespace {

using runtime::Error;

constexpr std::array<ComputeKind, 3> kEveryKind = {ComputeKind::Cpu, ComputeKind::Gpu,
                                                   ComputeKind::Npu};

}  // namespace

std::string_view to_string(ComputeKind kind) {
  switch (kind) {
    case ComputeKind::Cpu:
      return "cpu";
    case ComputeKind::Gpu:
      return "gpu";
    case ComputeKind::Npu:
      return "npu";
  }
  return "unknown";
}

std::string_view accepted_compute_units() {
  return "all, cpu_only, cpu_and_gpu, prefer_cpu, prefer_gpu";
}

std::string SpecializationOptions::identifier() const {
  // Iterate in the fixed enum order (not the set's) so the text never depends on how the
  // set was built; the fields are always all present so no value is a prefix of another.
  std::string units;
  for (ComputeKind kind : kEveryKind) {
    if (!allows(kind)) continue;
    if (!units.empty()) units += '+';
    units += to_string(kind);
  }
  if (units.empty()) units = "none";
  std::string id = "units=" + units;
  id += ";prefer=";
  id += preferred_kind ? to_string(*preferred_kind) : std::string_view("none");
  id += ";reshapes=";
  id += expect_frequent_reshapes ? '1' : '0';
  return id;
}

runtime::Result<SpecializationOptions> SpecializationOptions::from_compute_unit(
    std::string_view compute_unit, bool expect_frequent_reshapes) {
  SpecializationOptions options;
  options.expect_frequent_reshapes = expect_frequent_reshapes;
  if (compute_unit == "all") {
    return options;
  }
  if (compute_unit == "cpu_only") {
    options.allowed_kinds = {ComputeKind::Cpu};
    return options;
  }
  if (compute_unit == "cpu_and_gpu") {
    options.allowed_kinds = {ComputeKind::Cpu, ComputeKind::Gpu};
    return options;
  }
  if (compute_unit == "prefer_cpu") {
    options.preferred_kind = ComputeKind::Cpu;
    return options;
  }
  if (compute_unit == "prefer_gpu") {
    options.preferred_kind = ComputeKind::Gpu;
    return options;
  }
  return runtime::Status(Error::InvalidArgument,
                         "specialize: option 'compute_unit' has value '" +
                             std::string(compute_unit) + "' (expected one of " +
                             std::string(accepted_compute_units()) + ")");
}

}  // namespace kiln::engine::specialization
