// Starting the OpenMP team with its members on distinct CPUs (thread_team.h).

#include <kiln/engine/cpu/thread_team.h>

#include <omp.h>

#include <algorithm>
#include <atomic>
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

TeamStart start_thread_team(int num_threads) {
  thread_local int largest_started = 1;
  const int wanted = team_size(num_threads);
  if (wanted <= largest_started) return {};
  largest_started = wanted;

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
        const std::vector<int> targets = cpus_to_move_to(now, me, allowed_cpus());
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

}  // namespace kiln::engine::cpu
