#pragma once

#include <kiln/runtime/core/result.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>

#if defined(__linux__)
#include <sys/mman.h>
#endif

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

/// The size from which `allocate_bulk` gives whole pages.
inline constexpr size_t kBulkPageBytes = 4096;
inline constexpr size_t kBulkPagesFrom = size_t{64} << 10;

/// Maps the pages of [data, data + size) for writing in one system call (Linux 5.14+
/// MADV_POPULATE_WRITE), for bytes about to be written: that costs less than the page fault of
/// each page's first write (about 8 against 13 us a page on a virtual machine). Advice only:
/// where it is not supported, the first writes fault the pages in as before.
inline void prefault_for_write(void* data, size_t size) {
#if defined(__linux__)
  constexpr int kPopulateWrite = 23;  // MADV_POPULATE_WRITE (Linux 5.14)
  constexpr uintptr_t kPage = 4096;   // at most the page size: whole pages either way
  if (data == nullptr || size == 0) return;
  const uintptr_t begin = reinterpret_cast<uintptr_t>(data) & ~(kPage - 1);
  const uintptr_t end = reinterpret_cast<uintptr_t>(data) + size;
  madvise(reinterpret_cast<void*>(begin), end - begin, kPopulateWrite);
#else
  (void)data;
  (void)size;
#endif
}

/// Allocates `size` bytes for bulk data (an activation arena, run-time storage, scratch
/// memory): 64-byte aligned; from kBulkPagesFrom up, page-aligned in whole 4 KiB pages, which
/// are not advised for transparent huge pages. On a virtual machine whose balloon reports freed
/// memory to its host (as on the machine of bench/RESULTS.md), a fresh 2 MiB huge page is often
/// memory the host has taken back, whose first write costs the host a fault per 4 KiB page:
/// first runs (the arena's first writes) of the OCR detector took 21-38 ms with a huge-page
/// arena against 11-15 ms in 4 KiB pages, and steady runs 0-1.5 % less time (see BulkPool for
/// packed weights). Callers about to write the bytes map them in one call with
/// `prefault_for_write`. Errors: as `allocate_aligned`.
inline Result<AlignedBuffer> allocate_bulk(size_t size) {
  if (size < kBulkPagesFrom) return allocate_aligned(size);
  size_t rounded = (size + kBulkPageBytes - 1) / kBulkPageBytes * kBulkPageBytes;
  if (rounded < size) return allocate_aligned(size);  // overflow: let it report the size
  return allocate_aligned(rounded, kBulkPageBytes);
}

}  // namespace kiln::runtime
