#pragma once

#include <cstdint>
#include <string>
#include <vector>

/// Step profiling: where a compiled function's run time goes, step by step (the counterpart of
/// ONNX Runtime's `enable_profiling` and ExecuTorch's ETDump for the engine). Process-wide and
/// off by default; when off, a run pays one relaxed atomic load. `kiln bench --profile` uses it.
///
/// Thread-safety: every function may be called from several threads; runs add their times
/// under a lock, once per run.
namespace kiln::engine::profiling {

/// Starts or stops timing every step of every compiled function's runs.
void set_enabled(bool enabled);
bool enabled();
/// Forgets the times gathered so far.
void reset();

/// The time one step of one function took over the runs profiled.
struct StepTime {
  std::string function;
  size_t step = 0;     ///< Index in the function's steps.
  std::string node;    ///< The node (the first of a fused group).
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

/// Internal: adds one run's step times of function `function` (`names` gives each step's node,
/// op and device; `ms` its time; `flops` its work).
void add_run(const std::string& function, const std::vector<const StepTime*>& names,
             const std::vector<double>& ms, const std::vector<double>& flops);

}  // namespace kiln::engine::profiling
