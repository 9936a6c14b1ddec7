#include <kiln/engine/compile/step_profile.h>

#include <kiln/runtime/core/tensor.h>

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
  std::vector<BuildTime> builds;
};

Store& store() {
  static Store* s = new Store();  // never destroyed: runs may end during static destruction
  return *s;
}

// The latest build of `function` for `shapes`, or a new one. Called under the store's lock.
BuildTime& build_of(const std::string& function, const std::string& shapes, bool begin) {
  std::vector<BuildTime>& builds = store().builds;
  if (!begin) {
    for (auto it = builds.rbegin(); it != builds.rend(); ++it) {
      if (it->function == function && it->shapes == shapes) return *it;
    }
  }
  builds.push_back(BuildTime{function, shapes, {}, {}});
  return builds.back();
}

}  // namespace

void set_enabled(bool enabled) { g_enabled.store(enabled, std::memory_order_relaxed); }
bool enabled() { return g_enabled.load(std::memory_order_relaxed); }

void reset() {
  std::lock_guard<std::mutex> lock(store().mutex);
  store().steps.clear();
  store().builds.clear();
}

std::string shapes_text(const std::vector<std::vector<int64_t>>& input_sizes) {
  std::string out;
  for (const auto& sizes : input_sizes) {
    if (!out.empty()) out += ", ";
    out += runtime::shape_to_string(runtime::Span<const int64_t>(sizes.data(), sizes.size()));
  }
  return out.empty() ? "[]" : out;
}

std::vector<BuildTime> builds() {
  std::lock_guard<std::mutex> lock(store().mutex);
  return store().builds;
}

void add_build_phase(const std::string& function, const std::string& shapes,
                     const std::string& phase, double ms, PhaseAt at) {
  std::lock_guard<std::mutex> lock(store().mutex);
  auto& phases = build_of(function, shapes, at == PhaseAt::NewBuild).phases;
  phases.insert(at == PhaseAt::Front ? phases.begin() : phases.end(), BuildTime::Phase{phase, ms});
}

void add_build_step(const std::string& function, const std::string& shapes, BuildTime::Step step) {
  std::lock_guard<std::mutex> lock(store().mutex);
  build_of(function, shapes, false).steps.push_back(std::move(step));
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
