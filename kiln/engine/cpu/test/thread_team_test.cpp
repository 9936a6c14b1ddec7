#include <kiln/engine/cpu/thread_team.h>

#include <gtest/gtest.h>
#include <omp.h>

#include <chrono>
#include <thread>
#include <vector>

#if defined(__linux__)
#include <sched.h>
#endif

namespace kiln::engine::cpu {
namespace {

using Cpus = std::vector<int>;

TEST(CpusToMoveTo, AMemberAloneOnItsCpuStays) {
  EXPECT_TRUE(cpus_to_move_to({0, 1}, 1, {0, 1}).empty());
  EXPECT_TRUE(cpus_to_move_to({3, 1, 2}, 2, {0, 1, 2, 3}).empty());
}

TEST(CpusToMoveTo, AMemberOnAnEarlierMembersCpuMovesToTheFreeOnes) {
  EXPECT_EQ(cpus_to_move_to({0, 0}, 1, {0, 1}), (Cpus{1}));
  EXPECT_EQ(cpus_to_move_to({2, 5, 2}, 2, {0, 2, 5, 7}), (Cpus{0, 7}));
  // Members not placed yet (-1) take no CPU.
  EXPECT_EQ(cpus_to_move_to({1, 1, -1}, 1, {0, 1, 2}), (Cpus{0, 2}));
}

TEST(CpusToMoveTo, TheFirstOfASharedCpuAndTheCreatorStay) {
  // Member 1 shares CPU 4 with member 2, which comes later: member 2 moves, not member 1.
  EXPECT_TRUE(cpus_to_move_to({0, 4, 4}, 1, {0, 4, 6}).empty());
  EXPECT_TRUE(cpus_to_move_to({0, 0}, 0, {0, 1}).empty());
}

TEST(CpusToMoveTo, NothingToMoveToWhenEveryAllowedCpuHasAMember) {
  EXPECT_TRUE(cpus_to_move_to({0, 1, 1}, 2, {0, 1}).empty());
  EXPECT_TRUE(cpus_to_move_to({0, 0}, 1, {0}).empty());
  EXPECT_TRUE(cpus_to_move_to({0, 0}, 1, {}).empty());
}

TEST(CpusToMoveTo, AMemberOutsideTheTeamOrUnplacedStays) {
  EXPECT_TRUE(cpus_to_move_to({0, 0}, 2, {0, 1, 2}).empty());
  EXPECT_TRUE(cpus_to_move_to({0, 0}, -1, {0, 1, 2}).empty());
  EXPECT_TRUE(cpus_to_move_to({-1, -1}, 1, {0, 1, 2}).empty());
}

#if defined(__linux__)
Cpus affinity_of_this_thread() {
  cpu_set_t set;
  CPU_ZERO(&set);
  EXPECT_EQ(sched_getaffinity(0, sizeof(set), &set), 0);
  Cpus cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &set)) cpus.push_back(cpu);
  }
  return cpus;
}
#endif

TEST(MoveThisThread, MovesToATargetAndLeavesTheAffinitySetAsItWas) {
#if defined(__linux__)
  std::thread([] {
    const Cpus allowed = affinity_of_this_thread();
    if (allowed.size() < 2) GTEST_SKIP() << "one CPU: nowhere to move";
    const int from = sched_getcpu();
    const int to = allowed[0] == from ? allowed[1] : allowed[0];
    ASSERT_TRUE(move_this_thread({to}));
    EXPECT_EQ(sched_getcpu(), to);  // moved before the call returned
    EXPECT_EQ(affinity_of_this_thread(), allowed);
    // Nothing to move to: CPUs it may not run on, or none.
    EXPECT_FALSE(move_this_thread({}));
    EXPECT_FALSE(move_this_thread({-1, CPU_SETSIZE}));
    EXPECT_EQ(affinity_of_this_thread(), allowed);
  }).join();
#else
  EXPECT_FALSE(move_this_thread({0}));
#endif
}

// Each case runs on a thread of its own: the team and the "started" record are per thread.
TEST(StartThreadTeam, StartsATeamOnceAPerSizeAndLeavesNoMemberPinned) {
  std::thread([] {
    EXPECT_EQ(start_thread_team(1).members, 0);  // one thread: no team to start
    const TeamStart first = start_thread_team(2);
    EXPECT_EQ(first.members, 2);
    EXPECT_GE(first.moved, 0);
    EXPECT_LE(first.moved, 1);
    EXPECT_EQ(start_thread_team(2).members, 0);
    EXPECT_EQ(start_thread_team(1).members, 0);
    EXPECT_EQ(start_thread_team(4).members, 4);  // a larger team starts its new members
#if defined(__linux__)
    // A moved member gets its affinity set back: every member may run on every CPU it could.
    const Cpus process = affinity_of_this_thread();
    std::vector<Cpus> seen(4);
#pragma omp parallel num_threads(4)
    seen[static_cast<size_t>(omp_get_thread_num())] = affinity_of_this_thread();
    for (const Cpus& member : seen) EXPECT_EQ(member, process);
#endif
  }).join();
}

TEST(RejoinThreadTeam, StartsATeamThenChecksItOnlyAfterItRested) {
  std::thread([] {
    using std::chrono::microseconds;
    EXPECT_EQ(rejoin_thread_team(2, microseconds(1000)).members, 2);  // not started: starts
    EXPECT_EQ(start_thread_team(2).members, 0);
    // Called again at once: the members still spin, nothing to check.
    EXPECT_EQ(rejoin_thread_team(2, std::chrono::hours(1)).members, 0);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    const TeamStart checked = rejoin_thread_team(2, microseconds(1000));
    EXPECT_EQ(checked.members, 2);  // rested: run once, members spread again
    EXPECT_LE(checked.moved, 1);
    EXPECT_EQ(rejoin_thread_team(1, microseconds(0)).members, 0);  // one thread: no team
#if defined(__linux__)
    const Cpus process = affinity_of_this_thread();
    std::vector<Cpus> seen(2);
#pragma omp parallel num_threads(2)
    seen[static_cast<size_t>(omp_get_thread_num())] = affinity_of_this_thread();
    for (const Cpus& member : seen) EXPECT_EQ(member, process);
#endif
  }).join();
}

TEST(StartThreadTeam, ZeroMeansOpenMpsThreadCount) {
  std::thread([] {
    const int all = omp_get_max_threads();
    EXPECT_EQ(start_thread_team(0).members, all > 1 ? all : 0);
    EXPECT_EQ(start_thread_team(0).members, 0);
  }).join();
}

}  // namespace
}  // namespace kiln::engine::cpu
