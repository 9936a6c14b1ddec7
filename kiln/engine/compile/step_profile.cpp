#include <kiln/engine/compile/step_profile.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>

namespace kiln::engine::profiling {

namespace {

std::atomic<bool> g_enabled{false};

struct Store {
  std::mutex mutex;
  std::map<std::pair<std::string, size_t>, StepTime> steps;
};

Store& store() {
  static Store* s = new Store();  // never destroyed: runs may end during static destruction
  return *s;
}

}  // namespace

void set_enabled(bool enabled) { g_enabled.store(enabled, std::memory_order_relaxed); }
bool enabled() { return g_enabled.load(std::memory_order_relaxed); }

void reset() {
  std::lock_guard<std::mutex> lock(store().mutex);
  store().steps.clear();
}

std::vector<StepTime> step_times() {
  std::vector<StepTime> out;
  {
    std::lock_guard<std::mutex> lock(store().mutex);
    for (const auto& [key, time] : store().steps) out.push_back(time);
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const StepTime& a, const StepTime& b) { return a.total_ms > b.total_ms; });
  return out;
}

void add_run(const std::string& function, const std::vector<const StepTime*>& names,
             const std::vector<double>& ms, const std::vector<double>& flops) {
  std::lock_guard<std::mutex> lock(store().mutex);
  for (size_t i = 0; i < ms.size() && i < names.size(); ++i) {
    StepTime& t = store().steps[{function, i}];
    if (t.calls == 0) {
      t = *names[i];
      t.function = function;
      t.step = i;
    }
    ++t.calls;
    t.total_ms += ms[i];
    if (i < flops.size()) t.total_flops += flops[i];
  }
}

}  // namespace kiln::engine::profiling
