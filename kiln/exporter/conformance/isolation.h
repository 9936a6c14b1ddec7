#pragma once

#include <kiln/exporter/conformance/conformance.h>

#include <functional>
#include <vector>

namespace kiln::exporter {

/// Runs `run_case` for each of `cases` in forked child processes, up to `options.jobs` at once,
/// and returns the results in the order of `cases`, calling `on_case` (when set) in that order
/// as they complete. A crash or a hang (longer than `options.timeout_s`) becomes that case's
/// Fail ("crashed: signal 11 (Segmentation fault)", "timed out after 60 s") instead of ending
/// the run. A case whose child cannot be started runs in this process. Call it from a
/// single-threaded process (fork copies only the calling thread).
std::vector<CaseResult> run_cases_isolated(const std::vector<CaseDir>& cases,
                                           const ConformanceOptions& options,
                                           const std::function<void(const CaseResult&)>& on_case);

}  // namespace kiln::exporter
