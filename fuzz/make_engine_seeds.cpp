// Writes the seed corpus of engine_formats_fuzzer: model packages of a one-function and a
// two-function model (shared weights, symbolic dims, every kind of attribute), of a small
// network whose ops the engine runs on oneDNN and its own loops (Conv, pooling, MatMul, Softmax,
// LayerNormalization), of a transformer block (attention, Gelu; a symbolic batch, so shape-
// generic plans run it too) and of a convolutional network (Winograd's shape, depthwise,
// transposed, BatchNormalization, an in-place Concat), a compiled artifact, and a cache entry
// holding it, each behind its format byte (engine_fuzz_inputs.h).
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

ir::Weight float_weight(const std::string& name, std::vector<int64_t> sizes, float scale = 1.0f) {
  ir::Weight w;
  w.name = name;
  w.dtype = ScalarType::Float32;
  w.sizes = std::move(sizes);
  int64_t count = 1;
  for (int64_t s : w.sizes) count *= s;
  std::vector<float> values(static_cast<size_t>(count));
  for (size_t i = 0; i < values.size(); ++i) {
    values[i] = scale * (0.25f * static_cast<float>(i % 7) - 0.5f);
  }
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

// [count] values from 0.5 to 2 (a variance).
ir::Weight positive_weight(const std::string& name, int64_t count) {
  ir::Weight w = float_weight(name, {count});
  std::vector<float> values(static_cast<size_t>(count));
  for (size_t i = 0; i < values.size(); ++i) values[i] = 0.5f + 0.25f * static_cast<float>(i % 7);
  std::memcpy(w.data.data(), values.data(), w.data.size());
  return w;
}

ir::Weight int_weight(const std::string& name, const std::vector<int64_t>& values) {
  ir::Weight w;
  w.name = name;
  w.dtype = ScalarType::Int64;
  w.sizes = {static_cast<int64_t>(values.size())};
  w.data.resize(sizeof(int64_t) * values.size());
  std::memcpy(w.data.data(), values.data(), w.data.size());
  return w;
}

// A function's builder over a model's weight table.
struct Builder {
  ir::Model& m;
  ir::Graph& g;
  int weight(ir::Weight w) {
    std::vector<ir::Dim> shape(w.sizes.begin(), w.sizes.end());
    const ScalarType dtype = w.dtype;
    const std::string name = w.name;
    return add_value(g, name, std::move(shape), m.add_weight(std::move(w)), dtype);
  }
  int value(const std::string& name, std::vector<ir::Dim> shape) {
    return add_value(g, name, std::move(shape));
  }
};

// A transformer block over x [b, 64, 32] (b symbolic, so a load expecting frequent reshapes
// runs it on a shape-generic plan): LayerNormalization, a fused QKV MatMul split into two heads,
// attention (scores of 64 columns scaled, Softmax, context), the output projection and a
// residual, then an MLP with Gelu and a second residual. Small weights keep every value within
// the fuzzer's reference check's scale.
ir::Model attention_model() {
  ir::Model m;
  ir::Graph g;
  g.name = "main";
  Builder b{m, g};
  const ir::Dim batch = ir::Dim::symbol("b");
  const int64_t seq = 64, hidden = 32, heads = 2, head = 16;
  const int x = add_value(g, "x", {batch, seq, hidden});
  auto v = [&](const std::string& name, std::vector<ir::Dim> shape) {
    return b.value(name, shape);
  };
  const int ln1 = v("ln1", {batch, seq, hidden});
  add_node(g, "LayerNormalization",
           {x, b.weight(float_weight("ln1.scale", {hidden})),
            b.weight(float_weight("ln1.bias", {hidden}, 0.25f))},
           {ln1}, {{"axis", int64_t{-1}}, {"epsilon", 1e-5}});
  const int qkv = v("qkv", {batch, seq, 3 * hidden});
  const int qkv_b = v("qkv_b", {batch, seq, 3 * hidden});
  add_node(g, "MatMul", {ln1, b.weight(float_weight("qkv.w", {hidden, 3 * hidden}, 0.125f))},
           {qkv});
  add_node(g, "Add", {qkv, b.weight(float_weight("qkv.b", {3 * hidden}, 0.125f))}, {qkv_b});
  const int q = v("q", {batch, seq, hidden}), k = v("k", {batch, seq, hidden}),
            val = v("v", {batch, seq, hidden});
  add_node(g, "Split", {qkv_b, b.weight(int_weight("split", {hidden, hidden, hidden}))},
           {q, k, val}, {{"axis", int64_t{-1}}});
  const int heads_shape = b.weight(int_weight("heads", {0, seq, heads, head}));
  auto split_heads = [&](int in, const std::string& name, std::vector<int64_t> perm,
                         std::vector<ir::Dim> out_shape) {
    const int r = v(name + ".r", {batch, seq, heads, head});
    const int t = v(name + ".t", std::move(out_shape));
    add_node(g, "Reshape", {in, heads_shape}, {r});
    add_node(g, "Transpose", {r}, {t}, {{"perm", std::move(perm)}});
    return t;
  };
  const int qh = split_heads(q, "q", {0, 2, 1, 3}, {batch, heads, seq, head});
  const int kt = split_heads(k, "k", {0, 2, 3, 1}, {batch, heads, head, seq});
  const int vh = split_heads(val, "v", {0, 2, 1, 3}, {batch, heads, seq, head});
  const int scores = v("scores", {batch, heads, seq, seq});
  const int scaled = v("scaled", {batch, heads, seq, seq});
  const int probs = v("probs", {batch, heads, seq, seq});
  add_node(g, "MatMul", {qh, kt}, {scores});
  ir::Weight scale = float_weight("scale", {1});
  const float inv_sqrt_head = 0.25f;
  std::memcpy(scale.data.data(), &inv_sqrt_head, sizeof inv_sqrt_head);
  add_node(g, "Mul", {scores, b.weight(std::move(scale))}, {scaled});
  add_node(g, "Softmax", {scaled}, {probs}, {{"axis", int64_t{-1}}});
  const int context = v("context", {batch, heads, seq, head});
  const int merged_t = v("merged.t", {batch, seq, heads, head});
  const int merged = v("merged", {batch, seq, hidden});
  add_node(g, "MatMul", {probs, vh}, {context});
  add_node(g, "Transpose", {context}, {merged_t}, {{"perm", std::vector<int64_t>{0, 2, 1, 3}}});
  add_node(g, "Reshape", {merged_t, b.weight(int_weight("merge", {0, seq, hidden}))}, {merged});
  const int proj = v("proj", {batch, seq, hidden}), proj_b = v("proj_b", {batch, seq, hidden});
  const int res1 = v("res1", {batch, seq, hidden});
  add_node(g, "MatMul", {merged, b.weight(float_weight("proj.w", {hidden, hidden}, 0.125f))},
           {proj});
  add_node(g, "Add", {proj, b.weight(float_weight("proj.b", {hidden}, 0.125f))}, {proj_b});
  add_node(g, "Add", {proj_b, x}, {res1});
  const int ln2 = v("ln2", {batch, seq, hidden});
  add_node(g, "LayerNormalization",
           {res1, b.weight(float_weight("ln2.scale", {hidden})),
            b.weight(float_weight("ln2.bias", {hidden}, 0.25f))},
           {ln2}, {{"axis", int64_t{-1}}, {"epsilon", 1e-5}});
  const int up = v("up", {batch, seq, 2 * hidden}), up_b = v("up_b", {batch, seq, 2 * hidden});
  const int act = v("act", {batch, seq, 2 * hidden});
  add_node(g, "MatMul", {ln2, b.weight(float_weight("fc1.w", {hidden, 2 * hidden}, 0.125f))}, {up});
  add_node(g, "Add", {up, b.weight(float_weight("fc1.b", {2 * hidden}, 0.125f))}, {up_b});
  add_node(g, "Gelu", {up_b}, {act}, {{"approximate", std::string("none")}});
  const int down = v("down", {batch, seq, hidden}), down_b = v("down_b", {batch, seq, hidden});
  const int y = v("y", {batch, seq, hidden});
  add_node(g, "MatMul", {act, b.weight(float_weight("fc2.w", {2 * hidden, hidden}, 0.125f))},
           {down});
  add_node(g, "Add", {down, b.weight(float_weight("fc2.b", {hidden}, 0.125f))}, {down_b});
  add_node(g, "Add", {down_b, res1}, {y});
  g.inputs = {x};
  g.outputs = {y};
  m.functions.push_back(std::move(g));
  return m;
}

// x [1, 16, 8, 8] -> Conv 3 x 3 (16 -> 16, pads 1: Winograd's shape) -> BatchNormalization ->
// Relu -> depthwise Conv 3 x 3 (group 16) -> Sigmoid, times itself's input (SiLU) -> Concat with
// the Relu's result -> ConvTranspose 2 x 2 stride 2 (32 -> 8) -> AveragePool 2 x 2 ->
// GlobalAveragePool -> Flatten -> Gemm (transB) -> y: the engine's blocked layouts, its
// depthwise, transposed and pointwise paths and an in-place Concat.
ir::Model conv_model() {
  ir::Model m;
  ir::Graph g;
  g.name = "main";
  Builder b{m, g};
  const int x = add_value(g, "x", {1, 16, 8, 8});
  auto v = [&](const std::string& name, std::vector<ir::Dim> shape) {
    return b.value(name, shape);
  };
  const std::vector<int64_t> three = {3, 3}, two = {2, 2}, pads = {1, 1, 1, 1};
  const int c1 = v("c1", {1, 16, 8, 8}), bn = v("bn", {1, 16, 8, 8}), r = v("r", {1, 16, 8, 8});
  add_node(g, "Conv",
           {x, b.weight(float_weight("c1.w", {16, 16, 3, 3}, 0.125f)),
            b.weight(float_weight("c1.b", {16}))},
           {c1}, {{"kernel_shape", three}, {"pads", pads}});
  add_node(g, "BatchNormalization",
           {c1, b.weight(float_weight("bn.scale", {16})), b.weight(float_weight("bn.bias", {16})),
            b.weight(float_weight("bn.mean", {16})), b.weight(positive_weight("bn.var", 16))},
           {bn}, {{"epsilon", 1e-5}});
  add_node(g, "Relu", {bn}, {r});
  const int dw = v("dw", {1, 16, 8, 8}), sig = v("sig", {1, 16, 8, 8}),
            silu = v("silu", {1, 16, 8, 8});
  add_node(g, "Conv", {r, b.weight(float_weight("dw.w", {16, 1, 3, 3}, 0.5f))}, {dw},
           {{"kernel_shape", three}, {"pads", pads}, {"group", int64_t{16}}});
  add_node(g, "Sigmoid", {dw}, {sig});
  add_node(g, "Mul", {dw, sig}, {silu});
  const int cat = v("cat", {1, 32, 8, 8});
  add_node(g, "Concat", {silu, r}, {cat}, {{"axis", int64_t{1}}});
  const int up = v("up", {1, 8, 16, 16}), pool = v("pool", {1, 8, 8, 8});
  add_node(g, "ConvTranspose",
           {cat, b.weight(float_weight("up.w", {32, 8, 2, 2}, 0.25f)),
            b.weight(float_weight("up.b", {8}))},
           {up}, {{"kernel_shape", two}, {"strides", two}});
  add_node(g, "AveragePool", {up}, {pool}, {{"kernel_shape", two}, {"strides", two}});
  const int gap = v("gap", {1, 8, 1, 1}), flat = v("flat", {1, 8}), y = v("y", {1, 4});
  add_node(g, "GlobalAveragePool", {pool}, {gap});
  add_node(g, "Flatten", {gap}, {flat}, {{"axis", int64_t{1}}});
  add_node(g, "Gemm",
           {flat, b.weight(float_weight("fc.w", {4, 8})), b.weight(float_weight("fc.b", {4}))}, {y},
           {{"transB", int64_t{1}}});
  g.inputs = {x};
  g.outputs = {y, cat};
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

// `flags`: what the format byte says beyond the format (engine_fuzz_inputs.h).
bool write_seed(const std::filesystem::path& path, EngineFormat format,
                const std::vector<uint8_t>& bytes, kiln::fuzz::PackageFlags flags = {}) {
  if (!reads(format, bytes)) return false;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  const char tag = static_cast<char>(kiln::fuzz::format_byte(format, flags));
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
  for (const ir::Model& model :
       {small_model(), two_function_model(), network_model(), attention_model(), conv_model()}) {
    auto bytes = kiln::engine::package::write_package(model);
    if (!bytes.ok()) {
      std::cerr << "package seed " << i << ": " << bytes.status() << "\n";
      return 1;
    }
    ok = write_seed(outdir / ("package" + std::to_string(i) + ".seed"), EngineFormat::Package,
                    *bytes) &&
         ok;
    // The models of symbolic inputs, loaded for shape-generic plans too; the transformer
    // block and the convolutional network on two threads.
    if (i == 1 || i == 3) {
      ok = write_seed(outdir / ("package" + std::to_string(i) + "-reshapes.seed"),
                      EngineFormat::Package, *bytes, {true, false}) &&
           ok;
    }
    if (i == 3 || i == 4) {
      ok = write_seed(outdir / ("package" + std::to_string(i) + "-threads.seed"),
                      EngineFormat::Package, *bytes, {i == 3, true}) &&
           ok;
    }
    ++i;
  }
  const std::vector<uint8_t> payload = artifact_payload();
  ok = write_seed(outdir / "artifact.seed", EngineFormat::Artifact, payload) && ok;
  const auto entry = kiln::engine::cache::encode_entry(kiln::fuzz::fuzz_cache_key(),
                                                       {{payload.data(), payload.size()}});
  ok = write_seed(outdir / "entry.seed", EngineFormat::Entry, entry) && ok;
  return ok ? 0 : 1;
}
