#pragma once

#include <kiln/runtime/core/freeable_buffer.h>
#include <kiln/runtime/core/result.h>

#include <string>
#include <string_view>
#include <vector>

namespace kiln::runtime {

/// Read access to a program's named data: blobs stored once (e.g. a model package) and found by
/// key, so several delegates can use one copy. Thread-safety: `get_data` may be called
/// concurrently.
class NamedDataMap {
 public:
  virtual ~NamedDataMap() = default;
  /// The bytes stored under `key`. The buffer keeps them alive on its own (with the mmap load
  /// mode it is a zero-copy view). Errors: NotFound naming the key and the keys present;
  /// AccessFailed when reading fails.
  virtual Result<FreeableBuffer> get_data(std::string_view key) const = 0;
  /// All keys, in program order.
  virtual std::vector<std::string> keys() const = 0;
};

}  // namespace kiln::runtime
