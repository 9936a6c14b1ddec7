#include <kiln/exporter/export.h>

#include <kiln/exporter/onnx/onnx_importer.h>
#include <kiln/exporter/writer/program_writer.h>

namespace kiln::exporter {

runtime::Result<std::vector<uint8_t>> export_onnx_file(const std::string& onnx_path,
                                                       const ExportOptions& options) {
  if (options.backend != "portable" && options.backend != "kiln") {
    return runtime::Status(runtime::Error::NotSupported, "export model '" + onnx_path +
                                                             "': backend '" + options.backend +
                                                             "' (expected 'kiln' or 'portable')");
  }
  for (const DimEnumeration& e : options.enumerations) {
    if (e.method != "forward") {
      return runtime::Status(runtime::Error::InvalidArgument,
                             "export model '" + onnx_path + "': --enumerate names method '" +
                                 e.method + "' (expected 'forward', the one method exported)");
    }
  }
  KILN_ASSIGN_OR_RETURN(engine::ir::Model model, import_onnx_file(onnx_path));
  ProgramSpec spec;
  spec.segment_alignment = options.segment_alignment;
  if (options.backend == "kiln") {
    std::optional<std::string> reason = kiln_unsupported_reason(model, "forward");
    if (!reason) {
      KILN_RETURN_IF_ERROR(lower_to_kiln(model, "forward", "forward", options, spec));
      return write_program(spec);
    }
    if (!options.enumerations.empty()) {
      return runtime::Status(runtime::Error::NotSupported,
                             "export model '" + onnx_path +
                                 "': --enumerate needs the kiln backend, which cannot take "
                                 "method 'forward': " +
                                 *reason);
    }
    if (options.on_note) {
      options.on_note("method 'forward' uses the portable lowering (reference kernels): " +
                      *reason);
    }
  }
  if (!options.enumerations.empty()) {
    return runtime::Status(
        runtime::Error::InvalidArgument,
        "export model '" + onnx_path + "': --enumerate needs --backend kiln (got 'portable')");
  }
  KILN_RETURN_IF_ERROR(lower_to_portable(model, "forward", "forward", options, spec));
  return write_program(spec);
}

}  // namespace kiln::exporter
