#include <kiln/engine/loader/background_stores.h>

#include <atomic>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace kiln::engine {

namespace {

struct Job {
  std::thread thread;
  std::shared_ptr<std::atomic<bool>> done;
};

struct Jobs {
  std::mutex mutex;
  std::vector<Job> running;
  bool wait_at_exit = false;
};

Jobs& jobs() {
  static Jobs* instance = new Jobs();  // never destroyed: the exit handler uses it
  return *instance;
}

void wait_at_exit() { wait_for_background_stores(); }

}  // namespace

void run_in_background(std::function<void()> job) {
  Jobs& j = jobs();
  std::vector<Job> finished;
  {
    std::lock_guard<std::mutex> lock(j.mutex);
    if (!j.wait_at_exit) {
      j.wait_at_exit = true;
      std::atexit(wait_at_exit);
    }
    // Reap the jobs that are done.
    for (size_t i = 0; i < j.running.size();) {
      if (j.running[i].done->load()) {
        finished.push_back(std::move(j.running[i]));
        j.running.erase(j.running.begin() + static_cast<std::ptrdiff_t>(i));
      } else {
        ++i;
      }
    }
    auto done = std::make_shared<std::atomic<bool>>(false);
    j.running.push_back(Job{std::thread([job = std::move(job), done] {
                              job();
                              done->store(true);
                            }),
                            done});
  }
  for (Job& f : finished) f.thread.join();
}

void wait_for_background_stores() {
  Jobs& j = jobs();
  std::vector<Job> waiting;
  {
    std::lock_guard<std::mutex> lock(j.mutex);
    waiting.swap(j.running);
  }
  for (Job& w : waiting) {
    if (w.thread.joinable()) w.thread.join();
  }
}

}  // namespace kiln::engine
