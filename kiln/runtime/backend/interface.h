#pragma once

#include <kiln/runtime/backend/named_data.h>
#include <kiln/runtime/backend/option_schema.h>
#include <kiln/runtime/backend/options.h>
#include <kiln/runtime/core/evalue.h>
#include <kiln/runtime/core/freeable_buffer.h>
#include <kiln/runtime/core/result.h>
#include <kiln/runtime/core/span.h>

#include <functional>
#include <string>
#include <vector>

namespace kiln::runtime {

/// An export-time setting stored with a delegate (key and raw bytes).
struct CompileSpec {
  std::string key;
  std::vector<uint8_t> value;
};

/// What a backend's `init` gets besides its blob: the method being loaded, the delegate's id,
/// this backend's load-time options (already checked against `option_specs()`) and the
/// program's named data. Valid only during `init`; copy what must be kept.
class BackendInitContext {
 public:
  BackendInitContext(std::string method_name, std::string delegate_id,
                     Span<const BackendOption> options, const NamedDataMap* named_data)
      : method_name_(std::move(method_name)),
        delegate_id_(std::move(delegate_id)),
        options_(options),
        named_data_(named_data) {}

  const std::string& method_name() const { return method_name_; }
  /// The delegate's id in the program, e.g. "forward_0".
  const std::string& delegate_id() const { return delegate_id_; }
  /// The options registered for this backend's id, in the order they were set.
  Span<const BackendOption> options() const { return options_; }
  /// Typed read of one option: absent / value / InvalidType (see `get_option`).
  template <typename T>
  Result<std::optional<T>> get_option(std::string_view key) const {
    return runtime::get_option<T>(options_, key);
  }
  /// The program's named data; never null (an empty map when the program has none).
  const NamedDataMap& named_data() const { return *named_data_; }

 private:
  std::string method_name_;
  std::string delegate_id_;
  Span<const BackendOption> options_;
  const NamedDataMap* named_data_;
};

/// What `execute` gets besides the handle: the method name for messages, and a way to resize
/// outputs whose storage the method owns.
class BackendExecutionContext {
 public:
  using ResizeFunction = std::function<Status(EValue&, Span<const int64_t>)>;
  explicit BackendExecutionContext(std::string_view method_name, ResizeFunction resize = {})
      : method_name_(method_name), resize_(std::move(resize)) {}
  std::string_view method_name() const { return method_name_; }

  /// Sets an output tensor's sizes like a kernel's resize: Static tensors accept only their
  /// planned sizes, Bounded ones any sizes within their capacity, Unbounded ones any sizes (the
  /// method grows their storage). Without a resize function (a context made outside a Method)
  /// it is `Tensor::resize`. Errors: InvalidType for a non-tensor; InvalidArgument naming the
  /// sizes and the limit.
  Status resize_output(EValue& output, Span<const int64_t> sizes) const {
    if (resize_) return resize_(output, sizes);
    if (!output.is_tensor()) return Status(Error::InvalidType, "resize output: not a tensor");
    return output.to_tensor().resize(sizes);
  }

 private:
  std::string_view method_name_;
  ResizeFunction resize_;
};

/// An opaque per-delegate object a backend returns from `init`.
using DelegateHandle = void;

/// A backend runs delegated parts of a method. Lifecycle per delegate:
/// `init` (at load) → `execute` (any number of times) → `destroy` (when the Method goes away
/// or a later delegate's init fails). A backend object is shared by every delegate of its id
/// in the process, so its methods must be thread-safe; a single handle is executed by one
/// thread at a time (the Method's rule) unless the backend documents more.
class BackendInterface {
 public:
  virtual ~BackendInterface() = default;

  /// Whether the backend can run on this machine. Delegates of an unavailable backend fail to
  /// load with DelegateInvalidCompatibility.
  virtual bool is_available() const = 0;

  /// The load-time options this backend accepts. The executor checks the caller's options
  /// against them before `init` (unknown key, wrong type, value outside choices or range →
  /// InvalidArgument). (optional) The default accepts no options at all.
  virtual std::vector<OptionSpec> option_specs() const { return {}; }

  /// Prepares a delegate from its `processed` blob (which the backend may keep by moving it;
  /// otherwise it is freed after init) and returns its handle. Errors are returned to the
  /// loader, which destroys the delegates already made.
  virtual Result<DelegateHandle*> init(BackendInitContext& context, FreeableBuffer* processed,
                                       Span<const CompileSpec> compile_specs) const = 0;

  /// Runs a delegate: reads `inputs`, writes (and may resize) the tensors in `outputs`.
  virtual Status execute(BackendExecutionContext& context, DelegateHandle* handle,
                         Span<EValue* const> inputs, Span<EValue* const> outputs) const = 0;

  /// Releases a handle from `init`. (optional) The default does nothing.
  virtual void destroy(DelegateHandle* handle) const { (void)handle; }
};

}  // namespace kiln::runtime
