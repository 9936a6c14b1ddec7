#pragma once

#include <kiln/exporter/conformance/tensor_proto.h>
#include <kiln/runtime/core/result.h>
#include <kiln/runtime/core/tensor.h>

#include <functional>
#include <string>
#include <vector>

namespace kiln::exporter {

/// How `run_conformance` runs the ONNX backend test cases (../shared/conformance/onnx).
struct ConformanceOptions {
  /// Backend the cases are exported for: "portable" (reference kernels only) or "kiln".
  /// Takes effect at each case's export. Default "portable".
  std::string backend = "portable";
  /// ECMAScript regex searched in each case name (`node/test_add`); empty runs every case.
  /// Default empty.
  std::string filter;
  /// Float outputs match when |actual - expected| <= atol + rtol * |expected| (the ONNX test
  /// runner's defaults). Looser values hide real errors; tighter ones fail on rounding.
  double rtol = 1e-3;
  double atol = 1e-7;
  /// Runs each case in a child process (fork), so a crash or hang in one case is reported as
  /// that case's failure ("crashed: signal 11", "timed out") instead of ending the run. Costs
  /// about a millisecond per case. Default true; tests of the runner itself may turn it off.
  bool isolate = true;
  /// With `isolate`, a case running longer than this many seconds is killed and fails.
  /// Default 60.
  unsigned timeout_s = 60;
  /// With `isolate`, how many cases run at once (results are still reported in name order);
  /// more jobs finish sooner but compete with other work on the machine. 0 means one per CPU.
  /// Default 0.
  unsigned jobs = 0;
};

/// The outcome of one case.
struct CaseResult {
  /// The case folder relative to the folder given to `run_conformance` (`node/test_add`), or
  /// its own name when that folder is the case.
  std::string name;
  enum class Outcome { Pass, Fail, Unsupported } outcome = Outcome::Fail;
  /// One line: why it failed, or what is unsupported ("operator Loop"); empty for a pass.
  std::string detail;
};

/// "pass", "fail" or "unsupported".
const char* to_string(CaseResult::Outcome outcome);

/// The line `kiln conformance` prints for a result: `<name>: pass`, `<name>: fail: <detail>`
/// or `<name>: unsupported: <detail>`.
std::string format_case_line(const CaseResult& result);

/// A case found under a folder: its name (see CaseResult::name) and its folder.
struct CaseDir {
  std::string name;
  std::string path;
};

/// The cases under `dir`, sorted by name: `dir` itself when it is a case (a folder holding
/// `model.onnx` and `test_data_set_*/`), else every case among its subfolders, searched up to
/// three levels deep (a folder of cases, or a root of such folders). Errors: NotFound when `dir`
/// does not exist or is not a folder; AccessFailed when it cannot be listed.
runtime::Result<std::vector<CaseDir>> discover_cases(const std::string& dir);

/// Compares an output with the expected tensor: equal dtype, equal shape, then values — floats
/// within `atol + rtol * |expected|` with NaN matching NaN and infinities matching the same
/// infinity; integers and bools exactly. Returns "" on a match, else one line naming the first
/// difference: "dtype f64 (expected f32)", "shape [2, 3] (expected [3, 2])", or
/// "element [0, 2] (flat 2) is 1.5 (expected 1.25)". `actual` must be contiguous.
std::string compare_tensors(const runtime::Tensor& actual, const TensorData& expected, double rtol,
                            double atol);

/// Runs one case: exports `model.onnx` with `options.backend`, loads method "forward", and runs
/// every test_data_set against it. Never fails as a whole: every problem is the case's outcome.
/// Export or load errors with code NotSupported or OperatorMissing make the case Unsupported,
/// as do sequence, optional or map inputs and outputs of the model; other errors fail it.
CaseResult run_case(const CaseDir& case_dir, const ConformanceOptions& options);

/// Runs every case under `dir` (see `discover_cases`) whose name matches `options.filter`,
/// calling `on_case` (when set) for each in name order. A failing case never stops the run.
/// With `options.isolate` each case runs in a forked child (see isolation.h), so call it from
/// a single-threaded process.
/// Errors (only when the run cannot happen): as `discover_cases`; InvalidArgument for a filter
/// that is not a valid regex.
runtime::Result<std::vector<CaseResult>> run_conformance(
    const std::string& dir, const ConformanceOptions& options,
    const std::function<void(const CaseResult&)>& on_case = {});

}  // namespace kiln::exporter
