#pragma once

#include <chrono>
#include <vector>

/// The OpenMP team that runs a thread's parallel steps (oneDNN's and kiln's loops), started
/// with its members on distinct CPUs.
///
/// Linux often starts a new thread on the CPU of the thread that creates it (on a 2-CPU
/// virtual machine: 8 of 12 fresh processes of `kiln bench` at 2 threads) and leaves it there
/// for 10-25 ms while the other CPU idles. OpenMP's members spin while they wait, so the
/// creator and its worker then take turns on one CPU in 4 ms time slices and the parallel
/// steps of a process's first run stall. Starting the team before the first step that splits
/// its work, and moving a member that shares a CPU with an earlier one to a CPU none of them
/// is on (its affinity set narrowed, then restored: nothing stays pinned), removes the stall.
/// What it cannot remove is the time the system takes to start the threads (1-10 ms there,
/// in any OpenMP program).
namespace kiln::engine::cpu {

/// What `start_thread_team` did.
struct TeamStart {
  int members = 0;  ///< The team started (0: none; the thread has had one as large).
  int moved = 0;    ///< Members moved off a CPU another member was on.
};

/// Starts the calling thread's OpenMP team of `num_threads` members (0: omp_get_max_threads())
/// unless the thread has started one at least as large, and spreads its members over distinct
/// CPUs of their affinity sets where there are CPUs enough. Placement is left to OpenMP when
/// the user binds threads (OMP_PROC_BIND) and to the system outside Linux. Cheap after the
/// first call of a size on a thread: one thread-local comparison.
TeamStart start_thread_team(int num_threads);

/// Before a run on the calling thread's team of `num_threads`: starts it as
/// `start_thread_team` when it has not started; when the thread's last call is `idle` or more
/// ago, runs the team once and moves members that share a CPU apart again.
///
/// OpenMP's idle members go to sleep, and Linux often wakes a sleeping member on the CPU of
/// the thread that wakes it (on a 2-CPU virtual machine, whose idle virtual CPU looks busy to
/// it), where the two then take turns in time slices, as at a first run. Called every 30 ms
/// at 2 threads (`kiln bench --pause-ms 30`), SqueezeNet took 9.5 ms a call with only the first
/// start spread and 3.2 ms with this check (ONNX Runtime: 4.6; back to back: 2.9), GPT
/// prefill's 90th percentile 13.8 and 1.8 ms. Back-to-back calls (closer than `idle`, while
/// the members still spin) cost one clock read. Returns what the check did (`members` 0: no
/// check).
TeamStart rejoin_thread_team(int num_threads,
                             std::chrono::microseconds idle = std::chrono::microseconds(1000));

/// The members of a team of `num_threads` (0: omp_get_max_threads()).
int team_size(int num_threads);

/// The CPUs member `member` of a team should move to, given the CPU each member runs on
/// (`member_cpus`) and the CPUs it may run on (`allowed`): when an earlier member is on its
/// CPU, the allowed CPUs no member is on; otherwise (or when every allowed CPU has a member)
/// none, and it stays. Member 0 (the team's creator) always stays.
std::vector<int> cpus_to_move_to(const std::vector<int>& member_cpus, int member,
                                 const std::vector<int>& allowed);

/// Moves the calling thread to one of `targets` (the system picks which) and gives it back the
/// affinity set it had, which leaves it there: nothing stays pinned. False when it could not
/// (no target it may run on, or not Linux).
bool move_this_thread(const std::vector<int>& targets);

/// The CPU the calling thread runs on (-1 outside Linux).
int this_cpu();

/// For a helper thread started by a thread on `creator_cpu` (`this_cpu()` there): when the
/// helper runs on that CPU too, moves it to another it may run on (as `move_this_thread`), so
/// the two do not take turns on one CPU (see above). True when it moved.
bool move_off_creator_cpu(int creator_cpu);

}  // namespace kiln::engine::cpu
