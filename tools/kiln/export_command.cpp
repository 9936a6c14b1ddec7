// `kiln export [MODEL.onnx] -o OUT.kiln [--method NAME=MODEL.onnx]... [--multifunction]
//  [--backend kiln|portable] [--bound ...]... [--enumerate ...]... [--expect-frequent-reshapes]
//  [--aot] [--no-pattern-rewrites]`

#include <kiln/exporter/export.h>
#include <kiln/exporter/writer/program_writer.h>
#include <tools/kiln/commands.h>

#include <chrono>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

namespace kiln::tools {

namespace {

using runtime::Error;
using runtime::Status;

struct ExportArgs {
  std::string model;
  std::string output;
  std::string backend = "kiln";
  std::vector<std::string> bounds;
  std::vector<std::string> methods;
  std::vector<std::string> enumerations;
  bool multifunction = false;
  bool expect_frequent_reshapes = false;
  bool aot = false;
  bool no_pattern_rewrites = false;
};

// METHOD:INPUT:DIM=MAX
runtime::Result<exporter::DimBound> parse_bound(const std::string& text) {
  auto fail = [&] {
    return Status(Error::InvalidArgument, "parse --bound '" + text +
                                              "': expected METHOD:INPUT:DIM=MAX, e.g. "
                                              "forward:input_ids:1=512");
  };
  size_t first = text.find(':');
  size_t equals = text.rfind('=');
  size_t second = text.rfind(':', equals);
  if (first == std::string::npos || equals == std::string::npos || second == first ||
      second == std::string::npos) {
    return fail();
  }
  exporter::DimBound bound;
  bound.method = text.substr(0, first);
  bound.input = text.substr(first + 1, second - first - 1);
  try {
    size_t used = 0;
    std::string dim = text.substr(second + 1, equals - second - 1);
    bound.dim = std::stoi(dim, &used);
    if (used != dim.size()) return fail();
    std::string max = text.substr(equals + 1);
    bound.max = std::stoll(max, &used);
    if (used != max.size()) return fail();
  } catch (const std::exception&) {
    return fail();
  }
  if (bound.method.empty() || bound.input.empty()) return fail();
  return bound;
}

// NAME=MODEL.onnx
runtime::Result<exporter::MethodSource> parse_method(const std::string& text) {
  size_t equals = text.find('=');
  if (equals == std::string::npos || equals == 0 || equals + 1 == text.size()) {
    return Status(Error::InvalidArgument, "parse --method '" + text +
                                              "': expected NAME=MODEL.onnx, e.g. "
                                              "prefill=gpt_prefill.onnx");
  }
  return exporter::MethodSource{text.substr(0, equals), text.substr(equals + 1), {}, {}, {}};
}

Status run_export(const ExportArgs& args) {
  std::vector<exporter::MethodSource> methods;
  if (!args.model.empty()) methods.push_back({"forward", args.model, {}, {}, {}});
  for (const auto& text : args.methods) {
    KILN_ASSIGN_OR_RETURN(exporter::MethodSource m, parse_method(text));
    methods.push_back(std::move(m));
  }
  if (methods.empty()) {
    return Status(Error::InvalidArgument,
                  "export: no model (expected MODEL.onnx or --method NAME=MODEL.onnx)");
  }
  exporter::ExportOptions options;
  options.multifunction = args.multifunction;
  options.expect_frequent_reshapes = args.expect_frequent_reshapes;
  options.aot = args.aot;
  options.rewrite_patterns = !args.no_pattern_rewrites;
  for (const auto& text : args.enumerations) {
    KILN_ASSIGN_OR_RETURN(exporter::DimEnumeration e, exporter::parse_enumeration(text));
    options.enumerations.push_back(std::move(e));
  }
  options.backend = args.backend;
  options.on_note = [](const std::string& note) { std::cerr << "note: " << note << "\n"; };
  for (const auto& text : args.bounds) {
    KILN_ASSIGN_OR_RETURN(exporter::DimBound bound, parse_bound(text));
    options.bounds.push_back(bound);
  }
  auto start = std::chrono::steady_clock::now();
  KILN_ASSIGN_OR_RETURN(auto bytes, exporter::export_program(methods, options));
  KILN_RETURN_IF_ERROR(exporter::write_file_atomically(args.output, bytes));
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                  .count();
  std::string sources;
  for (const auto& m : methods) sources += (sources.empty() ? "" : ", ") + m.name + "=" + m.onnx_path;
  std::cout << "exported " << sources << " -> " << args.output << " (" << bytes.size()
            << " bytes, backend " << args.backend << ", " << ms << " ms)\n";
  return Status();
}

}  // namespace

Command add_export_command(CLI::App& root) {
  auto args = std::make_shared<ExportArgs>();
  CLI::App* app = root.add_subcommand("export", "Export an ONNX model to a .kiln program");
  app->add_option("model", args->model, "ONNX model file (method 'forward')");
  app->add_option("-o,--output", args->output, "program file to write")->required();
  app->add_option("--backend", args->backend,
                  "kiln (compiled by the engine: the default) or portable (reference kernels)")
      ->check(CLI::IsMember({"portable", "kiln"}));
  app->add_option("--bound", args->bounds,
                  "METHOD:INPUT:DIM=MAX: plan a dynamic dimension statically up to MAX");
  app->add_option("--method", args->methods, "NAME=MODEL.onnx: a method and its model (repeatable)");
  app->add_option("--enumerate", args->enumerations,
                  "METHOD:INPUT:DIM=V1,V2,...: enumerated shapes (kiln backend)");
  app->add_flag("--multifunction", args->multifunction, "one shared model package (kiln backend)");
  app->add_flag("--expect-frequent-reshapes", args->expect_frequent_reshapes,
                "favour shape-generic plans (kiln backend)");
  app->add_flag("--aot", args->aot,
                "embed the compiled artifact (kiln backend), for loads of this machine's CPU "
                "features and thread count");
  app->add_flag("--no-pattern-rewrites", args->no_pattern_rewrites,
                "import the graph as written (no GELU, layer normalization or Conv "
                "folding rewrites)");
  return Command{app, [args] { return run_export(*args); }};
}

}  // namespace kiln::tools
