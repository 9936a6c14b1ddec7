#include <kiln/exporter/onnx/onnx_sandbox.h>

#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>

namespace kiln::exporter {

using runtime::Error;
using runtime::Result;
using runtime::Status;

namespace {

// The child's message: 'O' and the result bytes, or 'E', the error code (4 bytes) and the
// error message.
constexpr char kOk = 'O';
constexpr char kError = 'E';

bool write_all(int fd, const char* data, size_t size) {
  while (size > 0) {
    ssize_t n = ::write(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

[[noreturn]] void child_main(int fd, const std::function<runtime::Result<std::string>()>& work) {
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) ::signal(sig, SIG_DFL);
  std::string message;
  try {
    auto result = work();
    if (result.ok()) {
      message = std::string(1, kOk) + *result;
    } else {
      auto code = static_cast<int32_t>(result.error());
      message = std::string(1, kError) + std::string(reinterpret_cast<const char*>(&code), 4) +
                result.status().message();
    }
  } catch (const std::exception& e) {
    auto code = static_cast<int32_t>(Error::Internal);
    message =
        std::string(1, kError) + std::string(reinterpret_cast<const char*>(&code), 4) + e.what();
  }
  bool written = write_all(fd, message.data(), message.size());
  ::close(fd);
  ::_exit(written ? 0 : 3);
}

// Closes every descriptor the child inherited but 0-2 and `keep`: a child that never ends (killed
// only after its parent is gone) must not hold its parent's pipes open, such as the pipe through
// which a conformance worker reports to its runner, which then waits for an end that never comes.
void close_inherited(int keep) {
#if defined(SYS_close_range)
  if (keep > 3) ::syscall(SYS_close_range, 3u, static_cast<unsigned>(keep - 1), 0u);
  ::syscall(SYS_close_range, static_cast<unsigned>(keep + 1), ~0u, 0u);
#else
  (void)keep;
#endif
}

Result<std::string> decode(const std::string& what, const std::string& message) {
  if (!message.empty() && message[0] == kOk) return message.substr(1);
  if (message.size() >= 5 && message[0] == kError) {
    int32_t code = 0;
    std::memcpy(&code, message.data() + 1, 4);
    return Status(static_cast<Error>(code), message.substr(5));
  }
  return Status(Error::Internal, what + ": the isolated ONNX step sent no result");
}

}  // namespace

Result<std::string> run_in_child(const std::string& what,
                                 const std::function<Result<std::string>()>& work, int timeout_s) {
  int fds[2];
  if (::pipe(fds) != 0) return work();
  pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    return work();
  }
  if (pid == 0) {
    ::close(fds[0]);
    close_inherited(fds[1]);
    child_main(fds[1], work);
  }
  ::close(fds[1]);
  std::string message;
  bool timed_out = false;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  char buffer[1 << 16];
  while (true) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                    deadline - std::chrono::steady_clock::now())
                    .count();
    if (left <= 0) {
      timed_out = true;
      break;
    }
    pollfd p{fds[0], POLLIN, 0};
    int ready = ::poll(&p, 1, static_cast<int>(left));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) {
      timed_out = ready == 0;
      break;
    }
    ssize_t n = ::read(fds[0], buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    message.append(buffer, static_cast<size_t>(n));
  }
  ::close(fds[0]);
  if (timed_out) ::kill(pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (timed_out) {
    return Status(Error::InvalidProgram, what + ": ONNX timed out on this model after " +
                                             std::to_string(timeout_s) + " s");
  }
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    return Status(Error::InvalidProgram, what + ": ONNX crashed on this model (signal " +
                                             std::to_string(sig) + ", " + ::strsignal(sig) +
                                             "); the model is malformed");
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return Status(Error::InvalidProgram,
                  what + ": ONNX ended abnormally on this model (exit status " +
                      std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : -1) + ")");
  }
  return decode(what, message);
}

}  // namespace kiln::exporter
