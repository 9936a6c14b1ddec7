#pragma once

#include <cstdint>
#include <string>
#include <vector>

/// Step profiling: where a compiled function's run time goes, step by step (the counterpart of
/// ONNX Runtime's `enable_profiling` and ExecuTorch's ETDump for the engine), and where the
/// time of specializing it goes (its builds: at load for static inputs, on first use of each
/// shape for symbolic ones). Process-wide and off by default; when off, a run or a build pays
/// one relaxed atomic load. `kiln bench --profile` uses it.
///
/// Thread-safety: every function may be called from several threads; runs add their times
/// under a lock, once per run.
namespace kiln::engine::profiling {

/// Starts or stops timing every step of every compiled function's runs.
void set_enabled(bool enabled);
bool enabled();
/// Forgets the times gathered so far (step times and builds).
void reset();

/// The time one step of one function took over the runs profiled.
struct StepTime {
  std::string function;
  size_t step = 0;   ///< Index in the function's steps.
  std::string node;  ///< The node (the first of a fused group).
  std::string op;
  std::string device;  ///< "cpu:onednn", "cpu:reference", ...
  uint64_t calls = 0;
  double total_ms = 0;
  /// The arithmetic work of those calls (`compile::work_flops`: 2 per multiply-add of a Conv,
  /// ConvTranspose, MatMul or Gemm); 0 for steps of other ops.
  double total_flops = 0;
};

/// The steps profiled, slowest (by total time) first.
std::vector<StepTime> step_times();

/// One build of a function (one plan: for a set of input shapes, or shape-generic), the time of
/// each of its phases in order, and the time each step took to create (its kernel chosen,
/// code generated, weights packed or adopted).
struct BuildTime {
  std::string function;
  std::string shapes;  ///< "[1, 3, 32, 32]", several joined by ", "; "any" when shape-generic.
  struct Phase {
    std::string name;  ///< "cache lookup", "weight checks", "steps", "layouts", "memory plan"
    double ms = 0;
  };
  std::vector<Phase> phases;
  struct Step {
    std::string node;  ///< The node (the first of a fused group).
    std::string op;
    std::string device;
    double create_ms = 0;
  };
  std::vector<Step> steps;  ///< In plan order.
};

/// `BuildTime::shapes` of a build for these input shapes.
std::string shapes_text(const std::vector<std::vector<int64_t>>& input_sizes);

/// The builds recorded since the last reset, in the order they began.
std::vector<BuildTime> builds();

/// Where `add_build_phase` puts a phase: first in a new build; last, or first, in the latest
/// build of that function and shapes (a new one when there is none).
enum class PhaseAt { NewBuild, End, Front };
/// Internal: adds a phase of the build of `function` for `shapes`. Concurrent builds of one
/// function for the same shapes may mix their phases.
void add_build_phase(const std::string& function, const std::string& shapes,
                     const std::string& phase, double ms, PhaseAt at = PhaseAt::End);
/// Internal: adds a step to the latest build of `function` for `shapes`.
void add_build_step(const std::string& function, const std::string& shapes, BuildTime::Step step);

/// Internal: adds one run's step times of function `function` (`names` gives each step's node,
/// op and device; `ms` its time; `flops` its work).
void add_run(const std::string& function, const std::vector<const StepTime*>& names,
             const std::vector<double>& ms, const std::vector<double>& flops);

}  // namespace kiln::engine::profiling
