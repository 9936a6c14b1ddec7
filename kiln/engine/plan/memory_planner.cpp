#include <kiln/engine/plan/memory_planner.h>

#include <algorithm>
#include <numeric>

namespace kiln::engine::plan {

MemoryPlan plan_memory(const std::vector<Lifetime>& lifetimes, uint64_t alignment) {
  MemoryPlan plan;
  plan.offsets.assign(lifetimes.size(), 0);
  std::vector<size_t> order(lifetimes.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return lifetimes[a].size > lifetimes[b].size;
  });
  std::vector<size_t> placed;
  for (size_t index : order) {
    const Lifetime& l = lifetimes[index];
    uint64_t size = (l.size + alignment - 1) / alignment * alignment;
    std::vector<std::pair<uint64_t, uint64_t>> busy;  // [offset, end) of overlapping buffers
    for (size_t other : placed) {
      const Lifetime& o = lifetimes[other];
      if (o.first <= l.last && l.first <= o.last) {
        uint64_t osize = (o.size + alignment - 1) / alignment * alignment;
        busy.emplace_back(plan.offsets[other], plan.offsets[other] + osize);
      }
    }
    std::sort(busy.begin(), busy.end());
    uint64_t offset = 0;
    for (const auto& [start, end] : busy) {
      if (start >= offset + size) break;
      offset = std::max(offset, end);
    }
    plan.offsets[index] = offset;
    plan.arena_size = std::max(plan.arena_size, offset + size);
    placed.push_back(index);
  }
  return plan;
}

}  // namespace kiln::engine::plan
