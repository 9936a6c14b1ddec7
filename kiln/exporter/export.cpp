// export_program: methods from ONNX files → one program (partition, delegate, lower, write).
#include <kiln/exporter/export.h>

#include <kiln/exporter/lowering.h>
#include <kiln/exporter/onnx/onnx_importer.h>
#include <kiln/exporter/writer/program_writer.h>

#include <algorithm>
#include <set>

namespace kiln::exporter {

namespace ir = engine::ir;
using runtime::Error;
using runtime::Result;
using runtime::Status;

namespace {

Status invalid(const std::string& problem) {
  return Status(Error::InvalidArgument, "export program: " + problem);
}

std::string method_list(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "'" : ", '") + n + "'";
  return out;
}

// The settings every method of a shared package must agree on (enumerations may differ).
Status check_settings(const std::vector<MethodSource>& methods, const ExportOptions& options) {
  std::vector<std::string> multi, single;
  for (const MethodSource& m : methods) {
    (m.multifunction.value_or(options.multifunction) ? multi : single).push_back(m.name);
  }
  if (!multi.empty() && !single.empty()) {
    return invalid("methods " + method_list(multi) + " are exported multifunction and " +
                   method_list(single) +
                   " are not (expected every method multifunction, or none)");
  }
  if (multi.empty()) return Status();
  struct Setting {
    const char* name;
    std::optional<bool> MethodSource::*field;
    bool fallback;
  };
  for (const Setting& s :
       {Setting{"expect_frequent_reshapes", &MethodSource::expect_frequent_reshapes,
                options.expect_frequent_reshapes},
        Setting{"aot", &MethodSource::aot, options.aot}}) {
    std::vector<std::string> on, off;
    for (const MethodSource& m : methods) {
      ((m.*s.field).value_or(s.fallback) ? on : off).push_back(m.name);
    }
    if (!on.empty() && !off.empty()) {
      return invalid(std::string("compile setting ") + s.name + " is on for " + method_list(on) +
                     " and off for " + method_list(off) +
                     " (expected the same for every method of the shared model package; only "
                     "--enumerate may differ)");
    }
  }
  return Status();
}

Status check_methods(const std::vector<MethodSource>& methods, const ExportOptions& options) {
  if (options.backend != "portable" && options.backend != "kiln") {
    return Status(Error::NotSupported, "export program: backend '" + options.backend +
                                           "' (expected 'kiln' or 'portable')");
  }
  if (methods.empty()) return invalid("no method (expected at least one model)");
  std::set<std::string> names;
  for (const MethodSource& m : methods) {
    if (m.name.empty()) return invalid("a method for '" + m.onnx_path + "' has no name");
    if (!names.insert(m.name).second) {
      return invalid("method '" + m.name + "' is given twice (expected distinct names)");
    }
  }
  for (const DimEnumeration& e : options.enumerations) {
    if (names.count(e.method) == 0) {
      return invalid("--enumerate names method '" + e.method + "' (expected one of " +
                     method_list({names.begin(), names.end()}) + ")");
    }
  }
  for (const DimBound& b : options.bounds) {
    if (names.count(b.method) == 0) {
      return invalid("--bound names method '" + b.method + "' (expected one of " +
                     method_list({names.begin(), names.end()}) + ")");
    }
  }
  bool delegates_only = std::any_of(methods.begin(), methods.end(), [&](const MethodSource& m) {
    return m.multifunction.value_or(options.multifunction) ||
           m.expect_frequent_reshapes.value_or(options.expect_frequent_reshapes) ||
           m.aot.value_or(options.aot);
  });
  if (options.backend == "portable" && (delegates_only || !options.enumerations.empty())) {
    return invalid(
        "--multifunction, --enumerate, --expect-frequent-reshapes and --aot need --backend kiln "
        "(got 'portable')");
  }
  return check_settings(methods, options);
}

// The options of one method: its own settings.
ExportOptions method_options(const MethodSource& m, const ExportOptions& options) {
  ExportOptions out = options;
  out.multifunction = m.multifunction.value_or(options.multifunction);
  out.expect_frequent_reshapes =
      m.expect_frequent_reshapes.value_or(options.expect_frequent_reshapes);
  out.aot = m.aot.value_or(options.aot);
  return out;
}

// Its enumerated input dims — and every other input dim of the same symbol — planned up to
// the largest listed value (once the flags are checked).
ExportOptions with_enumerated_bounds(const ir::Graph& graph, const MethodSource& m,
                                     const ExportOptions& options) {
  ExportOptions out = options;
  std::vector<DimBound> bounds;
  for (const DimEnumeration& e : options.enumerations) {
    if (e.method != m.name) continue;
    int64_t max = *std::max_element(e.values.begin(), e.values.end());
    int flagged = graph.find_value(e.input);
    const ir::Dim& symbol =
        graph.values[static_cast<size_t>(flagged)].type.shape[static_cast<size_t>(e.dim)];
    for (int input : graph.inputs) {
      const ir::Value& v = graph.values[static_cast<size_t>(input)];
      for (size_t d = 0; d < v.type.shape.size(); ++d) {
        if (v.type.shape[d] == symbol) {
          bounds.push_back(DimBound{e.method, v.name, static_cast<int>(d), max});
        }
      }
    }
  }
  out.bounds.insert(out.bounds.begin(), bounds.begin(), bounds.end());
  return out;
}

}  // namespace

Result<std::vector<uint8_t>> export_program(const std::vector<MethodSource>& methods,
                                            const ExportOptions& options) {
  KILN_RETURN_IF_ERROR(check_methods(methods, options));
  ProgramSpec spec;
  spec.segment_alignment = options.segment_alignment;
  PackageSet packages(methods.front().multifunction.value_or(options.multifunction));
  ConstantPool constants;
  for (const MethodSource& m : methods) {
    ImportOptions import;
    import.rewrite_patterns = options.rewrite_patterns;
    auto model = import_onnx_file(m.onnx_path, import);
    if (!model.ok()) return model.status().with_context("export method '" + m.name + "'");
    const ir::Model& imported = *model;
    const ir::Graph* graph = imported.find_function("forward");
    if (graph == nullptr) {
      return Status(Error::NotFound, "export method '" + m.name + "': model '" + m.onnx_path +
                                         "' has no function 'forward'");
    }
    ExportOptions mine = method_options(m, options);
    KILN_RETURN_IF_ERROR(check_bounds(*graph, m.name, mine));
    std::vector<Partition> partitions = partition_graph(*graph);
    std::vector<DelegatedPartition> delegated;
    if (options.backend == "kiln") {
      KILN_ASSIGN_OR_RETURN(delegated,
                            plan_delegates(imported, *graph, m.name, partitions, mine, packages));
    }
    KILN_RETURN_IF_ERROR(lower_method(imported, *graph, m.name, with_enumerated_bounds(*graph, m, mine),
                                      partitions, delegated, packages, constants, spec));
  }
  constants.finish(spec);
  KILN_RETURN_IF_ERROR(packages.finish(spec, options.on_note));
  return write_program(spec);
}

Result<std::vector<uint8_t>> export_onnx_file(const std::string& onnx_path,
                                              const ExportOptions& options) {
  return export_program({MethodSource{"forward", onnx_path, {}, {}, {}}}, options);
}

}  // namespace kiln::exporter
