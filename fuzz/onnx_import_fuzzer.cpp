// libFuzzer target for the ONNX importer: any bytes go through import_onnx (protobuf parsing,
// ONNX's checker, version converter and shape inference, our conversion and constant folding),
// and a model that imports is lowered to a portable program, written and loaded back. Nothing
// may crash, hang or read out of bounds; errors are the expected outcome for most inputs.
//
// Run: onnx_import_fuzzer -max_total_time=60 CORPUS_DIR   (seeds: any small model.onnx files,
// e.g. the ONNX backend test cases' models)

#include <kiln/exporter/export.h>
#include <kiln/exporter/onnx/onnx_importer.h>
#include <kiln/exporter/writer/program_writer.h>
#include <kiln/runtime/core/data_loader.h>
#include <kiln/runtime/executor/program.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kiln;
  std::string bytes(reinterpret_cast<const char*>(data), size);
  auto model = exporter::import_onnx(bytes, "fuzz.onnx");
  if (!model.ok()) return 0;
  exporter::ProgramSpec spec;
  if (!exporter::lower_to_portable(*model, "forward", "forward", {}, spec).ok()) return 0;
  auto program_bytes = exporter::write_program(spec);
  if (!program_bytes.ok()) return 0;
  auto owned = std::make_shared<std::vector<uint8_t>>(std::move(program_bytes).get());
  auto program = runtime::Program::load(
      std::make_shared<runtime::BufferDataLoader>(owned->data(), owned->size(), owned));
  if (!program.ok()) __builtin_trap();  // what the exporter writes must load
  return 0;
}
