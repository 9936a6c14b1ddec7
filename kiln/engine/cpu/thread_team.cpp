// Starting the OpenMP team with its members on distinct CPUs (thread_team.h).

#include <kiln/engine/cpu/thread_team.h>

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>

#if defined(__linux__)
#include <sched.h>
#endif

namespace kiln::engine::cpu {

std::vector<int> cpus_to_move_to(const std::vector<int>& member_cpus, int member,
                                 const std::vector<int>& allowed) {
  if (member <= 0 || member >= static_cast<int>(member_cpus.size())) return {};
  const int mine = member_cpus[static_cast<size_t>(member)];
  if (mine < 0) return {};
  const auto earlier_end = member_cpus.begin() + member;
  if (std::find(member_cpus.begin(), earlier_end, mine) == earlier_end) return {};
  std::vector<int> free;
  for (int cpu : allowed) {
    if (std::find(member_cpus.begin(), member_cpus.end(), cpu) == member_cpus.end()) {
      free.push_back(cpu);
    }
  }
  return free;
}

namespace {

#if defined(__linux__)

std::vector<int> allowed_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  // Fails past CPU_SETSIZE (1024) CPUs: then no member moves.
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return {};
  std::vector<int> cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &set)) cpus.push_back(cpu);
  }
  return cpus;
}

int current_cpu() { return sched_getcpu(); }
void yield() { sched_yield(); }

#else

std::vector<int> allowed_cpus() { return {}; }
int current_cpu() { return -1; }
void yield() {}

#endif

}  // namespace

bool move_this_thread(const std::vector<int>& targets) {
#if defined(__linux__)
  cpu_set_t to, back;
  CPU_ZERO(&to);
  CPU_ZERO(&back);
  for (int cpu : targets) {
    if (cpu >= 0 && cpu < CPU_SETSIZE) CPU_SET(cpu, &to);
  }
  if (CPU_COUNT(&to) == 0 || sched_getaffinity(0, sizeof(back), &back) != 0) return false;
  CPU_AND(&to, &to, &back);
  // The kernel moves the thread before the first call returns when its CPU is not in `to`.
  if (CPU_COUNT(&to) == 0 || sched_setaffinity(0, sizeof(to), &to) != 0) return false;
  sched_setaffinity(0, sizeof(back), &back);
  return true;
#else
  (void)targets;
  return false;
#endif
}

int this_cpu() { return current_cpu(); }

bool move_off_creator_cpu(int creator_cpu) {
  if (creator_cpu < 0 || current_cpu() != creator_cpu) return false;
  std::vector<int> others = allowed_cpus();
  others.erase(std::remove(others.begin(), others.end(), creator_cpu), others.end());
  return !others.empty() && move_this_thread(others);
}

int team_size(int num_threads) { return num_threads > 0 ? num_threads : omp_get_max_threads(); }

namespace {

// Runs the calling thread's team of `wanted` members once, moving each member that shares a
// CPU with an earlier one to a CPU none is on (the work of start_thread_team).
TeamStart spread_team(int wanted) {
  const bool spread = omp_get_proc_bind() == omp_proc_bind_false;
  auto cpus = std::make_unique<std::atomic<int>[]>(static_cast<size_t>(wanted));
  for (int i = 0; i < wanted; ++i) cpus[static_cast<size_t>(i)].store(-1);
  std::atomic<int> arrived{0};
  std::atomic<int> turn{1};  // members after the creator decide one at a time, in order
  std::atomic<int> moved{0};
  int members = 0;

#pragma omp parallel num_threads(wanted)
  {
    const int me = omp_get_thread_num();
    const int team = omp_get_num_threads();
    if (me == 0) members = team;
    cpus[static_cast<size_t>(me)].store(current_cpu());
    arrived.fetch_add(1);
    if (spread && team > 1) {
      // A member that has not arrived may be queued behind one of us on our CPU: give it
      // the CPU while waiting.
      while (arrived.load() < team) yield();
      if (me > 0) {
        while (turn.load() != me) yield();
        std::vector<int> now(static_cast<size_t>(team));
        for (int i = 0; i < team; ++i) now[static_cast<size_t>(i)] = cpus[static_cast<size_t>(i)];
        // Asking the system for the allowed CPUs only when this member shares one.
        const bool shares = std::find(now.begin(), now.begin() + me,
                                      now[static_cast<size_t>(me)]) != now.begin() + me;
        const std::vector<int> targets =
            shares ? cpus_to_move_to(now, me, allowed_cpus()) : std::vector<int>{};
        if (!targets.empty() && move_this_thread(targets)) {
          moved.fetch_add(1);
          cpus[static_cast<size_t>(me)].store(current_cpu());
        }
        turn.fetch_add(1);
      }
      // OpenMP's barrier at the region's end spins: no member may reach it while another
      // that shares its CPU has yet to move.
      while (turn.load() < team) yield();
    }
  }
  return TeamStart{members, moved.load()};
}

// The calling thread's team: the largest started, and when it last ran (rejoin_thread_team).
struct TeamRecord {
  int largest_started = 1;
  std::chrono::steady_clock::time_point last_run{};
};
thread_local TeamRecord team_record;

}  // namespace

TeamStart start_thread_team(int num_threads) {
  const int wanted = team_size(num_threads);
  if (wanted <= team_record.largest_started) return {};
  team_record.largest_started = wanted;
  team_record.last_run = std::chrono::steady_clock::now();
  return spread_team(wanted);
}

TeamStart rejoin_thread_team(int num_threads, std::chrono::microseconds idle) {
  const int wanted = team_size(num_threads);
  if (wanted > team_record.largest_started) return start_thread_team(num_threads);
  if (wanted <= 1) return {};
  const auto now = std::chrono::steady_clock::now();
  const bool rested = now - team_record.last_run >= idle;
  team_record.last_run = now;
  return rested ? spread_team(wanted) : TeamStart{};
}

}  // namespace kiln::engine::cpu
