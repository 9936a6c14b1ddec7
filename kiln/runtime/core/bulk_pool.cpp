#include <kiln/runtime/core/bulk_pool.h>

#include <algorithm>
#include <string>

namespace kiln::runtime {

namespace {

size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

}  // namespace

Result<uint8_t*> BulkPool::allocate(size_t size) {
  if (size == 0 || size > SIZE_MAX - kChunkBytes) {
    return Status(Error::MemoryAllocationFailed,
                  "bulk pool: cannot allocate " + std::to_string(size) +
                      " bytes (expected 1 byte or more, less than the address space)");
  }
  const size_t rounded = round_up(size, kAlignment);
  // The newest chunk only: a request that does not fit closes it (its tail stays untouched).
  if (!chunks_.empty() && chunks_.back().size - chunks_.back().used >= rounded) {
    Chunk& chunk = chunks_.back();
    uint8_t* data = chunk.memory.get() + chunk.used;
    chunk.used += rounded;
    prefault_for_write(data, size);
    return data;
  }
  // Each chunk as large as all before it (at least the first size, at most kChunkBytes).
  const size_t next = std::min(kChunkBytes, std::max(kFirstChunkBytes, reserved_));
  const size_t chunk_size = rounded <= next ? next : round_up(rounded, kPageBytes);
  KILN_ASSIGN_OR_RETURN(AlignedBuffer memory, allocate_aligned(chunk_size, kPageBytes));
  uint8_t* data = memory.get();
  // A chunk made for one large request goes before the open one, which keeps its tail.
  Chunk made{std::move(memory), chunk_size, rounded};
  if (rounded > next / 2 && !chunks_.empty()) {
    chunks_.insert(chunks_.end() - 1, std::move(made));
  } else {
    chunks_.push_back(std::move(made));
  }
  reserved_ += chunk_size;
  prefault_for_write(data, size);
  return data;
}

void BulkPool::release_last(const uint8_t* data, size_t size) {
  const size_t rounded = round_up(size, kAlignment);
  for (auto it = chunks_.rbegin(); it != chunks_.rend() && it != chunks_.rbegin() + 2; ++it) {
    if (it->used >= rounded && it->memory.get() + it->used - rounded == data) {
      it->used -= rounded;
      return;
    }
  }
}

}  // namespace kiln::runtime
