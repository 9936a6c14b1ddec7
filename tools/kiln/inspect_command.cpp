// `kiln inspect`: what a program holds, as text or as the JSON of program_summary (the text
// is rendered from that JSON, so both views always agree).

#include <kiln/extension/module/module.h>
#include <tools/kiln/commands.h>
#include <tools/kiln/program_summary.h>

#include <algorithm>
#include <iostream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace kiln::tools {

using extension::Module;
using json = nlohmann::ordered_json;
using runtime::Status;

namespace {

struct InspectArgs {
  std::string program;
  bool json = false;
};

// "MatMul x2, Add x2, Relu x1" in order of first appearance.
std::string kernel_summary(const json& ops) {
  std::vector<std::pair<std::string, int>> counts;
  for (const auto& op : ops) {
    auto it = std::find_if(counts.begin(), counts.end(),
                           [&](const auto& c) { return c.first == op.get<std::string>(); });
    if (it == counts.end()) {
      counts.emplace_back(op.get<std::string>(), 1);
    } else {
      ++it->second;
    }
  }
  std::string out;
  for (const auto& [op, n] : counts) {
    out += (out.empty() ? "" : ", ") + op + " x" + std::to_string(n);
  }
  return out.empty() ? "none" : out;
}

void print_tensors(std::ostream& os, const char* title, const json& tensors) {
  os << "  " << title << ":" << (tensors.empty() ? " none" : "") << "\n";
  for (const auto& t : tensors) {
    os << "    " << t["name"].get<std::string>() << "  ";
    if (t.contains("dtype")) {
      os << t["dtype"].get<std::string>() << " " << t["shape_text"].get<std::string>() << "  "
         << t["dynamism"].get<std::string>();
    } else {
      os << t["kind"].get<std::string>();
    }
    os << "\n";
  }
}

void print_method(std::ostream& os, const json& m) {
  os << "\nmethod " << m["name"].get<std::string>() << "\n";
  print_tensors(os, "inputs", m["inputs"]);
  print_tensors(os, "outputs", m["outputs"]);
  os << "  instructions: " << m["num_instructions"].get<size_t>() << " ("
     << m["kernel_calls"].size() << " kernel calls, " << m["delegates"].size() << " delegates)\n";
  os << "  kernel calls: " << kernel_summary(m["kernel_calls"]) << "\n";
  os << "  delegates:" << (m["delegates"].empty() ? " none" : "") << "\n";
  for (const auto& d : m["delegates"]) {
    os << "    " << d["id"].get<std::string>() << "  backend " << d["backend_id"].get<std::string>()
       << "  processed " << d["processed_size"].get<size_t>() << " bytes";
    if (d.contains("processed_in")) os << " (" << d["processed_in"].get<std::string>() << ")";
    os << "\n";
    if (d.contains("compile_specs")) {
      for (const auto& [key, value] : d["compile_specs"].items()) {
        os << "      compile spec " << key << " = " << value.get<std::string>() << "\n";
      }
    }
    if (d.contains("functions")) {
      for (const auto& f : d["functions"]) {
        os << "      function " << f.value("function", json("?")).dump();
        if (f.contains("input_shapes")) os << "  input shapes " << f["input_shapes"].dump();
        os << "\n";
      }
    }
  }
  const auto& memory = m["planned_memory"];
  os << "  planned memory: " << memory["total_bytes"].get<uint64_t>() << " bytes in "
     << memory["arena_sizes"].size() << " arena(s) " << memory["arena_sizes"].dump() << "\n";
}

void print_text(std::ostream& os, const json& doc) {
  os << "program " << doc["program"].get<std::string>() << "  (format v"
     << doc["format_version"].get<uint32_t>();
  if (doc.contains("file_size")) os << ", " << doc["file_size"].get<uint64_t>() << " bytes";
  os << ", " << doc["methods"].size() << " method(s))\n";
  for (const auto& m : doc["methods"]) print_method(os, m);
  os << "\nsegments:" << (doc["segments"].empty() ? " none" : "") << "\n";
  for (const auto& s : doc["segments"]) {
    os << "  #" << s["index"].get<size_t>() << "  offset " << s["offset"].get<uint64_t>()
       << "  size " << s["size"].get<uint64_t>() << " bytes";
    std::string users;
    for (const auto& user : s["used_by"]) {
      users += (users.empty() ? "" : ", ") + user.get<std::string>();
    }
    os << (users.empty() ? "" : "  " + users) << "\n";
  }
  os << "named data:" << (doc["named_data"].empty() ? " none" : "") << "\n";
  for (const auto& n : doc["named_data"]) {
    os << "  '" << n["key"].get<std::string>() << "'  segment #" << n["segment"].get<uint32_t>();
    if (n.contains("size")) os << "  size " << n["size"].get<uint64_t>() << " bytes";
    os << "\n";
  }
}

Status inspect(const InspectArgs& args) {
  Module module(args.program);
  KILN_RETURN_IF_ERROR(module.load());
  KILN_ASSIGN_OR_RETURN(json doc, program_summary(args.program, *module.program()));
  if (args.json) {
    std::cout << doc.dump(2) << "\n";
  } else {
    print_text(std::cout, doc);
  }
  return Status();
}

}  // namespace

Command add_inspect_command(CLI::App& root) {
  auto args = std::make_shared<InspectArgs>();
  CLI::App* app = root.add_subcommand(
      "inspect", "Show methods, inputs/outputs, delegates, kernel calls, memory and segments");
  app->add_option("program", args->program, "The .kiln program")->required();
  app->add_flag("--json", args->json, "Print one JSON document instead of text");
  return Command{app, [args] { return inspect(*args); }};
}

}  // namespace kiln::tools
