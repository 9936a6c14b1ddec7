#pragma once

#include <kiln/runtime/core/status.h>

#include <CLI/CLI.hpp>

#include <functional>

namespace kiln::tools {

/// A subcommand of `kiln`: the CLI11 app it added to the root and what `main` runs when the
/// user chose it. The action writes results to stdout and returns a non-ok Status on failure
/// (main prints it to stderr and exits non-zero; NotImplemented exits with 2).
struct Command {
  CLI::App* app = nullptr;
  std::function<runtime::Status()> run;
};

/// `kiln run PROGRAM [--method NAME] [--input NAME=FILE.npy]... [--option B.KEY=VALUE]...
/// [--output-dir DIR] [--load-mode file|mmap] [--seed N] [--max-values N]`.
Command add_run_command(CLI::App& root);

/// `kiln bench PROGRAM [--method NAME] [--input NAME=FILE.npy]... [--option B.KEY=VALUE]...
/// [--threads N] [--warmup N] [--runs N] [--seed N] [--json]` (see bench.h).
Command add_bench_command(CLI::App& root);

/// `kiln inspect PROGRAM [--json]`.
Command add_inspect_command(CLI::App& root);

/// `kiln conformance DIR [--backend kiln|portable] [--filter REGEX] [--rtol X] [--atol X]
/// [--timeout S] [--jobs N] [--no-isolate]`: one line per case, then
/// "N passed, N failed, N unsupported".
Command add_conformance_command(CLI::App& root);

/// `kiln export MODEL.onnx -o OUT.kiln [--backend portable|kiln] [--bound M:I:D=MAX]...`.
Command add_export_command(CLI::App& root);

/// `kiln cache list|stats|evict PROGRAM|purge [--cache-dir DIR] [--json]` (see cache_tool.h).
Command add_cache_command(CLI::App& root);

/// `kiln devices [--json]`: the devices `available_devices()` finds and `cpu_features()`.
Command add_devices_command(CLI::App& root);

}  // namespace kiln::tools
