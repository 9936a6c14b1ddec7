// Writes the seed corpus of engine_formats_fuzzer: model packages of a one-function and a
// two-function model (shared weights, symbolic dims, every kind of attribute) and of a small
// network whose ops the engine runs on oneDNN and its own loops (Conv, pooling, MatMul, Softmax,
// LayerNormalization), a compiled artifact, and a cache entry holding it, each behind its
// format byte (engine_fuzz_inputs.h).
//
// Usage: make_engine_seeds OUTDIR

#include <fuzz/engine_fuzz_inputs.h>

#include <kiln/engine/artifact/compiled_artifact.h>
#include <kiln/engine/cache/entry_format.h>
#include <kiln/engine/package/package.h>
#include <kiln/runtime/core/aligned_buffer.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

namespace {

namespace ir = kiln::engine::ir;
using kiln::fuzz::EngineFormat;
using kiln::runtime::ScalarType;

ir::Weight float_weight(const std::string& name, std::vector<int64_t> sizes) {
  ir::Weight w;
  w.name = name;
  w.dtype = ScalarType::Float32;
  w.sizes = std::move(sizes);
  int64_t count = 1;
  for (int64_t s : w.sizes) count *= s;
  std::vector<float> values(static_cast<size_t>(count));
  for (size_t i = 0; i < values.size(); ++i) values[i] = 0.25f * static_cast<float>(i % 7) - 0.5f;
  w.data.resize(values.size() * sizeof(float));
  std::memcpy(w.data.data(), values.data(), w.data.size());
  return w;
}

int add_value(ir::Graph& g, const std::string& name, std::vector<ir::Dim> shape, int weight = -1,
              ScalarType dtype = ScalarType::Float32) {
  ir::Value v;
  v.name = name;
  v.type.dtype = dtype;
  v.type.shape = std::move(shape);
  v.weight = weight;
  return g.add_value(std::move(v));
}

void add_node(ir::Graph& g, const std::string& op, std::vector<int> inputs,
              std::vector<int> outputs, std::vector<ir::Attribute> attributes = {}) {
  ir::Node n;
  n.name = op + "_" + std::to_string(g.nodes.size());
  n.op = op;
  n.inputs = std::move(inputs);
  n.outputs = std::move(outputs);
  n.attributes = std::move(attributes);
  g.nodes.push_back(std::move(n));
}

// x [1, 4] -> MatMul W [4, 3] -> Relu -> y.
ir::Model small_model() {
  ir::Model m;
  const int w = m.add_weight(float_weight("w", {4, 3}));
  ir::Graph g;
  g.name = "main";
  const int x = add_value(g, "x", {1, 4});
  const int wv = add_value(g, "w", {4, 3}, w);
  const int h = add_value(g, "h", {1, 3});
  const int y = add_value(g, "y", {1, 3});
  add_node(g, "MatMul", {x, wv}, {h});
  add_node(g, "Relu", {h}, {y});
  g.inputs = {x};
  g.outputs = {y};
  m.functions.push_back(std::move(g));
  return m;
}

// Two functions over one weight table: symbolic and derived dims, an absent optional input,
// and attributes of every kind (int, float, string, ints, floats, strings, weight).
ir::Model two_function_model() {
  ir::Model m;
  const int w = m.add_weight(float_weight("w", {8, 8}));
  const int b = m.add_weight(float_weight("b", {8}));
  ir::Weight fill = float_weight("fill", {1});
  const int fill_index = m.add_weight(fill);
  for (const char* name : {"prefill", "decode"}) {
    ir::Graph g;
    g.name = name;
    const ir::Dim seq = std::string(name) == "prefill" ? ir::Dim::symbol("seq") : ir::Dim(1);
    const int x = add_value(g, "x", {1, seq, 8});
    const int wv = add_value(g, "w", {8, 8}, w);
    const int bv = add_value(g, "b", {8}, b);
    const int h = add_value(g, "h", {1, seq, 8});
    const int t = add_value(g, "t", {1, 8, seq});
    const int y = add_value(g, "y", {1, seq, 8});
    add_node(g, "Gemm", {x, wv, bv}, {h},
             {{"alpha", 1.0}, {"transB", int64_t{1}}, {"note", std::string("seed")}});
    add_node(g, "Transpose", {h}, {t}, {{"perm", std::vector<int64_t>{0, 2, 1}}});
    add_node(g, "Clip", {h, -1, -1}, {y},
             {{"bounds", std::vector<double>{-1.0, 1.0}},
              {"names", std::vector<std::string>{"a", "b"}},
              {"value", ir::WeightRef{fill_index}}});
    g.inputs = {x};
    g.outputs = {y, t};
    m.functions.push_back(std::move(g));
  }
  return m;
}

// x [1, 2, 6, 6] -> Conv (4 x 2 x 3 x 3, bias, pads 1) -> Relu -> MaxPool 2 x 2 -> Reshape
// [1, 36] -> MatMul [36, 8] -> Add [8] -> Softmax -> y, and -> LayerNormalization -> z: static
// shapes, so the fuzzer's loads specialize it and run it.
ir::Model network_model() {
  ir::Model m;
  const int cw = m.add_weight(float_weight("conv.w", {4, 2, 3, 3}));
  const int cb = m.add_weight(float_weight("conv.b", {4}));
  const int fw = m.add_weight(float_weight("fc.w", {36, 8}));
  const int fb = m.add_weight(float_weight("fc.b", {8}));
  const int ls = m.add_weight(float_weight("ln.scale", {8}));
  ir::Weight shape;
  shape.name = "shape";
  shape.dtype = ScalarType::Int64;
  shape.sizes = {2};
  const std::vector<int64_t> target = {1, 36};
  shape.data.resize(sizeof(int64_t) * target.size());
  std::memcpy(shape.data.data(), target.data(), shape.data.size());
  const int sh = m.add_weight(shape);
  ir::Graph g;
  g.name = "main";
  const int x = add_value(g, "x", {1, 2, 6, 6});
  const int c = add_value(g, "c", {1, 4, 6, 6});
  const int r = add_value(g, "r", {1, 4, 6, 6});
  const int p = add_value(g, "p", {1, 4, 3, 3});
  const int f = add_value(g, "f", {1, 36});
  const int h = add_value(g, "h", {1, 8});
  const int a = add_value(g, "a", {1, 8});
  const int y = add_value(g, "y", {1, 8});
  const int z = add_value(g, "z", {1, 8});
  const std::vector<int64_t> three = {3, 3}, two = {2, 2}, pads = {1, 1, 1, 1};
  add_node(g, "Conv",
           {x, add_value(g, "conv.w", {4, 2, 3, 3}, cw), add_value(g, "conv.b", {4}, cb)}, {c},
           {{"kernel_shape", three}, {"pads", pads}});
  add_node(g, "Relu", {c}, {r});
  add_node(g, "MaxPool", {r}, {p}, {{"kernel_shape", two}, {"strides", two}});
  add_node(g, "Reshape", {p, add_value(g, "shape", {2}, sh, ScalarType::Int64)}, {f});
  add_node(g, "MatMul", {f, add_value(g, "fc.w", {36, 8}, fw)}, {h});
  add_node(g, "Add", {h, add_value(g, "fc.b", {8}, fb)}, {a});
  add_node(g, "Softmax", {a}, {y}, {{"axis", int64_t{-1}}});
  add_node(g, "LayerNormalization", {a, add_value(g, "ln.scale", {8}, ls)}, {z},
           {{"axis", int64_t{-1}}, {"epsilon", 1e-5}});
  g.inputs = {x};
  g.outputs = {y, z};
  m.functions.push_back(std::move(g));
  return m;
}

std::vector<uint8_t> artifact_payload() {
  namespace artifact = kiln::engine::artifact;
  static const std::vector<uint8_t> packed_bytes(192, 7);
  artifact::FunctionRecord f{"main", {{1, 4}}, 0x1234, 4096, 2};
  artifact::PackedRecord p{{0x5678, "src:ab;dst:BA16a64b"}, {packed_bytes.data(), 192}};
  artifact::PackedRecord q{{0x9abc, "src:ab;dst:ab"}, {packed_bytes.data(), 100}};
  return artifact::write_artifact({f}, {p, q});
}

// Whether `bytes` read as `format` (a seed the readers refuse would start the fuzzer nowhere).
bool reads(EngineFormat format, const std::vector<uint8_t>& bytes) {
  auto copy = kiln::runtime::allocate_aligned(bytes.size(), 64);
  if (!copy.ok()) return false;
  std::memcpy(copy->get(), bytes.data(), bytes.size());
  const kiln::runtime::Span<const uint8_t> view(copy->get(), bytes.size());
  kiln::runtime::Status status;
  switch (format) {
    case EngineFormat::Package:
      status = kiln::engine::package::PackageView::open(view).status();
      break;
    case EngineFormat::Artifact:
      status = kiln::engine::artifact::read_artifact(view).status();
      break;
    case EngineFormat::Entry: {
      const auto key = kiln::fuzz::fuzz_cache_key();
      status = kiln::engine::cache::validate_entry(view, key.encoded(), key.hash()).status();
      break;
    }
  }
  if (!status.ok()) std::cerr << "seed does not read: " << status << "\n";
  return status.ok();
}

bool write_seed(const std::filesystem::path& path, EngineFormat format,
                const std::vector<uint8_t>& bytes) {
  if (!reads(format, bytes)) return false;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  const char tag = static_cast<char>(format);
  out.write(&tag, 1);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
  if (!out) std::cerr << "write seed '" << path.string() << "': failed\n";
  return static_cast<bool>(out);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: " << argv[0] << " OUTDIR\n";
    return 2;
  }
  const std::filesystem::path outdir = argv[1];
  std::error_code ec;
  std::filesystem::create_directories(outdir, ec);
  if (ec) {
    std::cerr << "create directory '" << outdir.string() << "': " << ec.message() << "\n";
    return 1;
  }
  bool ok = true;
  int i = 0;
  for (const ir::Model& model : {small_model(), two_function_model(), network_model()}) {
    auto bytes = kiln::engine::package::write_package(model);
    if (!bytes.ok()) {
      std::cerr << "package seed " << i << ": " << bytes.status() << "\n";
      return 1;
    }
    ok = write_seed(outdir / ("package" + std::to_string(i++) + ".seed"), EngineFormat::Package,
                    *bytes) &&
         ok;
  }
  const std::vector<uint8_t> payload = artifact_payload();
  ok = write_seed(outdir / "artifact.seed", EngineFormat::Artifact, payload) && ok;
  const auto entry = kiln::engine::cache::encode_entry(kiln::fuzz::fuzz_cache_key(),
                                                       {{payload.data(), payload.size()}});
  ok = write_seed(outdir / "entry.seed", EngineFormat::Entry, entry) && ok;
  return ok ? 0 : 1;
}
