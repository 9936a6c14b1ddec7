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

/// The size from which `allocate_bulk` advises transparent huge pages (and rounds up to).
inline constexpr size_t kBulkHugePageBytes = size_t{2} << 20;

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

/// Allocates `size` bytes for bulk data written once and read often (packed weights, an
/// activation arena): 64-byte aligned; from 2 MiB up, 2 MiB aligned and advised for
/// transparent huge pages where the system has them (Linux `madvise`), which cuts page faults
/// 512-fold when the bytes are first written. Errors: as `allocate_aligned`.
inline Result<AlignedBuffer> allocate_bulk(size_t size) {
  if (size < kBulkHugePageBytes) return allocate_aligned(size);
  size_t rounded = (size + kBulkHugePageBytes - 1) / kBulkHugePageBytes * kBulkHugePageBytes;
  if (rounded < size) return allocate_aligned(size);  // overflow: let it report the size
  KILN_ASSIGN_OR_RETURN(AlignedBuffer buffer, allocate_aligned(rounded, kBulkHugePageBytes));
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  madvise(buffer.get(), rounded, MADV_HUGEPAGE);  // advice only: failure changes nothing
#endif
  return buffer;
}

}  // namespace kiln::runtime
