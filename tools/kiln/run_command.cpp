// `kiln run`: load a program, run one method once on .npy or random inputs, print the outputs
// and the load and run times, optionally save the outputs as .npy files.

#include <kiln/extension/module/module.h>
#include <kiln/runtime/core/tensor.h>
#include <tools/kiln/commands.h>
#include <tools/kiln/method_inputs.h>
#include <tools/kiln/npy.h>
#include <tools/kiln/option_args.h>
#include <tools/kiln/tensor_io.h>

#include <cctype>
#include <chrono>
#include <cstdio>
#include <filesystem>
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
  std::string method;
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

Status run(const RunArgs& args) {
  KILN_ASSIGN_OR_RETURN(auto options, parse_option_args(args.options));
  const Module::LoadMode mode =
      args.load_mode == "file" ? Module::LoadMode::File : Module::LoadMode::Mmap;
  Module module(args.program, mode);

  auto start = Clock::now();
  KILN_RETURN_IF_ERROR(module.load());
  const double program_ms = ms_since(start);

  KILN_ASSIGN_OR_RETURN(std::string method, choose_method(module, args.method));
  KILN_ASSIGN_OR_RETURN(MethodMeta meta, module.method_meta(method));
  std::cout << "program " << args.program << " (" << extension::to_string(mode) << ")\n"
            << "method  " << method << "\n";
  KILN_ASSIGN_OR_RETURN(auto prepared, prepare_inputs(meta, args.inputs, args.seed));
  for (const MethodInput& input : prepared) {
    if (!input.tensor) continue;
    std::cout << "input   " << input.name << ": " << runtime::to_string(input.tensor->dtype())
              << " " << runtime::shape_to_string(input.tensor->sizes()) << " " << input.source
              << "\n";
  }

  start = Clock::now();
  KILN_RETURN_IF_ERROR(module.load_method(method, options.empty() ? nullptr : &options));
  const double method_ms = ms_since(start);

  // Non-tensor inputs keep the values the program stores for them.
  KILN_ASSIGN_OR_RETURN(runtime::Method * loaded, module.method(method));
  const std::vector<EValue> inputs = input_values(prepared, *loaded);

  start = Clock::now();
  KILN_ASSIGN_OR_RETURN(auto outputs, module.execute(method, inputs));
  const double run_ms = ms_since(start);

  for (size_t i = 0; i < outputs.size(); ++i) {
    const std::string name = i < meta.outputs.size() ? meta.outputs[i].name : "?";
    std::cout << "output  " << name << ": " << format_evalue(outputs[i], args.max_values) << "\n";
  }
  if (!args.output_dir.empty()) KILN_RETURN_IF_ERROR(write_outputs(args, meta, outputs));
  std::cout << "time    program load " << format_ms(program_ms) << ", method load "
            << format_ms(method_ms) << ", first run " << format_ms(run_ms) << "\n";
  return Status();
}

}  // namespace

Command add_run_command(CLI::App& root) {
  auto args = std::make_shared<RunArgs>();
  CLI::App* app = root.add_subcommand("run", "Run a method once and print its outputs and timings");
  app->add_option("program", args->program, "The .kiln program")->required();
  app->add_option("--method", args->method,
                  "Method to run (default: 'forward', or the program's only method)");
  app->add_option("--input", args->inputs,
                  "NAME=FILE.npy for an input (repeatable); inputs not given get seeded random "
                  "data")
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
