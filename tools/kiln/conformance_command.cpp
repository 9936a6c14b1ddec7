// `kiln conformance`: run ONNX backend test cases (../shared/conformance/onnx) through export,
// load and execute; one line per case, then the totals. Failing cases are results, not errors:
// the exit code is non-zero only when the run itself cannot happen.

#include <kiln/exporter/conformance/conformance.h>
#include <tools/kiln/commands.h>

#include <iostream>
#include <memory>
#include <string>

namespace kiln::tools {

using exporter::CaseResult;
using runtime::Status;

namespace {

struct ConformanceArgs {
  std::string dir;
  exporter::ConformanceOptions options;
  bool no_isolate = false;
};

Status conformance(ConformanceArgs& args) {
  args.options.isolate = !args.no_isolate;
  size_t counts[3] = {0, 0, 0};
  auto results = exporter::run_conformance(args.dir, args.options, [&](const CaseResult& r) {
    ++counts[static_cast<int>(r.outcome)];
    std::cout << exporter::format_case_line(r) << std::endl;
  });
  if (!results.ok()) return results.status();
  std::cout << counts[static_cast<int>(CaseResult::Outcome::Pass)] << " passed, "
            << counts[static_cast<int>(CaseResult::Outcome::Fail)] << " failed, "
            << counts[static_cast<int>(CaseResult::Outcome::Unsupported)] << " unsupported"
            << std::endl;
  return Status();
}

}  // namespace

Command add_conformance_command(CLI::App& root) {
  auto args = std::make_shared<ConformanceArgs>();
  CLI::App* app = root.add_subcommand(
      "conformance", "Run ONNX backend test cases and report pass / fail / unsupported per case");
  app->add_option("dir", args->dir,
                  "A case folder (model.onnx + test_data_set_*), a folder of cases, or a root "
                  "of such folders")
      ->required();
  app->add_option("--backend", args->options.backend, "Backend the cases are exported for")
      ->check(CLI::IsMember({"kiln", "portable"}))
      ->default_val("portable");
  app->add_option("--filter", args->options.filter,
                  "ECMAScript regex: run only cases whose name (e.g. node/test_add) matches");
  app->add_option("--rtol", args->options.rtol, "Relative tolerance for float outputs")
      ->default_val(1e-3);
  app->add_option("--atol", args->options.atol, "Absolute tolerance for float outputs")
      ->default_val(1e-7);
  app->add_option("--timeout", args->options.timeout_s, "Seconds a case may run before it fails")
      ->default_val(60);
  app->add_option("--jobs", args->options.jobs, "Cases run at once (0: one per CPU)")
      ->default_val(0);
  app->add_flag("--no-isolate", args->no_isolate,
                "Run cases in this process (a crashing case then ends the run; for debugging)");
  return Command{app, [args] { return conformance(*args); }};
}

}  // namespace kiln::tools
