// libFuzzer target for the program loader: any bytes go through Program::load, and for a
// program that verifies, through method_meta and load_method of every method. Nothing may
// crash, hang, leak or read out of bounds; errors are the expected outcome for most inputs.
//
// Run: program_load_fuzzer -max_total_time=60 CORPUS_DIR   (seeds: make_program_seeds)

#include <tests/program_corpus.h>

#include <kiln/runtime/core/data_loader.h>
#include <kiln/runtime/executor/method.h>
#include <kiln/runtime/executor/program.h>
#include <kiln/testing/stub_backend.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace {

// The seeds' delegates name a stub backend; registering one lets their methods load (and
// exercises delegate init paths) instead of stopping at BackendNotFound.
std::unique_ptr<kiln::testing::StubBackend::Installed> g_stub;

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  g_stub = kiln::testing::StubBackend::install(kiln::tests::kCorpusStubBackend);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using kiln::runtime::BufferDataLoader;
  using kiln::runtime::Program;

  auto loader = std::make_shared<BufferDataLoader>(data, size);
  auto program = Program::load(loader);
  if (!program.ok()) return 0;
  for (const std::string& name : (*program)->method_names()) {
    auto meta = (*program)->method_meta(name);
    (void)meta;
    // A program may ask for more memory than this machine has; that is no bug (the runtime
    // reports MemoryAllocationFailed) but ASan and libFuzzer would abort on it.
    if (kiln::tests::load_memory_bytes(**program, name) > kiln::tests::kLoadMemoryBudget) {
      continue;
    }
    auto method = (*program)->load_method(name);
    (void)method;
  }
  return 0;
}
