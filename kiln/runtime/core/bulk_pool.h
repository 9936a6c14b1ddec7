#pragma once

#include <kiln/runtime/core/aligned_buffer.h>
#include <kiln/runtime/core/result.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace kiln::runtime {

/// Many bulk allocations (packed weights, kernel buffers) carved from a few large chunks of
/// `allocate_bulk` memory, so that they share huge pages: written once at load, a chunk of
/// 8 MiB takes four page faults where 4 KiB pages would take 2,048. Chunks grow with the pool,
/// from kFirstChunkBytes (4 KiB pages: a small model's weights do not fill a huge page) to
/// kChunkBytes; a request larger than the next chunk gets a chunk of its own. Memory is given
/// back only when the pool is destroyed.
///
/// Untouched parts of a chunk cost address space only; at most one partly used huge page per
/// chunk is resident beyond what was asked for.
///
/// Thread-safety: none; callers serialize (PackedConstants allocates under its lock).
class BulkPool {
 public:
  static constexpr size_t kFirstChunkBytes = size_t{256} << 10;
  static constexpr size_t kChunkBytes = size_t{8} << 20;
  static constexpr size_t kAlignment = 64;

  /// `size` bytes (> 0), `kAlignment`-aligned, valid while the pool lives. Errors:
  /// MemoryAllocationFailed with the size asked for.
  Result<uint8_t*> allocate(size_t size);

  /// Gives back the most recent allocation, `data` of `size` bytes (for a fill that failed);
  /// anything else is kept until the pool is destroyed.
  void release_last(const uint8_t* data, size_t size);

  /// Bytes of chunks held (address space, not resident memory).
  size_t reserved_bytes() const { return reserved_; }

 private:
  struct Chunk {
    AlignedBuffer memory;
    size_t size = 0;
    size_t used = 0;
  };
  std::vector<Chunk> chunks_;
  size_t reserved_ = 0;
};

}  // namespace kiln::runtime
