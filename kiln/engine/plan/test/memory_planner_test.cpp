#include <kiln/engine/plan/memory_planner.h>

#include <gtest/gtest.h>

#include <random>

namespace kiln::engine::plan {
namespace {

bool overlap(const Lifetime& a, const Lifetime& b) { return a.first <= b.last && b.first <= a.last; }

TEST(MemoryPlanner, ReusesMemoryOfDeadBuffers) {
  // a chain: each buffer dies when the next is made
  std::vector<Lifetime> chain = {{0, 1, 100}, {1, 2, 100}, {2, 3, 100}, {3, 4, 100}};
  MemoryPlan plan = plan_memory(chain);
  EXPECT_EQ(plan.arena_size, 256u);  // two 128-byte slots alternate
}

TEST(MemoryPlanner, RandomPlansNeverOverlapLiveBuffers) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<Lifetime> lifetimes;
    for (int i = 0; i < 20; ++i) {
      int first = static_cast<int>(rng() % 30);
      lifetimes.push_back({first, first + static_cast<int>(rng() % 10), 1 + rng() % 5000});
    }
    MemoryPlan plan = plan_memory(lifetimes);
    uint64_t total = 0;
    for (size_t i = 0; i < lifetimes.size(); ++i) {
      total += (lifetimes[i].size + 63) / 64 * 64;
      EXPECT_EQ(plan.offsets[i] % 64, 0u);
      EXPECT_LE(plan.offsets[i] + lifetimes[i].size, plan.arena_size);
      for (size_t j = 0; j < i; ++j) {
        if (!overlap(lifetimes[i], lifetimes[j])) continue;
        bool disjoint = plan.offsets[i] + lifetimes[i].size <= plan.offsets[j] ||
                        plan.offsets[j] + lifetimes[j].size <= plan.offsets[i];
        EXPECT_TRUE(disjoint) << "trial " << trial << " buffers " << i << ", " << j;
      }
    }
    EXPECT_LE(plan.arena_size, total);
  }
}

}  // namespace
}  // namespace kiln::engine::plan
