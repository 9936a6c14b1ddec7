#pragma once

// Internal to the exporter: the pieces `export_program` combines. A method is partitioned
// (partition.h); `plan_delegates` decides which partitions become KilnBackend delegates and
// puts their functions into model packages (a PackageSet); `lower_method` writes the method
// (DelegateCalls and KernelCalls over planned memory); `PackageSet::finish` stores the
// packages as named data and completes each delegate's manifest.

#include <kiln/exporter/export.h>
#include <kiln/exporter/partition.h>

#include <nlohmann/json.hpp>

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace kiln::exporter {

inline constexpr const char* kKilnBackendId = "KilnBackend";

/// A partition that runs as a KilnBackend delegate.
struct DelegatedPartition {
  size_t partition = 0;  ///< Index into the method's partitions.
  std::string id;        ///< "<method>_<i>".
  int package = -1;      ///< Index into the PackageSet.
  nlohmann::json manifest;  ///< Without "package" (known once the package is written).
  std::vector<std::pair<std::string, std::vector<uint8_t>>> compile_specs;
};

/// The model packages of a program: one shared by every delegate (`multifunction`), or one per
/// delegate. Identical packages are stored once.
class PackageSet {
 public:
  explicit PackageSet(bool multifunction) : multifunction_(multifunction) {}

  /// The package the next delegate's functions go into (`index` receives its index).
  engine::ir::Model& package_for_delegate(int& index);
  /// Records that `function` of package `package` belongs to delegate `delegate`. Errors:
  /// InvalidArgument naming both delegates when another one already has a function so named.
  runtime::Status claim(int package, const std::string& function, const std::string& delegate);
  /// Records that delegate `delegate_index` of method `method` uses `package` with `manifest`,
  /// exported with `options` (its `aot` and `expect_frequent_reshapes`).
  void add_delegate(const std::string& method, size_t delegate_index, int package,
                    nlohmann::json manifest, const ExportOptions& options);
  /// Writes each package into `spec` as named data "kiln/package/<content hash hex>" and the
  /// manifests into their delegates' processed bytes. For a package whose delegates are
  /// exported `aot`, also its compiled artifact for the default load options (compute_unit
  /// `all`, the delegates' reshape flag) as named data "kiln/aot/<package hash hex>", named by
  /// each delegate's compile spec `aot_artifact`; a package with no static function gets none
  /// (a note says so). Errors: as `engine::package::write_package` and
  /// `engine::ModelLoader::compile_artifact`.
  runtime::Status finish(ProgramSpec& spec,
                         const std::function<void(const std::string&)>& on_note = {});

 private:
  struct Pending {
    std::string method;
    size_t delegate = 0;
    int package = -1;
    nlohmann::json manifest;
    bool aot = false;
    bool expect_frequent_reshapes = false;
  };
  bool multifunction_;
  std::vector<std::unique_ptr<engine::ir::Model>> packages_;
  std::vector<std::vector<std::pair<std::string, std::string>>> claims_;  // function, delegate
  std::vector<Pending> pending_;
};

/// The constants of a program's KernelCalls: one segment, each distinct weight (by content) once
/// at a 64-byte aligned offset, instead of a segment (and a page) per weight.
class ConstantPool {
 public:
  /// Places `weight` (once per content) and sets `tensor`'s constant segment and offset.
  void place(const engine::ir::Weight& weight, TensorSpec& tensor);
  /// Appends the segment to `spec` and points the placed tensors of its methods at it.
  void finish(ProgramSpec& spec);

 private:
  static constexpr int kPending = -2;  // a placeholder segment until `finish`
  std::vector<uint8_t> bytes_;
  std::map<uint64_t, std::vector<uint64_t>> offsets_;  // content hash → offsets of candidates
};

/// Decides, for each partition of `graph` (function of `model`, exported as method `method`),
/// whether it runs on KilnBackend (options.backend "kiln", its inputs of known rank, and a
/// static one must specialize) and adds its functions to `packages`: `<method>_<i>` (or "main"
/// in a package of its own), or one static function per enumerated combination. Partitions
/// left to the reference kernels are reported through `options.on_note`. Errors: as
/// `enumerate_function`; InvalidArgument when an enumerated method has no delegated partition
/// to enumerate, or when two delegates' functions share a name.
runtime::Result<std::vector<DelegatedPartition>> plan_delegates(
    const engine::ir::Model& model, const engine::ir::Graph& graph, const std::string& method,
    const std::vector<Partition>& partitions, const ExportOptions& options,
    PackageSet& packages);

/// Lowers `graph` into method `method` of `spec`: DelegateCalls for `delegated` partitions
/// (registered with `packages`), KernelCalls for the rest (their weights in `constants`),
/// memory planned by lifetime. Errors:
/// OperatorMissing naming the operator, node and method when no kernel implements a node that
/// runs on the reference kernels; NotSupported for a value of too high a rank.
runtime::Status lower_method(const engine::ir::Model& model, const engine::ir::Graph& graph,
                             const std::string& method, const ExportOptions& options,
                             const std::vector<Partition>& partitions,
                             const std::vector<DelegatedPartition>& delegated,
                             PackageSet& packages, ConstantPool& constants, ProgramSpec& spec);

}  // namespace kiln::exporter
