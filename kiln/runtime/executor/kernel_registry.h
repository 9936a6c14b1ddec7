#pragma once

#include <kiln/runtime/core/evalue.h>
#include <kiln/runtime/core/result.h>
#include <kiln/runtime/core/span.h>

#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kiln::runtime {

/// A kernel's named attributes (ONNX attributes such as `axis`), fixed at load time.
class Attributes {
 public:
  Attributes() = default;
  explicit Attributes(std::vector<std::pair<std::string, EValue>> entries)
      : entries_(std::move(entries)) {}

  /// The attribute `name`, or null when absent.
  const EValue* find(std::string_view name) const;
  bool has(std::string_view name) const { return find(name) != nullptr; }

  /// Typed reads: `fallback` when absent, InvalidType naming the attribute when the stored
  /// value has another type. An int attribute reads as double too.
  Result<int64_t> get_int(std::string_view name, int64_t fallback) const;
  Result<double> get_double(std::string_view name, double fallback) const;
  Result<std::string> get_string(std::string_view name, std::string fallback) const;
  Result<std::vector<int64_t>> get_ints(std::string_view name,
                                        std::vector<int64_t> fallback = {}) const;
  Result<std::vector<double>> get_doubles(std::string_view name,
                                          std::vector<double> fallback = {}) const;

  const std::vector<std::pair<std::string, EValue>>& entries() const { return entries_; }

 private:
  std::vector<std::pair<std::string, EValue>> entries_;
};

/// What a kernel gets from the executor besides its arguments.
class KernelContext {
 public:
  using ResizeFunction = std::function<Status(EValue&, Span<const int64_t>)>;
  KernelContext(std::string_view op, ResizeFunction resize)
      : op_(op), resize_(std::move(resize)) {}

  std::string_view op() const { return op_; }

  /// Sets an output tensor's sizes. Static tensors accept only their planned sizes, bounded
  /// ones any sizes within their capacity, unbounded ones any sizes (their storage grows).
  /// Errors: InvalidArgument naming the sizes given and the limit.
  Status resize(EValue& output, Span<const int64_t> sizes) { return resize_(output, sizes); }

 private:
  std::string_view op_;
  ResizeFunction resize_;
};

/// A kernel: reads `inputs` (never writes them; they may be read-only constants), writes
/// `outputs` after resizing them through `context`. An absent optional input is a None EValue.
/// Errors name the op, the input or attribute and what was expected.
using KernelFunction = Status (*)(KernelContext& context, Span<EValue* const> inputs,
                                  Span<EValue* const> outputs, const Attributes& attributes);

/// Registers `function` for operator `op` (an ONNX op type such as "Add"). Errors:
/// InvalidArgument when `op` is empty or already registered. Thread-safe.
Status register_kernel(std::string_view op, KernelFunction function);
/// The kernel for `op`, or null. Thread-safe.
KernelFunction get_kernel(std::string_view op);
/// Every registered op, sorted. Thread-safe.
std::vector<std::string> registered_kernels();

/// Registers a kernel from a static initializer: `static KernelRegistration kAdd("Add", add);`
struct KernelRegistration {
  KernelRegistration(std::string_view op, KernelFunction function);
};

}  // namespace kiln::runtime
