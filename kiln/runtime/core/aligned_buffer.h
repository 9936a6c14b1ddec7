#pragma once

#include <kiln/runtime/core/result.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>

namespace kiln::runtime {

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};

/// Owned, aligned, uninitialized bytes.
using AlignedBuffer = std::unique_ptr<uint8_t[], FreeDeleter>;

/// Allocates `size` bytes aligned to `alignment` (a power of two); `size` 0 gives a null
/// buffer. Errors: MemoryAllocationFailed with the size asked for.
inline Result<AlignedBuffer> allocate_aligned(size_t size, size_t alignment = 64) {
  if (size == 0) return AlignedBuffer();
  size_t rounded = (size + alignment - 1) / alignment * alignment;
  if (rounded < size) {
    return Status(Error::MemoryAllocationFailed,
                  "allocate " + std::to_string(size) + " bytes: size overflows");
  }
  void* p = std::aligned_alloc(alignment, rounded);
  if (p == nullptr) {
    return Status(Error::MemoryAllocationFailed,
                  "allocate " + std::to_string(size) + " bytes: out of memory");
  }
  return AlignedBuffer(static_cast<uint8_t*>(p));
}

}  // namespace kiln::runtime
