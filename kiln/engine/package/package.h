#pragma once

#include <kiln/engine/ir/graph.h>
#include <kiln/runtime/core/result.h>
#include <kiln/runtime/core/span.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace kiln::engine::package {

/// The first four bytes of a model package file.
inline constexpr char kPackageMagic[4] = {'K', 'L', 'N', 'P'};
/// The format version this build writes and the only one it reads.
inline constexpr uint32_t kPackageFormatVersion = 2;  // 2: per-weight hashes are XXH3-64
/// Size of the fixed header; the flatbuffer starts right after it.
inline constexpr size_t kPackageHeaderSize = 64;
/// Alignment of the weight segment and of every weight in it (within the file).
inline constexpr size_t kPackageWeightAlignment = 64;

/// The fixed header at offset 0 of a package, little-endian (see README.md for the layout).
struct PackageHeader {
  uint32_t format_version = 0;
  uint64_t flatbuffer_offset = 0;
  uint64_t flatbuffer_size = 0;
  uint64_t weights_offset = 0;
  uint64_t weights_size = 0;
  uint64_t content_hash = 0;
};

/// Serializes `model` into one package: header, flatbuffer (functions and weight table), then
/// every weight once, 64-byte aligned, in one segment. Deterministic: equal models give equal
/// bytes. Functions reference weights by index. Errors: InvalidArgument naming the function,
/// node or weight when the model is inconsistent (an index out of range, a weight whose byte
/// count is not its dtype size times its element count, duplicate function names, ...): the
/// same checks `read_package` applies, so whatever is written can be read back.
runtime::Result<std::vector<uint8_t>> write_package(const ir::Model& model);

/// The content hash of the package `write_package(model)` would write: XXH3-64 over its
/// flatbuffer and weight segment, so it changes when any weight byte, attribute, dim, name or
/// index changes and not otherwise. Costs one `write_package`. Errors: as `write_package`.
runtime::Result<uint64_t> package_hash(const ir::Model& model);

/// When `PackageView::open` checks each weight's bytes against its content hash.
enum class WeightCheck {
  /// Every weight while opening (an error names the first mismatch).
  OnOpen,
  /// Each weight when first asked for by `PackageView::verify_weight`: opening touches none of
  /// the weight segment, so a load that takes the packed weights from a compiled artifact never
  /// reads (nor maps in) the package's copies. Everything else is verified on open.
  OnFirstUse,
};

/// A verified package, read without copying weights: the functions and weight table are
/// decoded into `model()` (whose weights have their name, dtype, sizes and content hash but
/// empty `data`), and `weight_data(i)` points into the package bytes.
///
/// The bytes passed to `open` must outlive the view and every span it returns; ownership stays
/// with the caller (typically a mapped file). Weights are 64-byte aligned in memory when the
/// bytes are (a mapping is page aligned). Immutable after `open`; safe to share across threads.
class PackageView {
 public:
  /// Verifies `bytes` as a package: the header (magic, version, offsets, sizes, exact file
  /// length), the flatbuffer (flatbuffers verifier, then every enum, index, dim, attribute and
  /// region), every weight (dtype, byte count = element size x element count, 64-byte aligned
  /// offset inside the segment, content hash) and the package content hash over every byte
  /// after the header. Errors: InvalidProgram naming the field and its value for any violation
  /// (never a crash, whatever the bytes); InvalidArgument when `bytes.data()` is not 8-byte
  /// aligned (flatbuffers reads scalars in place).
  /// With `WeightCheck::OnFirstUse`, the weights' content hashes are checked by
  /// `verify_weight` instead (their dtype, sizes, offsets and the segment's layout still are).
  static runtime::Result<PackageView> open(runtime::Span<const uint8_t> bytes,
                                           WeightCheck check = WeightCheck::OnOpen);

  /// Functions and weight table; weights' `data` is empty (use `weight_data`).
  const ir::Model& model() const { return model_; }
  size_t num_weights() const { return weight_data_.size(); }
  /// The bytes of weight `index` (< num_weights()) inside the package bytes.
  runtime::Span<const uint8_t> weight_data(size_t index) const { return weight_data_[index]; }
  /// Checks weight `index` (< num_weights()) against its content hash, once: later calls return
  /// the first call's result (an atomic load once verified). Read a weight's bytes only after
  /// this succeeded (`open` with `WeightCheck::OnOpen` has done it for every weight). Errors:
  /// InvalidProgram naming the weight, its recorded hash and the hash of its bytes. Safe from
  /// several threads.
  runtime::Status verify_weight(size_t index) const;
  const PackageHeader& header() const { return header_; }
  uint64_t content_hash() const { return header_.content_hash; }

 private:
  PackageHeader header_;
  ir::Model model_;
  std::vector<runtime::Span<const uint8_t>> weight_data_;
  /// Per weight: 0 not checked yet, 1 verified, 2 mismatch. Shared by copies of the view.
  std::shared_ptr<std::atomic<uint8_t>[]> weight_state_;
};

/// Verifies `bytes` like `PackageView::open` and returns the model with each weight's bytes
/// copied into its `ir::Weight`. Any alignment of `bytes` is accepted. Errors: InvalidProgram
/// naming the field and value for any violation.
runtime::Result<ir::Model> read_package(runtime::Span<const uint8_t> bytes);

}  // namespace kiln::engine::package
