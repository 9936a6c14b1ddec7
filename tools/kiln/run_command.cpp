// `kiln run`: load a program, run one method (or several, in turn, in one process) once on .npy
// or random inputs, print the outputs, the load and run times and the process's memory,
// optionally save the outputs as .npy files.

#include <kiln/engine/compile/compiled_function.h>
#include <kiln/extension/module/module.h>
#include <kiln/runtime/core/tensor.h>
#include <tools/kiln/bench.h>
#include <tools/kiln/commands.h>
#include <tools/kiln/method_inputs.h>
#include <tools/kiln/npy.h>
#include <tools/kiln/option_args.h>
#include <tools/kiln/tensor_io.h>

#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

namespace kiln::tools {

using extension::Module;
using runtime::Error;
using runtime::EValue;
using runtime::MethodMeta;
using runtime::Status;

namespace {

struct RunArgs {
  std::string program;
  std::vector<std::string> methods;
  std::vector<std::string> inputs;
  std::vector<std::string> options;
  std::string output_dir;
  std::string load_mode = "mmap";
  uint64_t seed = 0;
  size_t max_values = 8;
};

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

std::string format_ms(double ms) {
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%.3f ms", ms);
  return buffer;
}

// A file name for output `name` ("logits:0" → "logits_0.npy").
std::string output_file_name(const std::string& name, size_t index) {
  std::string out = name.empty() ? "output_" + std::to_string(index) : name;
  for (char& c : out) {
    const bool keep =
        std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.';
    if (!keep) c = '_';
  }
  if (out == "." || out == "..") out = "output_" + std::to_string(index);
  return out + ".npy";
}

Status write_outputs(const RunArgs& args, const MethodMeta& meta,
                     const std::vector<EValue>& outputs) {
  std::error_code ec;
  std::filesystem::create_directories(args.output_dir, ec);
  if (ec) {
    return Status(Error::AccessFailed,
                  "create output directory '" + args.output_dir + "': " + ec.message());
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (!outputs[i].is_tensor()) continue;
    const std::string name = i < meta.outputs.size() ? meta.outputs[i].name : "";
    const std::string path =
        (std::filesystem::path(args.output_dir) / output_file_name(name, i)).string();
    KILN_ASSIGN_OR_RETURN(NpyArray array, npy_from_tensor(outputs[i].to_tensor()));
    KILN_RETURN_IF_ERROR(write_npy(path, array.dtype, array.shape, array.data));
    std::cout << "wrote   " << path << "\n";
  }
  return Status();
}

// The --input flags for `method`: "METHOD:NAME=FILE" applies to that method only (the prefix
// dropped), "NAME=FILE" to every method.
std::vector<std::string> inputs_for(const std::vector<std::string>& inputs,
                                    const std::string& method) {
  std::vector<std::string> out;
  for (const std::string& text : inputs) {
    size_t colon = text.find(':');
    if (colon == std::string::npos || colon > text.find('=')) {
      out.push_back(text);
    } else if (text.compare(0, colon, method) == 0) {
      out.push_back(text.substr(colon + 1));
    }
  }
  return out;
}

// `io_bytes` grows by the bytes of the method's input and output tensors, `planned_bytes` by
// its planned memory.
Status run_method(Module& module, const RunArgs& args, const std::string& requested,
                  const runtime::LoadBackendOptionsMap& options, double program_ms,
                  uint64_t& io_bytes, uint64_t& planned_bytes) {
  KILN_ASSIGN_OR_RETURN(std::string method, choose_method(module, requested));
  KILN_ASSIGN_OR_RETURN(MethodMeta meta, module.method_meta(method));
  planned_bytes += meta.planned_bytes();
  std::cout << "method  " << method << "\n";
  KILN_ASSIGN_OR_RETURN(auto prepared,
                        prepare_inputs(meta, inputs_for(args.inputs, method), args.seed));
  for (const MethodInput& input : prepared) {
    if (!input.tensor) continue;
    io_bytes += input.tensor->nbytes();
    std::cout << "input   " << input.name << ": " << runtime::to_string(input.tensor->dtype())
              << " " << runtime::shape_to_string(input.tensor->sizes()) << " " << input.source
              << "\n";
  }

  auto start = Clock::now();
  KILN_RETURN_IF_ERROR(module.load_method(method, options.empty() ? nullptr : &options));
  const double method_ms = ms_since(start);

  // Non-tensor inputs keep the values the program stores for them.
  KILN_ASSIGN_OR_RETURN(runtime::Method * loaded, module.method(method));
  const std::vector<EValue> inputs = input_values(prepared, *loaded);

  start = Clock::now();
  KILN_ASSIGN_OR_RETURN(auto outputs, module.execute(method, inputs));
  const double run_ms = ms_since(start);

  for (size_t i = 0; i < outputs.size(); ++i) {
    if (outputs[i].is_tensor()) io_bytes += outputs[i].to_tensor().nbytes();
    const std::string name = i < meta.outputs.size() ? meta.outputs[i].name : "?";
    std::cout << "output  " << name << ": " << format_evalue(outputs[i], args.max_values) << "\n";
  }
  if (!args.output_dir.empty()) KILN_RETURN_IF_ERROR(write_outputs(args, meta, outputs));
  std::cout << "time    program load " << format_ms(program_ms) << ", method load "
            << format_ms(method_ms) << ", first run " << format_ms(run_ms) << "\n";
  return Status();
}

Status run(const RunArgs& args) {
  KILN_ASSIGN_OR_RETURN(auto options, parse_option_args(args.options));
  const Module::LoadMode mode =
      args.load_mode == "file" ? Module::LoadMode::File : Module::LoadMode::Mmap;
  if (args.methods.size() > 1 && !args.output_dir.empty()) {
    return Status(Error::InvalidArgument,
                  "kiln run: --output-dir with several --method flags (expected one method, "
                  "so that output files do not overwrite each other)");
  }
  const uint64_t rss_before = process_status_kib("VmRSS");
  Module module(args.program, mode);

  auto start = Clock::now();
  KILN_RETURN_IF_ERROR(module.load());
  const double program_ms = ms_since(start);
  std::cout << "program " << args.program << " (" << extension::to_string(mode) << ")\n";
  const std::vector<std::string> methods =
      args.methods.empty() ? std::vector<std::string>{""} : args.methods;
  uint64_t io_bytes = 0, planned_bytes = 0;
  for (const std::string& method : methods) {
    KILN_RETURN_IF_ERROR(
        run_method(module, args, method, options, program_ms, io_bytes, planned_bytes));
  }
  const uint64_t peak = process_status_kib("VmHWM");
  constexpr double kMiB = 1024.0 * 1024.0;
  std::cout << "memory  peak RSS " << peak / 1024.0 << " MiB, "
            << (peak > rss_before ? peak - rss_before : 0) / 1024.0
            << " MiB above the RSS before the program load; activations "
            << (engine::compile::live_activation_bytes() + planned_bytes) / kMiB
            << " MiB (the methods' planned memory, the compiled functions' arenas and "
               "scratchpads), inputs and outputs "
            << io_bytes / kMiB << " MiB\n";
  return Status();
}

}  // namespace

Command add_run_command(CLI::App& root) {
  auto args = std::make_shared<RunArgs>();
  CLI::App* app = root.add_subcommand("run", "Run a method once and print its outputs and timings");
  app->add_option("program", args->program, "The .kiln program")->required();
  app->add_option("--method", args->methods,
                  "Method to run (default: 'forward', or the program's only method); repeat to "
                  "run several in turn in one process");
  app->add_option("--input", args->inputs,
                  "NAME=FILE.npy for an input (repeatable; METHOD:NAME=FILE.npy for one method "
                  "only); inputs not given get seeded random data")
      ->allow_extra_args(false);
  app->add_option("--option", args->options,
                  "BACKEND.KEY=VALUE load-time backend option (repeatable); true/false is a "
                  "bool, an integer an int, anything else a string")
      ->allow_extra_args(false);
  app->add_option("--output-dir", args->output_dir, "Write each output to DIR/<name>.npy");
  app->add_option("--load-mode", args->load_mode, "How the program is read (default: mmap)")
      ->check(CLI::IsMember({"file", "mmap"}));
  app->add_option("--seed", args->seed, "Seed of the random inputs (default: 0)");
  app->add_option("--max-values", args->max_values, "Values printed per output (default: 8)");
  return Command{app, [args] { return run(*args); }};
}

}  // namespace kiln::tools
