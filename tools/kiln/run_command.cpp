// `kiln run`: load a program, run one method once on .npy or random inputs, print the outputs
// and the load and run times, optionally save the outputs as .npy files.

#include <kiln/extension/module/module.h>
#include <kiln/extension/module/tensor_ptr.h>
#include <kiln/runtime/core/tensor.h>
#include <tools/kiln/commands.h>
#include <tools/kiln/npy.h>
#include <tools/kiln/option_args.h>
#include <tools/kiln/tensor_io.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace kiln::tools {

using extension::Module;
using extension::TensorPtr;
using runtime::Error;
using runtime::EValue;
using runtime::MethodMeta;
using runtime::Result;
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

std::string quoted(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& name : names) out += (out.empty() ? "'" : ", '") + name + "'";
  return out.empty() ? "none" : out;
}

// --method, or "forward", or the only method; otherwise the user must choose.
Result<std::string> choose_method(Module& module, const std::string& requested) {
  if (!requested.empty()) return requested;
  KILN_ASSIGN_OR_RETURN(auto names, module.method_names());
  for (const auto& name : names) {
    if (name == "forward") return name;
  }
  if (names.size() == 1) return names[0];
  return Status(Error::InvalidArgument, "run program '" + module.path() + "': it has methods " +
                                            quoted(names) + " (expected --method NAME)");
}

// Maps input name → .npy path, checking every name against the method's inputs.
Result<std::map<std::string, std::string>> input_files(const RunArgs& args,
                                                       const MethodMeta& meta) {
  std::map<std::string, std::string> files;
  std::vector<std::string> names;
  for (const auto& input : meta.inputs) names.push_back(input.name);
  for (const auto& text : args.inputs) {
    KILN_ASSIGN_OR_RETURN(auto pair, parse_name_value(text, "--input"));
    if (std::find(names.begin(), names.end(), pair.first) == names.end()) {
      return Status(Error::NotFound, "parse --input '" + text + "': method '" + meta.name +
                                         "' has no input '" + pair.first + "' (expected one of " +
                                         quoted(names) + ")");
    }
    if (!files.emplace(pair.first, pair.second).second) {
      return Status(Error::InvalidArgument, "parse --input '" + text + "': input '" + pair.first +
                                                "' is given twice (expected once)");
    }
  }
  return files;
}

// Reads one input from its .npy file and checks its dtype, so a float64 array from NumPy gets
// a hint instead of a bare mismatch.
Result<TensorPtr> read_input(const runtime::TensorMeta& meta, const std::string& path) {
  KILN_ASSIGN_OR_RETURN(NpyArray array, read_npy(path));
  if (array.dtype != meta.dtype) {
    auto descr = npy_descr(meta.dtype);
    return Status(Error::InvalidArgument,
                  "read input '" + meta.name + "' from '" + path + "': dtype " +
                      std::string(runtime::to_string(array.dtype)) + " (expected " +
                      std::string(runtime::to_string(meta.dtype)) + "; convert with " +
                      "a.astype('" + (descr.ok() ? *descr : "?") + "'))");
  }
  return tensor_from_npy(array);
}

// Loads the .npy inputs (before the method loads, so the timings below cover only kiln).
Status read_inputs(const RunArgs& args, const MethodMeta& meta, std::vector<TensorPtr>& tensors) {
  KILN_ASSIGN_OR_RETURN(auto files, input_files(args, meta));
  std::mt19937_64 rng(args.seed);
  tensors.assign(meta.inputs.size(), nullptr);
  for (size_t i = 0; i < meta.inputs.size(); ++i) {
    const auto& input = meta.inputs[i];
    auto file = files.find(input.name);
    if (file != files.end()) {
      KILN_ASSIGN_OR_RETURN(tensors[i], read_input(input, file->second));
      std::cout << "input   " << input.name << ": " << runtime::to_string(tensors[i]->dtype())
                << " " << runtime::shape_to_string(tensors[i]->sizes()) << " from " << file->second
                << "\n";
    } else if (input.tag == runtime::Tag::Tensor) {
      KILN_ASSIGN_OR_RETURN(tensors[i], random_tensor(input, rng));
      std::cout << "input   " << input.name << ": " << runtime::to_string(tensors[i]->dtype())
                << " " << runtime::shape_to_string(tensors[i]->sizes()) << " random (seed "
                << args.seed << ")\n";
    }
  }
  return Status();
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
  std::vector<TensorPtr> tensors;
  KILN_RETURN_IF_ERROR(read_inputs(args, meta, tensors));

  start = Clock::now();
  KILN_RETURN_IF_ERROR(module.load_method(method, options.empty() ? nullptr : &options));
  const double method_ms = ms_since(start);

  // Non-tensor inputs keep the values the program stores for them.
  KILN_ASSIGN_OR_RETURN(runtime::Method * loaded, module.method(method));
  std::vector<EValue> inputs;
  for (size_t i = 0; i < tensors.size(); ++i) {
    inputs.push_back(tensors[i] ? EValue(*tensors[i]) : loaded->get_input(i));
  }

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
