#pragma once

#include <kiln/runtime/core/result.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::runtime {
class Program;
}

namespace kiln::tests {

/// The backend id the corpus's test delegates use; register a StubBackend under it to let
/// their methods load.
inline constexpr const char* kCorpusStubBackend = "StubBackend";

/// One valid program of the corpus.
struct CorpusProgram {
  std::string name;            ///< File-name friendly: "mlp_constants".
  std::vector<uint8_t> bytes;  ///< A complete .kiln file.
};

/// About ten varied, valid programs built with ProgramBuilder: kernels, constants, several
/// methods, inline and segment delegates with compile specs and named data, bounded and
/// unbounded inputs, scalar inputs and attributes, several dtypes. They seed the program
/// fuzzer and the robustness test. Errors: the first ProgramBuilder error, naming the program.
runtime::Result<std::vector<CorpusProgram>> make_program_corpus();

/// Bytes `load_method(method)` allocates for a verified program: its planned arenas plus the
/// run-time storage of tensors that are neither planned nor constant (saturating at
/// UINT64_MAX; 0 for an unknown method). Robustness tests and fuzzers skip `load_method` above
/// a budget: a program may legitimately ask for more memory than a test machine has (the
/// runtime then fails with MemoryAllocationFailed), and under ASan such a request aborts.
uint64_t load_memory_bytes(const runtime::Program& program, std::string_view method);

/// The budget the robustness test and the program fuzzer use with `load_memory_bytes`.
inline constexpr uint64_t kLoadMemoryBudget = uint64_t{256} << 20;

}  // namespace kiln::tests
