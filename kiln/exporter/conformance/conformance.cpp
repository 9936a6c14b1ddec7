// The ONNX conformance runner: case discovery, the run over all cases, and each case's
// export → load → execute → compare.

#include <kiln/exporter/conformance/conformance.h>
#include <kiln/exporter/conformance/isolation.h>
#include <kiln/exporter/export.h>
#include <kiln/runtime/backend/options_map.h>
#include <kiln/runtime/core/data_loader.h>
#include <kiln/runtime/core/evalue.h>
#include <kiln/runtime/executor/method.h>
#include <kiln/runtime/executor/program.h>

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <exception>
#include <filesystem>
#include <fstream>
#include <memory>
#include <regex>
#include <system_error>

namespace kiln::exporter {

namespace fs = std::filesystem;
using runtime::Error;
using runtime::Result;
using runtime::Status;
using Outcome = CaseResult::Outcome;

const char* to_string(Outcome outcome) {
  switch (outcome) {
    case Outcome::Pass:
      return "pass";
    case Outcome::Fail:
      return "fail";
    case Outcome::Unsupported:
      return "unsupported";
  }
  return "fail";
}

std::string format_case_line(const CaseResult& result) {
  std::string line = result.name + ": " + to_string(result.outcome);
  if (result.outcome != Outcome::Pass) line += ": " + result.detail;
  return line;
}

namespace {

constexpr const char* kDataSetPrefix = "test_data_set_";
constexpr size_t kMaxDetail = 240;

bool is_case_dir(const fs::path& dir) {
  std::error_code ec;
  return fs::is_regular_file(dir / "model.onnx", ec);
}

void collect_cases(const fs::path& root, const fs::path& dir, int depth,
                   std::vector<CaseDir>& out) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (!entry.is_directory(ec)) continue;
    if (is_case_dir(entry.path())) {
      out.push_back(
          {entry.path().lexically_relative(root).generic_string(), entry.path().string()});
    } else if (depth > 1) {
      collect_cases(root, entry.path(), depth - 1, out);
    }
  }
}

// One line, without the case folder's path (the case name already says where), bounded.
std::string one_line(std::string text, const std::string& case_path) {
  for (const std::string& path : {case_path + "/", case_path}) {
    for (size_t at; !case_path.empty() && (at = text.find(path)) != std::string::npos;) {
      text.replace(at, path.size(), "");
    }
  }
  std::replace(text.begin(), text.end(), '\n', ' ');
  if (text.size() > kMaxDetail) text = text.substr(0, kMaxDetail - 3) + "...";
  return text;
}

// What is unsupported, short enough to count across cases: "operator Loop, If" for missing
// kernels, else the message without the model and node names ("Resize: attribute 'mode' ...").
std::string summarize_unsupported(const std::string& message) {
  static const std::regex kOperator(R"(operator ([A-Za-z_][A-Za-z0-9_]*))");
  std::string ops;
  for (std::sregex_iterator it(message.begin(), message.end(), kOperator), end; it != end; ++it) {
    const std::string op = (*it)[1].str();
    if ((", " + ops + ",").find(", " + op + ",") == std::string::npos) {
      ops += (ops.empty() ? "" : ", ") + op;
    }
  }
  if (!ops.empty()) return "operator " + ops;
  static const std::regex kModel(R"(import model '[^']*': )");
  static const std::regex kNode(R"(node '[^']*' \(([^)]*)\))");
  return std::regex_replace(std::regex_replace(message, kModel, ""), kNode, "$1");
}

bool is_unsupported(Error code) {
  return code == Error::NotSupported || code == Error::OperatorMissing;
}

// The graph's real inputs (not initializers) and outputs; `unsupported` names the first
// sequence, optional or map among them, which kiln does not run.
struct Signature {
  std::vector<std::string> inputs;
  std::vector<std::string> outputs;
  std::string unsupported;
};

std::string value_kind(const onnx::ValueInfoProto& value) {
  switch (value.type().value_case()) {
    case onnx::TypeProto::kSequenceType:
      return "sequence";
    case onnx::TypeProto::kOptionalType:
      return "optional";
    case onnx::TypeProto::kMapType:
      return "map";
    case onnx::TypeProto::kSparseTensorType:
      return "sparse tensor";
    default:
      return "";
  }
}

Result<Signature> read_signature(const fs::path& model_path) {
  std::ifstream file(model_path, std::ios::binary);
  onnx::ModelProto model;
  if (!file || !model.ParseFromIstream(&file)) {
    return Status(Error::InvalidProgram, "model.onnx is not a valid ONNX protobuf");
  }
  Signature signature;
  const auto& graph = model.graph();
  std::vector<std::string> initializers;
  for (const auto& init : graph.initializer()) initializers.push_back(init.name());
  for (const auto& input : graph.input()) {
    if (std::find(initializers.begin(), initializers.end(), input.name()) != initializers.end()) {
      continue;
    }
    signature.inputs.push_back(input.name());
    std::string kind = value_kind(input);
    if (signature.unsupported.empty() && !kind.empty()) signature.unsupported = kind + " input";
  }
  for (const auto& output : graph.output()) {
    signature.outputs.push_back(output.name());
    std::string kind = value_kind(output);
    if (signature.unsupported.empty() && !kind.empty()) signature.unsupported = kind + " output";
  }
  return signature;
}

// test_data_set_N folders in numeric order.
std::vector<fs::path> data_sets(const fs::path& case_dir) {
  std::vector<std::pair<long, fs::path>> found;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(case_dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (!entry.is_directory(ec) || name.rfind(kDataSetPrefix, 0) != 0) continue;
    found.emplace_back(
        std::strtol(name.c_str() + std::char_traits<char>::length(kDataSetPrefix), nullptr, 10),
        entry.path());
  }
  std::sort(found.begin(), found.end());
  std::vector<fs::path> out;
  for (auto& [number, path] : found) out.push_back(std::move(path));
  return out;
}

size_t count_files(const fs::path& dir, const std::string& prefix) {
  size_t n = 0;
  std::error_code ec;
  while (fs::is_regular_file(dir / (prefix + std::to_string(n) + ".pb"), ec)) ++n;
  return n;
}

// Index of the method's input/output for the graph's K-th one: by name, else by position when
// the counts agree; -1 when there is none.
int match_value(const std::vector<runtime::TensorMeta>& metas,
                const std::vector<std::string>& graph_names, size_t k) {
  for (size_t i = 0; i < metas.size(); ++i) {
    if (k < graph_names.size() && metas[i].name == graph_names[k]) return static_cast<int>(i);
  }
  return metas.size() == graph_names.size() ? static_cast<int>(k) : -1;
}

struct CaseRun {
  CaseResult& result;
  const std::string& case_path;

  void fail(const std::string& detail) {
    result.outcome = Outcome::Fail;
    result.detail = one_line(detail, case_path);
  }
  void unsupported(const std::string& detail) {
    result.outcome = Outcome::Unsupported;
    result.detail = one_line(detail, case_path);
  }
  // Unsupported for NotSupported / OperatorMissing, Fail otherwise.
  void error(const std::string& action, const Status& status) {
    if (is_unsupported(status.code())) {
      unsupported(summarize_unsupported(status.message()));
    } else {
      fail(action + ": " + status.message() + " [" +
           std::string(runtime::to_string(status.code())) + "]");
    }
  }
};

// Runs one data set; returns false (with the outcome set) on the first problem.
bool run_data_set(runtime::Method& method, const Signature& signature, const fs::path& set_dir,
                  const ConformanceOptions& options, CaseRun& run) {
  const std::string set = set_dir.filename().string();
  const size_t num_inputs = count_files(set_dir, "input_");
  std::vector<TensorData> inputs(num_inputs);
  std::vector<bool> is_set(method.num_inputs(), false);
  for (size_t k = 0; k < num_inputs; ++k) {
    const fs::path file = set_dir / ("input_" + std::to_string(k) + ".pb");
    const int index = match_value(method.meta().inputs, signature.inputs, k);
    const bool bf16 =
        index >= 0 && method.meta().inputs[index].dtype == runtime::ScalarType::BFloat16;
    auto tensor = read_tensor_proto_file(file.string(), bf16);
    if (!tensor.ok()) {
      run.error(set + ": read input " + std::to_string(k), tensor.status());
      return false;
    }
    inputs[k] = std::move(tensor).get();
    if (index < 0) continue;  // An input the exporter dropped (unused by the graph).
    Status status = method.set_input(static_cast<size_t>(index), runtime::EValue(inputs[k].view()));
    if (!status.ok()) {
      run.error(set + ": set input '" + method.meta().inputs[index].name + "'", status);
      return false;
    }
    is_set[static_cast<size_t>(index)] = true;
  }
  for (size_t i = 0; i < is_set.size(); ++i) {
    if (!is_set[i]) {
      run.fail(set + ": method input '" + method.meta().inputs[i].name + "' has no test data");
      return false;
    }
  }
  Status status = method.execute();
  if (!status.ok()) {
    run.error(set + ": execute", status);
    return false;
  }
  const size_t num_outputs = count_files(set_dir, "output_");
  for (size_t k = 0; k < num_outputs; ++k) {
    const fs::path file = set_dir / ("output_" + std::to_string(k) + ".pb");
    const int index = match_value(method.meta().outputs, signature.outputs, k);
    const bool bf16 =
        index >= 0 && method.meta().outputs[index].dtype == runtime::ScalarType::BFloat16;
    auto expected = read_tensor_proto_file(file.string(), bf16);
    if (!expected.ok()) {
      run.error(set + ": read output " + std::to_string(k), expected.status());
      return false;
    }
    const std::string name = k < signature.outputs.size() ? signature.outputs[k] : expected->name;
    if (index < 0) {
      run.fail(set + ": output '" + name + "' is not an output of the program");
      return false;
    }
    const runtime::EValue& value = method.get_output(static_cast<size_t>(index));
    if (!value.is_tensor()) {
      run.fail(set + ": output '" + name + "' is a " +
               std::string(runtime::to_string(value.tag())) + " (expected a tensor)");
      return false;
    }
    std::string diff = compare_tensors(value.to_tensor(), *expected, options.rtol, options.atol);
    if (!diff.empty()) {
      run.fail(set + ": output '" + name + "': " + diff);
      return false;
    }
  }
  return true;
}

void run_case_unguarded(const CaseDir& case_dir, const ConformanceOptions& options, CaseRun& run) {
  const fs::path dir(case_dir.path);
  auto signature = read_signature(dir / "model.onnx");
  if (!signature.ok()) return run.fail(signature.status().message());
  if (!signature->unsupported.empty()) return run.unsupported(signature->unsupported);
  const std::vector<fs::path> sets = data_sets(dir);
  if (sets.empty()) return run.fail("no test_data_set_* folders");

  ExportOptions export_options;
  export_options.backend = options.backend;
  auto bytes = export_onnx_file((dir / "model.onnx").string(), export_options);
  if (!bytes.ok()) return run.error("export", bytes.status());
  auto owner = std::make_shared<std::vector<uint8_t>>(std::move(bytes).get());
  auto loader = std::make_shared<runtime::BufferDataLoader>(owner->data(), owner->size(), owner);
  auto program = runtime::Program::load(loader);
  if (!program.ok()) return run.error("load program", program.status());
  // No specialization cache: a case's result must not depend on an earlier run's entries, the
  // runner must not write into the user's cache, and a load starts no background store, a
  // thread that could hold a lock (the allocator's, under a sanitizer) when the next case forks
  // its ONNX step.
  runtime::LoadBackendOptionsMap load_options;
  const runtime::BackendOption no_cache{"cache_dir", std::string()};
  if (Status set = load_options.set_options(
          "KilnBackend", runtime::Span<const runtime::BackendOption>(&no_cache, 1));
      !set.ok()) {
    return run.error("load method 'forward'", set);
  }
  auto method = (*program)->load_method("forward", &load_options);
  if (!method.ok()) return run.error("load method 'forward'", method.status());
  for (const fs::path& set : sets) {
    if (!run_data_set(**method, *signature, set, options, run)) return;
  }
  run.result.outcome = Outcome::Pass;
  run.result.detail.clear();
}

}  // namespace

Result<std::vector<CaseDir>> discover_cases(const std::string& dir) {
  std::error_code ec;
  const fs::path root = fs::path(dir).lexically_normal();
  if (!fs::is_directory(root, ec)) {
    return Status(Error::NotFound, "find conformance cases in '" + dir + "': not a folder");
  }
  std::vector<CaseDir> cases;
  if (is_case_dir(root)) {
    fs::path named = root.has_filename() ? root : root.parent_path();
    named = fs::absolute(named, ec);
    cases.push_back({named.filename().string(), root.string()});
    return cases;
  }
  fs::directory_iterator probe(root, ec);
  if (ec) {
    return Status(Error::AccessFailed,
                  "find conformance cases in '" + dir + "': cannot list it (" + ec.message() + ")");
  }
  collect_cases(root, root, 3, cases);
  std::sort(cases.begin(), cases.end(),
            [](const CaseDir& a, const CaseDir& b) { return a.name < b.name; });
  return cases;
}

CaseResult run_case(const CaseDir& case_dir, const ConformanceOptions& options) {
  CaseResult result;
  result.name = case_dir.name;
  CaseRun run{result, case_dir.path};
  // The runtime reports errors as Status, but protobuf and the standard library may throw;
  // a case must never take the run down.
  try {
    run_case_unguarded(case_dir, options, run);
  } catch (const std::exception& e) {
    run.fail(std::string("exception: ") + e.what());
  } catch (...) {
    run.fail("unknown exception");
  }
  return result;
}

Result<std::vector<CaseResult>> run_conformance(
    const std::string& dir, const ConformanceOptions& options,
    const std::function<void(const CaseResult&)>& on_case) {
  std::regex filter;
  try {
    filter = std::regex(options.filter, std::regex::ECMAScript);
  } catch (const std::regex_error& e) {
    return Status(Error::InvalidArgument, "run conformance: filter '" + options.filter +
                                              "' is not a valid regex (" + e.what() + ")");
  }
  KILN_ASSIGN_OR_RETURN(std::vector<CaseDir> cases, discover_cases(dir));
  if (!options.filter.empty()) {
    std::erase_if(cases, [&](const CaseDir& c) { return !std::regex_search(c.name, filter); });
  }
  if (options.isolate) return run_cases_isolated(cases, options, on_case);
  std::vector<CaseResult> results;
  for (const CaseDir& case_dir : cases) {
    results.push_back(run_case(case_dir, options));
    if (on_case) on_case(results.back());
  }
  return results;
}

}  // namespace kiln::exporter
