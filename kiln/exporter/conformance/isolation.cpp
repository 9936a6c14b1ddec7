// Cases run in child processes: the importer and kernels are young, and one bad case (an
// assertion, a crash, an endless loop) must not hide the results of the other thousand.
// Children also let cases run in parallel without thread-safety demands on the exporter.
//
// A child runs a chunk of cases, not one: a fresh fork pays for page faults and symbol binding
// again (tens of milliseconds on a VM, more than most cases take). When a child dies, the case
// it was running gets the crash, and a new child takes the rest of its chunk.

#include <kiln/exporter/conformance/isolation.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <iostream>
#include <optional>
#include <string>
#include <thread>
#include <utility>

#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

namespace kiln::exporter {

namespace {

constexpr size_t kChunk = 16;

struct Worker {
  pid_t pid = -1;
  int fd = -1;          ///< Read end of the pipe the child writes one line per finished case to.
  size_t next = 0;      ///< The case the child is running (or will run next).
  size_t end = 0;       ///< One past its last case.
  std::string pending;  ///< Bytes read that do not yet form a whole line.
};

void write_all(int fd, const std::string& bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    done += static_cast<size_t>(n);
  }
}

[[noreturn]] void run_child(const std::vector<CaseDir>& cases, size_t begin, size_t end,
                            const ConformanceOptions& options, int fd) {
  for (size_t i = begin; i < end; ++i) {
    ::alarm(options.timeout_s);
    CaseResult result = run_case(cases[i], options);
    std::replace(result.detail.begin(), result.detail.end(), '\n', ' ');
    write_all(fd, std::to_string(i) + " " +
                      static_cast<char>('0' + static_cast<int>(result.outcome)) + result.detail +
                      "\n");
  }
  ::close(fd);
  std::fflush(nullptr);
  ::_exit(0);  // No static destructors or atexit handlers of the parent's state.
}

std::optional<Worker> start_worker(const std::vector<CaseDir>& cases, size_t begin, size_t end,
                                   const ConformanceOptions& options) {
  int fds[2];
  if (::pipe(fds) != 0) return std::nullopt;
  // Buffered output would otherwise be written twice, once by each process.
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    return std::nullopt;
  }
  if (pid == 0) {
    ::setpgid(0, 0);
    ::close(fds[0]);
    run_child(cases, begin, end, options, fds[1]);
  }
  // The worker leads a process group of its own (set on both sides: whichever runs first), so
  // that ending it ends whatever it started (an ONNX step's child stuck in a lock it inherited).
  ::setpgid(pid, pid);
  ::close(fds[1]);
  Worker worker;
  worker.pid = pid;
  worker.fd = fds[0];
  worker.next = begin;
  worker.end = end;
  return worker;
}

// Parses the whole lines "<index> <outcome digit><detail>" a worker wrote.
void take_lines(Worker& worker, const std::vector<CaseDir>& cases,
                std::vector<std::optional<CaseResult>>& results) {
  for (size_t eol; (eol = worker.pending.find('\n')) != std::string::npos;) {
    const std::string line = worker.pending.substr(0, eol);
    worker.pending.erase(0, eol + 1);
    const size_t space = line.find(' ');
    if (space == std::string::npos || space + 1 >= line.size()) continue;
    const size_t index = std::strtoull(line.c_str(), nullptr, 10);
    const char outcome = line[space + 1];
    if (index >= cases.size() || outcome < '0' || outcome > '2') continue;
    CaseResult result;
    result.name = cases[index].name;
    result.outcome = static_cast<CaseResult::Outcome>(outcome - '0');
    result.detail = line.substr(space + 2);
    results[index] = std::move(result);
    worker.next = index + 1;
  }
}

CaseResult died(const CaseDir& case_dir, int wait_status, const ConformanceOptions& options) {
  CaseResult result;
  result.name = case_dir.name;
  result.outcome = CaseResult::Outcome::Fail;
  if (WIFSIGNALED(wait_status)) {
    const int signal = WTERMSIG(wait_status);
    result.detail =
        signal == SIGALRM
            ? "timed out after " + std::to_string(options.timeout_s) + " s"
            : "crashed: signal " + std::to_string(signal) + " (" + ::strsignal(signal) + ")";
  } else {
    result.detail = "the case's process exited with status " +
                    std::to_string(WIFEXITED(wait_status) ? WEXITSTATUS(wait_status) : -1) +
                    " without a result";
  }
  return result;
}

}  // namespace

std::vector<CaseResult> run_cases_isolated(const std::vector<CaseDir>& cases,
                                           const ConformanceOptions& options,
                                           const std::function<void(const CaseResult&)>& on_case) {
  const size_t jobs =
      options.jobs > 0 ? options.jobs : std::max(1u, std::thread::hardware_concurrency());
  std::deque<std::pair<size_t, size_t>> todo;  // Ranges of cases no worker has taken yet.
  for (size_t begin = 0; begin < cases.size(); begin += kChunk) {
    todo.emplace_back(begin, std::min(begin + kChunk, cases.size()));
  }
  std::vector<std::optional<CaseResult>> results(cases.size());
  std::vector<Worker> workers;
  size_t reported = 0;  // Cases [0, reported) have been given to on_case.

  while (reported < cases.size()) {
    while (!todo.empty() && workers.size() < jobs) {
      auto [begin, end] = todo.front();
      todo.pop_front();
      if (auto worker = start_worker(cases, begin, end, options)) {
        workers.push_back(std::move(*worker));
      } else {
        for (size_t i = begin; i < end; ++i) results[i] = run_case(cases[i], options);
      }
    }
    if (!workers.empty()) {
      std::vector<pollfd> fds;
      for (const Worker& w : workers) fds.push_back({w.fd, POLLIN, 0});
      if (::poll(fds.data(), fds.size(), -1) < 0 && errno != EINTR) break;
      for (size_t k = fds.size(); k-- > 0;) {
        if (fds[k].revents == 0) continue;
        Worker& worker = workers[k];
        char buffer[4096];
        const ssize_t n = ::read(worker.fd, buffer, sizeof(buffer));
        if (n > 0) {
          worker.pending.append(buffer, static_cast<size_t>(n));
          take_lines(worker, cases, results);
          continue;
        }
        if (n < 0 && errno == EINTR) continue;
        // End of the pipe: the child finished its chunk or died in case `next`.
        ::close(worker.fd);
        int wait_status = 0;
        while (::waitpid(worker.pid, &wait_status, 0) < 0 && errno == EINTR) {
        }
        ::kill(-worker.pid, SIGKILL);  // what the worker left behind, if anything
        if (worker.next < worker.end) {
          results[worker.next] = died(cases[worker.next], wait_status, options);
          if (worker.next + 1 < worker.end) todo.emplace_front(worker.next + 1, worker.end);
        }
        workers.erase(workers.begin() + static_cast<std::ptrdiff_t>(k));
      }
    }
    while (reported < cases.size() && results[reported].has_value()) {
      if (on_case) on_case(*results[reported]);
      ++reported;
    }
  }
  std::vector<CaseResult> out;
  out.reserve(cases.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    out.push_back(results[i] ? std::move(*results[i])
                             : CaseResult{cases[i].name, CaseResult::Outcome::Fail,
                                          "the runner lost track of this case"});
  }
  return out;
}

}  // namespace kiln::exporter
