#pragma once

#include <cstdint>
#include <vector>

namespace kiln::engine::plan {

/// A buffer to place: alive from instruction `first` to instruction `last` (inclusive).
struct Lifetime {
  int first = 0;
  int last = 0;
  uint64_t size = 0;
};

struct MemoryPlan {
  std::vector<uint64_t> offsets;  ///< One per lifetime, aligned.
  uint64_t arena_size = 0;
};

/// Places buffers in one arena so that buffers alive at the same time never overlap, reusing
/// memory of buffers that are dead: largest first, each at the lowest offset that fits between
/// the buffers it overlaps in time (the greedy-by-size heuristic TFLite uses).
MemoryPlan plan_memory(const std::vector<Lifetime>& lifetimes, uint64_t alignment = 64);

}  // namespace kiln::engine::plan
