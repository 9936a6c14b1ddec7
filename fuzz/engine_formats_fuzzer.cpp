// libFuzzer target for the engine's stored formats (DESIGN.md §4): a model package (a
// KilnBackend delegate's payload), a compiled artifact, and a cache entry file holding one.
// The first byte picks the format (engine_fuzz_inputs.h), the rest is the file. Nothing may
// crash, hang, leak or read out of bounds; and the readers must agree with each other and with
// the writers, which the target checks (a disagreement traps):
// - package: as given, and again with its content hash made to match its bytes (`restamp`),
//   `read_package` succeeds exactly when `PackageView::open` with weights checked on
//   first use succeeds and every weight then verifies; a package read is written again and
//   reads back; a restamped package that opens is loaded by the engine (`ModelLoader::load`,
//   one thread, no cache, arenas and values up to 32 MB: a model may ask for any memory, and
//   oneDNN allocates in proportion when it makes an op, which is no finding), which specializes its
//   functions of static inputs, expecting frequent reshapes when the format byte's next bit is set
//   and on two threads when the bit after it is (engine_fuzz_inputs.h);
//   each function is then run once (symbolic dims bound to 1-3) on inputs made from the package's
//   bytes, its outputs grown up to 16 MB (an error is no finding; a crash or a sanitizer report
//   is), and what it computed is checked against the reference kernels where that is well
//   conditioned (reference_check.h: a disagreement is a finding);
// - artifact: every packed constant lies inside the payload, and writing what was read gives
//   an artifact that reads back the same;
// - entry: validating with the payload's checksum now, or later with `check_payload`, agree;
//   a valid entry's payload goes on to `read_artifact`.
//
// Run: engine_formats_fuzzer -max_total_time=60 CORPUS_DIR   (seeds: make_engine_seeds)

#include <fuzz/engine_fuzz_inputs.h>
#include <fuzz/reference_check.h>

#include <kiln/engine/artifact/compiled_artifact.h>
#include <kiln/engine/cache/entry_format.h>
#include <kiln/engine/loader/model_loader.h>
#include <kiln/engine/package/package.h>
#include <kiln/engine/package/package_format.h>
#include <kiln/runtime/core/aligned_buffer.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace {

using kiln::runtime::Span;

// A check of the target's own: a failure is a finding, like a crash.
void expect(bool condition) {
  if (!condition) __builtin_trap();
}

// Bounds on what a loaded function is run with: its inputs' elements, its arena (a kernel's
// work grows with the values it writes), and each output's storage.
constexpr int64_t kMaxInputElements = int64_t{1} << 16;
constexpr uint64_t kMaxRunArenaBytes = uint64_t{4} << 20;
constexpr size_t kMaxOutputBytes = size_t{16} << 20;

// Input element i of a run: small values of the dtype from `seed`'s bytes (negative ones
// too: indices, axes and sizes computed from them must be checked, not trusted).
void fill_input(std::vector<uint8_t>& bytes, kiln::runtime::ScalarType dtype, int64_t numel,
                Span<const uint8_t> seed) {
  using kiln::runtime::ScalarType;
  const size_t element = kiln::runtime::element_size(dtype);
  bytes.assign(std::max<size_t>(static_cast<size_t>(numel) * element, 1), 0);
  for (int64_t i = 0; i < numel; ++i) {
    const int b = seed.empty() ? 0 : seed[static_cast<size_t>(i) % seed.size()];
    uint8_t* at = bytes.data() + static_cast<size_t>(i) * element;
    if (dtype == ScalarType::Float32) {
      const float v = static_cast<float>(b - 128) / 16.0f;
      std::memcpy(at, &v, sizeof v);
    } else if (dtype == ScalarType::Int64) {
      const int64_t v = b % 11 - 3;
      std::memcpy(at, &v, sizeof v);
    } else if (dtype == ScalarType::Int32) {
      const int32_t v = b % 11 - 3;
      std::memcpy(at, &v, sizeof v);
    } else if (element == 1) {
      *at = static_cast<uint8_t>(dtype == ScalarType::Bool ? b & 1 : b);
    }
  }
}

// Symbols bound to 1, 2 or 3 (by their name's length), so that derived dims ("seq - 1",
// "past + 1") agree with the symbols they come from.
void bind_symbols(const kiln::engine::ir::Dim& dim, std::map<std::string, int64_t>& bindings) {
  for (const auto& term : dim.terms()) {
    if (term.op == 0 && !term.is_anonymous()) {
      bindings.emplace(term.key, 1 + static_cast<int64_t>(term.key.size() % 3));
    } else if (term.op != 0) {
      bind_symbols(term.left, bindings);
      bind_symbols(term.right, bindings);
    }
  }
}

// The sizes each function of `model` is run at: its inputs' static sizes, symbols bound as
// `bind_symbols` binds them (an unknown dim: 2); nullopt past kMaxInputElements.
std::optional<std::vector<std::vector<int64_t>>> run_sizes(const kiln::engine::ir::Graph& graph) {
  std::map<std::string, int64_t> bindings;
  for (int v : graph.inputs) {
    for (const auto& dim : graph.values[static_cast<size_t>(v)].type.shape) {
      bind_symbols(dim, bindings);
    }
  }
  std::vector<std::vector<int64_t>> sizes;
  int64_t elements = 0;
  for (int v : graph.inputs) {
    std::vector<int64_t> input;
    for (const auto& dim : graph.values[static_cast<size_t>(v)].type.shape) {
      auto size = dim.evaluate(bindings);
      input.push_back(size.ok() ? *size : 2);
    }
    auto numel = kiln::runtime::checked_numel(input);
    if (!numel.ok() || *numel > kMaxInputElements - elements) return std::nullopt;
    elements += *numel;
    sizes.push_back(std::move(input));
  }
  return sizes;
}

// How many runs the reference check compared and skipped, printed when the process exits (a
// campaign whose check never compares would find no wrong answer).
std::atomic<uint64_t> compared{0}, skipped{0};

void count_verdict(kiln::fuzz::ReferenceVerdict verdict) {
  static const bool registered = [] {
    std::atexit([] {
      std::fprintf(stderr,
                   "engine_formats_fuzzer: reference check compared %llu runs, skipped %llu\n",
                   static_cast<unsigned long long>(compared.load()),
                   static_cast<unsigned long long>(skipped.load()));
    });
    return true;
  }();
  (void)registered;
  (verdict == kiln::fuzz::ReferenceVerdict::Skipped ? skipped : compared).fetch_add(1);
}

// Runs each function of `model` once: those of static inputs (the ones the load specialized)
// at their sizes, the others at sizes `run_sizes` makes (a plan for that shape, or the
// shape-generic plan when the load expects frequent reshapes).
void run_functions(kiln::engine::LoadedModel& loaded,
                   const kiln::engine::package::PackageView& view, Span<const uint8_t> seed) {
  const kiln::engine::ir::Model& model = view.model();
  std::vector<Span<const uint8_t>> weight_data;
  for (size_t i = 0; i < view.num_weights(); ++i) weight_data.push_back(view.weight_data(i));
  using kiln::runtime::Tensor;
  for (const kiln::engine::ir::Graph& graph : model.functions) {
    auto bound_sizes = run_sizes(graph);
    if (!bound_sizes) continue;
    const std::vector<std::vector<int64_t>>& sizes = *bound_sizes;
    auto session = loaded.bind(graph.name, sizes);
    if (!session.ok()) continue;
    auto function = session->function();
    if (!function.ok() || (*function)->arena_bytes() > kMaxRunArenaBytes) continue;
    const kiln::engine::compile::CompiledFunction& f = **function;
    std::vector<std::vector<uint8_t>> storage(f.num_inputs() + f.num_outputs());
    std::vector<Tensor> tensors;
    tensors.reserve(storage.size());
    for (size_t i = 0; i < f.num_inputs(); ++i) {
      fill_input(storage[i], f.input_dtype(i), *kiln::runtime::checked_numel(sizes[i]), seed);
      tensors.emplace_back(f.input_dtype(i), sizes[i], storage[i].data());
    }
    for (size_t i = 0; i < f.num_outputs(); ++i) {
      std::vector<uint8_t>& bytes = storage[f.num_inputs() + i];
      const auto& out_sizes = f.output_sizes(i);
      if (out_sizes) {
        auto numel = kiln::runtime::checked_numel(*out_sizes);
        const size_t need = numel.ok() ? static_cast<size_t>(*numel) *
                                             kiln::runtime::element_size(f.output_dtype(i))
                                       : kMaxOutputBytes + 1;
        if (need > kMaxOutputBytes) return;
        bytes.resize(std::max<size_t>(need, 1));
        tensors.emplace_back(f.output_dtype(i), *out_sizes, bytes.data());
      } else {
        bytes.resize(kMaxOutputBytes);
        tensors.emplace_back(f.output_dtype(i), std::vector<int64_t>{0}, bytes.data(),
                             kiln::runtime::ShapeDynamism::Unbounded, bytes.size());
      }
    }
    std::vector<const Tensor*> inputs;
    std::vector<Tensor*> outputs;
    for (size_t i = 0; i < f.num_inputs(); ++i) inputs.push_back(&tensors[i]);
    for (size_t i = 0; i < f.num_outputs(); ++i) outputs.push_back(&tensors[f.num_inputs() + i]);
    if (!session->run(inputs, outputs).ok()) continue;
    // What the engine computed, the reference kernels must too (where that is well defined).
    std::string detail;
    const kiln::fuzz::ReferenceVerdict verdict =
        kiln::fuzz::check_against_reference(model, graph, weight_data, inputs, outputs, detail);
    count_verdict(verdict);
    if (verdict == kiln::fuzz::ReferenceVerdict::Disagree) {
      std::fprintf(stderr, "function '%s' disagrees with the reference kernels: %s\n",
                   graph.name.c_str(), detail.c_str());
      __builtin_trap();
    }
  }
}

void fuzz_package(Span<const uint8_t> bytes, bool load = false,
                  kiln::fuzz::PackageFlags flags = {}) {
  namespace package = kiln::engine::package;
  auto view = package::PackageView::open(bytes, package::WeightCheck::OnFirstUse);
  bool weights_ok = view.ok();
  if (view.ok()) {
    for (size_t i = 0; i < view->num_weights(); ++i) {
      weights_ok = weights_ok && view->verify_weight(i).ok();
    }
    for (const auto& function : view->model().functions) {
      for (const auto& value : function.values) (void)value.type.to_string();
    }
  }
  if (view.ok() && weights_ok && load) {
    kiln::engine::compile::CompileOptions compile;
    compile.num_threads = flags.two_threads ? 2 : 1;
    compile.max_arena_bytes = uint64_t{32} << 20;
    kiln::engine::specialization::SpecializationOptions options;
    options.expect_frequent_reshapes = flags.reshapes;
    auto loaded = kiln::engine::ModelLoader::load(*view, options, nullptr, compile);
    if (loaded.ok()) run_functions(**loaded, *view, bytes);
  }
  auto model = package::read_package(bytes);
  expect(model.ok() == weights_ok);
  if (!model.ok()) return;
  auto written = package::write_package(*model);
  expect(written.ok());
  expect(package::read_package({written->data(), written->size()}).ok());
}

// Makes a package whose flatbuffer verifies carry the content hash of its bytes (in the header
// and in the flatbuffer), so that mutations past the hash check reach the rest of the reader
// and the round trip. Returns whether it did.
bool restamp(uint8_t* bytes, size_t size) {
  namespace package = kiln::engine::package;
  namespace format = kiln::engine::package::format;
  if (size < package::kPackageHeaderSize) return false;
  const auto offset = format::load<uint64_t>(bytes, format::kFlatbufferOffsetAt);
  const auto length = format::load<uint64_t>(bytes, format::kFlatbufferSizeAt);
  if (offset > size || length > size - offset || offset % 8 != 0) return false;
  flatbuffers::Verifier verifier(bytes + offset, length);
  if (!kiln::engine::package::schema::VerifyPackageBuffer(verifier)) return false;
  const auto* root = kiln::engine::package::schema::GetPackage(bytes + offset);
  const uint8_t* field = format::content_hash_field(root);
  if (field == nullptr) return false;
  const uint64_t hash = format::hash_package({bytes + offset, length}, field);
  format::store<uint64_t>(bytes, format::kContentHashAt, hash);
  std::memcpy(bytes + (field - bytes), &hash, sizeof hash);
  return true;
}

void fuzz_artifact(Span<const uint8_t> payload) {
  namespace artifact = kiln::engine::artifact;
  auto view = artifact::read_artifact(payload);
  if (!view.ok()) return;
  for (const auto& packed : view->packed) {
    expect(packed.bytes.data() >= payload.data() &&
           packed.bytes.data() + packed.bytes.size() <= payload.data() + payload.size());
  }
  std::vector<uint8_t> written = artifact::write_artifact(view->functions, view->packed);
  auto copy = kiln::runtime::allocate_aligned(written.size(), 64);
  expect(copy.ok());
  std::memcpy(copy->get(), written.data(), written.size());
  auto again = artifact::read_artifact({copy->get(), written.size()});
  expect(again.ok() && again->functions == view->functions &&
         again->packed.size() == view->packed.size());
  for (size_t i = 0; i < view->packed.size(); ++i) {
    const auto& a = view->packed[i];
    const auto& b = again->packed[i];
    expect(a.key == b.key && a.bytes.size() == b.bytes.size() &&
           std::memcmp(a.bytes.data(), b.bytes.data(), a.bytes.size()) == 0);
  }
}

void fuzz_entry(Span<const uint8_t> file) {
  namespace cache = kiln::engine::cache;
  const cache::CacheKey key = kiln::fuzz::fuzz_cache_key();
  const std::string encoded = key.encoded();
  auto now = cache::validate_entry(file, encoded, key.hash(), cache::PayloadCheck::Now);
  auto later = cache::validate_entry(file, encoded, key.hash(), cache::PayloadCheck::Later);
  expect(!now.ok() || later.ok());
  if (later.ok()) expect(now.ok() == cache::check_payload(*later).ok());
  if (!now.ok()) return;
  // The payload starts 64-byte aligned in the file, and the file here does.
  fuzz_artifact(now->payload);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  // The readers take bytes as a mapped file gives them: 64-byte aligned.
  const size_t length = size - 1;
  auto copy = kiln::runtime::allocate_aligned(length + 1, 64);
  if (!copy.ok()) return 0;
  if (length > 0) std::memcpy(copy->get(), data + 1, length);
  const Span<const uint8_t> bytes(copy->get(), length);
  switch (static_cast<kiln::fuzz::EngineFormat>(data[0] % kiln::fuzz::kNumFormats)) {
    case kiln::fuzz::EngineFormat::Package:
      fuzz_package(bytes);
      // The format byte's next bits: load expecting frequent reshapes (shape-generic plans),
      // and on two threads.
      if (restamp(copy->get(), length)) {
        fuzz_package(bytes, true, kiln::fuzz::package_flags(data[0]));
      }
      break;
    case kiln::fuzz::EngineFormat::Artifact:
      fuzz_artifact(bytes);
      break;
    case kiln::fuzz::EngineFormat::Entry:
      fuzz_entry(bytes);
      break;
  }
  return 0;
}
