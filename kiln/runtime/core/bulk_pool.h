#pragma once

#include <kiln/runtime/core/aligned_buffer.h>
#include <kiln/runtime/core/result.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace kiln::runtime {

/// Many bulk allocations (packed weights, kernel buffers) carved from a few large chunks, each
/// allocation's pages mapped for writing in one system call as it is carved (Linux 5.14+
/// MADV_POPULATE_WRITE, `prefault_for_write`: about 8 us a page on a virtual machine against 13
/// for a first write's fault). Chunks grow with the pool, from kFirstChunkBytes to
/// kChunkBytes; a request larger than the next chunk gets a chunk of its own. Memory is given
/// back only when the pool is destroyed.
///
/// The chunks are not advised for transparent huge pages. On a virtual machine whose balloon
/// reports freed memory to its host (virtio free page reporting, as on the machine of
/// bench/RESULTS.md), a fresh 2 MiB huge page is often made of memory the host has taken back,
/// and its first write then costs the host a fault per 4 KiB page: ResNet-18's cold load (46 MB
/// of weights packed) took 30-40 ms or, at random, 110-320 ms with huge pages (median 156 ms
/// of 10 at 2 threads), against 41-61 ms (median 43) populated in 4 KiB pages. The packed
/// weights are written once, and every later process reads them from the cache's mapped file
/// in 4 KiB pages anyway; only a process that packed them and runs from them (a cold load, or
/// no cache) pays the TLB misses of 4 KiB pages: ResNet-18 ran 4-7 % slower there.
///
/// Untouched parts of a chunk cost address space only.
///
/// Thread-safety: none; callers serialize (PackedConstants allocates under its lock).
class BulkPool {
 public:
  static constexpr size_t kFirstChunkBytes = size_t{256} << 10;
  static constexpr size_t kChunkBytes = size_t{8} << 20;
  static constexpr size_t kAlignment = 64;
  static constexpr size_t kPageBytes = 4096;  ///< Chunks are page-aligned, in whole pages.

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
