#include <kiln/exporter/export.h>

#include <kiln/exporter/onnx/onnx_importer.h>
#include <kiln/exporter/writer/program_writer.h>

namespace kiln::exporter {

runtime::Result<std::vector<uint8_t>> export_onnx_file(const std::string& onnx_path,
                                                       const ExportOptions& options) {
  if (options.backend != "portable") {
    return runtime::Status(runtime::Error::NotSupported,
                           "export model '" + onnx_path + "': backend '" + options.backend +
                               "' (expected 'portable'; the kiln backend comes with the engine)");
  }
  KILN_ASSIGN_OR_RETURN(engine::ir::Model model, import_onnx_file(onnx_path));
  ProgramSpec spec;
  spec.segment_alignment = options.segment_alignment;
  KILN_RETURN_IF_ERROR(lower_to_portable(model, "forward", "forward", options, spec));
  return write_program(spec);
}

}  // namespace kiln::exporter
