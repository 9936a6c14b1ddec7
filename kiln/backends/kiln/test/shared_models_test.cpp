// Shared loading (DESIGN.md §3): the registry's load-once, wait and takeover rules, ordered with
// the test fault hook, and KilnBackend delegates sharing one loaded model.
#include <kiln/backends/kiln/kiln_backend.h>
#include <kiln/backends/kiln/shared_models.h>
#include <kiln/engine/ir/graph.h>
#include <kiln/engine/package/package.h>
#include <kiln/runtime/backend/named_data.h>
#include <kiln/runtime/backend/options.h>
#include <kiln/runtime/core/evalue.h>
#include <kiln/testing/program_builder.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <random>
#include <set>
#include <thread>

namespace kiln::backends {
namespace {

namespace ir = engine::ir;
using runtime::Error;
using runtime::EValue;
using runtime::Result;
using runtime::Status;
using runtime::Tensor;
using testing::F32;
using ::testing::HasSubstr;

constexpr const char* kPackageKey = "kiln/package/shared";
constexpr int64_t kBatch = 2;
constexpr int64_t kIn = 4;
constexpr int64_t kOut = 3;
constexpr int kThreads = 8;

std::vector<float> random_floats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// y = Relu(MatMul(x, W) + b), x: [batch, 4] (run with batch 2); `seed` picks the weights (and
// so the package hash).
struct Mlp {
  std::vector<float> w, b;
  ir::Model model;

  explicit Mlp(uint32_t seed, ir::Dim batch = kBatch)
      : w(random_floats(kIn * kOut, seed)), b(random_floats(kOut, ~seed)) {
    ir::Graph g;
    g.name = "main";
    auto value = [&](const std::string& name, std::vector<ir::Dim> shape, int weight = -1) {
      ir::Value v;
      v.name = name;
      v.type.shape = std::move(shape);
      v.weight = weight;
      return g.add_value(std::move(v));
    };
    auto weight = [&](const std::string& name, std::vector<int64_t> sizes,
                      const std::vector<float>& data) {
      ir::Weight weight;
      weight.name = name;
      weight.sizes = sizes;
      weight.data = testing::to_bytes(data);
      return value(name, std::vector<ir::Dim>(sizes.begin(), sizes.end()),
                   model.add_weight(std::move(weight)));
    };
    auto node = [&](const std::string& op, std::vector<int> in, int out) {
      ir::Node n;
      n.name = op + "_" + std::to_string(g.nodes.size());
      n.op = op;
      n.inputs = std::move(in);
      n.outputs = {out};
      g.nodes.push_back(std::move(n));
    };
    int x = value("x", {batch, kIn});
    int wv = weight("W", {kIn, kOut}, w);
    int bv = weight("b", {kOut}, b);
    int mm = value("mm", {batch, kOut});
    int sum = value("sum", {batch, kOut});
    int y = value("y", {batch, kOut});
    node("MatMul", {x, wv}, mm);
    node("Add", {mm, bv}, sum);
    node("Relu", {sum}, y);
    g.inputs = {x};
    g.outputs = {y};
    model.functions.push_back(std::move(g));
  }

  std::vector<float> reference(const std::vector<float>& x) const {
    std::vector<float> y(kBatch * kOut);
    for (int64_t r = 0; r < kBatch; ++r) {
      for (int64_t c = 0; c < kOut; ++c) {
        float acc = b[c];
        for (int64_t k = 0; k < kIn; ++k) acc += x[r * kIn + k] * w[k * kOut + c];
        y[r * kOut + c] = std::max(acc, 0.0f);
      }
    }
    return y;
  }
};

// The package of an Mlp as named data, 8-byte aligned. `owned`: the buffers it hands out keep
// the bytes alive; otherwise they are views, valid only while this map lives.
class PackageData : public runtime::NamedDataMap {
 public:
  PackageData(const ir::Model& model, bool owned) : owned_(owned) {
    auto bytes = engine::package::write_package(model);
    EXPECT_TRUE(bytes.ok()) << bytes.status();
    size_ = bytes->size();
    auto buffer = runtime::allocate_aligned(size_);
    EXPECT_TRUE(buffer.ok());
    bytes_ = std::shared_ptr<uint8_t>(buffer->release(), runtime::FreeDeleter());
    std::memcpy(bytes_.get(), bytes->data(), size_);
  }
  Result<runtime::FreeableBuffer> get_data(std::string_view key) const override {
    if (key != kPackageKey) return Status(Error::NotFound, "no named data '" + std::string(key));
    if (!owned_) return runtime::FreeableBuffer(bytes_.get(), size_);
    return runtime::FreeableBuffer(bytes_.get(), size_, bytes_);
  }
  std::vector<std::string> keys() const override { return {kPackageKey}; }
  // Overwrites the bytes, as reusing freed memory would.
  void scribble() { std::memset(bytes_.get(), 0xab, size_); }

 private:
  bool owned_;
  size_t size_ = 0;
  std::shared_ptr<uint8_t> bytes_;
};

const std::string kManifest =
    std::string(R"({"package": ")") + kPackageKey +
    R"(", "input_names": ["x"], "output_names": ["y"], "function": "main"})";

// One KilnBackend delegate, initialized and run directly (not through a Method).
class Delegate {
 public:
  static Result<std::unique_ptr<Delegate>> init(const runtime::NamedDataMap& data, bool share) {
    std::vector<runtime::BackendOption> options = {{"share_multifunction_model", share},
                                                   {"cache_dir", std::string()},
                                                   {"num_threads", int64_t{1}}};
    runtime::BackendInitContext context("forward", "forward_0", options, &data);
    runtime::FreeableBuffer blob(kManifest.data(), kManifest.size());
    auto delegate = std::make_unique<Delegate>();
    KILN_ASSIGN_OR_RETURN(delegate->handle_, KilnBackend().init(context, &blob, {}));
    return delegate;
  }
  ~Delegate() {
    if (handle_ != nullptr) KilnBackend().destroy(handle_);
  }
  const engine::LoadedModel* model() const { return KilnBackend::model_of(handle_); }

  // Runs on random x (from `seed`) and checks y against the reference of `mlp`.
  void expect_runs(const Mlp& mlp, uint32_t seed) {
    std::vector<float> x = random_floats(kBatch * kIn, seed);
    std::vector<float> y(kBatch * kOut, -1.0f);
    EValue in(Tensor(F32, {kBatch, kIn}, x.data()));
    EValue out(Tensor(F32, {kBatch, kOut}, y.data()));
    EValue* inputs[] = {&in};
    EValue* outputs[] = {&out};
    runtime::BackendExecutionContext context("forward");
    auto status = KilnBackend().execute(context, handle_, inputs, outputs);
    ASSERT_TRUE(status.ok()) << status;
    std::vector<float> want = mlp.reference(x);
    for (size_t i = 0; i < y.size(); ++i) ASSERT_NEAR(y[i], want[i], 1e-5f) << "element " << i;
  }

 private:
  runtime::DelegateHandle* handle_ = nullptr;
};

// A real loaded model of `mlp`, bundled as the backend does.
Result<std::shared_ptr<SharedModel>> load_shared(const Mlp& mlp) {
  KILN_ASSIGN_OR_RETURN(auto bytes, engine::package::write_package(mlp.model));
  KILN_ASSIGN_OR_RETURN(auto copy, runtime::allocate_aligned(bytes.size()));
  std::memcpy(copy.get(), bytes.data(), bytes.size());
  KILN_ASSIGN_OR_RETURN(auto view, engine::package::PackageView::open(
                                       runtime::Span<const uint8_t>(copy.get(), bytes.size())));
  auto package = std::make_unique<engine::package::PackageView>(std::move(view));
  KILN_ASSIGN_OR_RETURN(
      auto options, engine::specialization::SpecializationOptions::from_compute_unit("all", false));
  KILN_ASSIGN_OR_RETURN(auto model, engine::ModelLoader::load(*package, options));
  return SharedModel::adopt({}, std::move(copy), std::move(package), std::move(model));
}

// Counts the threads that reached BeforeSharedLoadWait; removes the hook when destroyed.
class WaitCounter {
 public:
  WaitCounter() {
    set_shared_load_fault_hook([this](SharedLoadFaultPoint point) {
      if (point == SharedLoadFaultPoint::BeforeSharedLoadWait) ++waiting_;
    });
  }
  ~WaitCounter() { set_shared_load_fault_hook({}); }
  // Blocks until `n` threads reached the wait point; false after 20 s.
  bool await(int n) const {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (waiting_.load() < n) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return true;
  }
  int waiting() const { return waiting_.load(); }

 private:
  std::atomic<int> waiting_{0};
};

const SharedModelKey kKey{42, "cpu,gpu,npu;prefer=cpu", ""};

TEST(SharedModelRegistry, ConcurrentCallersLoadOnceAndShareTheModel) {
  SharedModelRegistry registry;
  WaitCounter counter;
  Mlp mlp(1);
  std::atomic<int> loads{0};
  std::vector<std::shared_ptr<SharedModel>> got(kThreads);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      auto result = registry.get_or_load(kKey, [&]() -> Result<std::shared_ptr<SharedModel>> {
        ++loads;
        // Every other caller arrives while this load is in flight.
        if (!counter.await(kThreads - 1)) return Status(Error::Internal, "waiters never came");
        return load_shared(mlp);
      });
      ASSERT_TRUE(result.ok()) << result.status();
      got[i] = *result;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(loads.load(), 1);
  ASSERT_NE(got[0], nullptr);
  ASSERT_NE(got[0]->model, nullptr);
  for (const auto& model : got) EXPECT_EQ(model, got[0]);
  auto counters = registry.counters();
  EXPECT_EQ(counters.loads_started, 1u);
  EXPECT_EQ(counters.waits, uint64_t{kThreads - 1});
  EXPECT_EQ(counters.shared_hits, uint64_t{kThreads - 1});
  EXPECT_EQ(counters.takeovers, 0u);
  EXPECT_EQ(registry.find(kKey), got[0]);
}

TEST(SharedModelRegistry, OneWaiterTakesOverWhenTheFirstLoadFails) {
  SharedModelRegistry registry;
  WaitCounter counter;
  Mlp mlp(2);
  std::atomic<int> loads{0};
  std::vector<Result<std::shared_ptr<SharedModel>>> got(kThreads, Status(Error::Internal, "unset"));
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      got[i] = registry.get_or_load(kKey, [&]() -> Result<std::shared_ptr<SharedModel>> {
        if (loads++ == 0) {
          // Fail only once every other caller is about to block on this load.
          if (!counter.await(kThreads - 1)) return Status(Error::Internal, "waiters never came");
          return Status(Error::NotSupported, "first load fails");
        }
        return load_shared(mlp);
      });
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(loads.load(), 2);
  int failed = 0;
  std::set<SharedModel*> models;
  for (const auto& result : got) {
    if (!result.ok()) {
      ++failed;
      EXPECT_EQ(result.status().code(), Error::NotSupported) << result.status();
      EXPECT_THAT(result.status().message(), HasSubstr("first load fails"));
    } else {
      models.insert(result->get());
    }
  }
  EXPECT_EQ(failed, 1);
  ASSERT_EQ(models.size(), 1u);
  EXPECT_NE(*models.begin(), nullptr);
  auto counters = registry.counters();
  EXPECT_EQ(counters.loads_started, 2u);
  EXPECT_EQ(counters.takeovers, 1u);
  EXPECT_EQ(counters.waits, uint64_t{kThreads - 1});
  EXPECT_EQ(counters.shared_hits, uint64_t{kThreads - 2});
  EXPECT_EQ(counter.waiting(), kThreads - 1);
}

TEST(SharedModelRegistry, DifferentKeysLoadSeparately) {
  SharedModelRegistry registry;
  Mlp mlp(3);
  int loads = 0;
  auto loader = [&]() -> Result<std::shared_ptr<SharedModel>> {
    ++loads;
    return load_shared(mlp);
  };
  std::vector<SharedModelKey> keys = {kKey,
                                      {43, kKey.specialization, ""},
                                      {42, "cpu;prefer=cpu", ""},
                                      {42, kKey.specialization, "elsewhere"}};
  std::set<SharedModel*> models;
  std::vector<std::shared_ptr<SharedModel>> held;
  for (const auto& key : keys) {
    auto result = registry.get_or_load(key, loader);
    ASSERT_TRUE(result.ok()) << result.status();
    models.insert(result->get());
    held.push_back(*result);
  }
  EXPECT_EQ(loads, 4);
  EXPECT_EQ(models.size(), 4u);
  auto again = registry.get_or_load(keys[2], loader);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->get(), held[2].get());
  EXPECT_EQ(loads, 4);
  EXPECT_EQ(registry.counters().shared_hits, 1u);
}

TEST(SharedModelRegistry, ExpiredEntryIsLoadedAgain) {
  SharedModelRegistry registry;
  Mlp mlp(4);
  int loads = 0;
  auto loader = [&]() -> Result<std::shared_ptr<SharedModel>> {
    ++loads;
    return load_shared(mlp);
  };
  auto first = registry.get_or_load(kKey, loader);
  ASSERT_TRUE(first.ok()) << first.status();
  first = Status(Error::Internal, "dropped");  // the last holder lets go
  EXPECT_EQ(registry.find(kKey), nullptr);
  auto second = registry.get_or_load(kKey, loader);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_NE(*second, nullptr);
  EXPECT_EQ(loads, 2);
  EXPECT_EQ(registry.counters().loads_started, 2u);
}

TEST(SharedModelRegistry, FailedOrEmptyLoadClearsTheInFlightMark) {
  SharedModelRegistry registry;
  auto failed = registry.get_or_load(
      kKey, []() -> Result<std::shared_ptr<SharedModel>> { return Status(Error::NotFound, "x"); });
  EXPECT_EQ(failed.status().code(), Error::NotFound);
  auto empty = registry.get_or_load(kKey, []() -> Result<std::shared_ptr<SharedModel>> {
    return std::shared_ptr<SharedModel>();
  });
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.status().code(), Error::InvalidArgument);
  EXPECT_THAT(empty.status().message(), HasSubstr("the loader returned no model"));
  Mlp mlp(5);
  auto loaded = registry.get_or_load(kKey, [&] { return load_shared(mlp); });
  ASSERT_TRUE(loaded.ok()) << loaded.status();  // not blocked by a stale in-flight mark
  EXPECT_EQ(registry.counters().loads_started, 3u);
}

TEST(KilnBackendSharing, DelegatesWithSharingOnShareOneModel) {
  Mlp mlp(11);
  PackageData data(mlp.model, /*owned=*/true);
  auto before = SharedModelRegistry::instance().counters();
  auto a = Delegate::init(data, true);
  ASSERT_TRUE(a.ok()) << a.status();
  auto b = Delegate::init(data, true);
  ASSERT_TRUE(b.ok()) << b.status();
  auto own = Delegate::init(data, false);
  ASSERT_TRUE(own.ok()) << own.status();
  EXPECT_EQ((*a)->model(), (*b)->model());
  EXPECT_NE((*own)->model(), (*a)->model());
  auto after = SharedModelRegistry::instance().counters();
  EXPECT_EQ(after.loads_started - before.loads_started, 1u);
  EXPECT_EQ(after.shared_hits - before.shared_hits, 1u);
  (*a)->expect_runs(mlp, 1);
  (*b)->expect_runs(mlp, 2);
  (*own)->expect_runs(mlp, 3);
}

TEST(KilnBackendSharing, WithSharingOffEachDelegateLoadsItsOwn) {
  Mlp mlp(12);
  PackageData data(mlp.model, /*owned=*/true);
  auto before = SharedModelRegistry::instance().counters();
  auto a = Delegate::init(data, false);
  ASSERT_TRUE(a.ok()) << a.status();
  auto b = Delegate::init(data, false);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_NE((*a)->model(), (*b)->model());
  auto after = SharedModelRegistry::instance().counters();
  EXPECT_EQ(after.loads_started, before.loads_started);
  (*a)->expect_runs(mlp, 4);
  (*b)->expect_runs(mlp, 5);
}

TEST(KilnBackendSharing, SharedModelOutlivesTheDelegateThatLoadedIt) {
  // A symbolic batch: the first run specializes, reading the weights from the package bytes.
  Mlp mlp(13, ir::Dim::symbol("batch"));
  // Views without an owner: the first delegate must not leave the shared model reading them.
  auto first_data = std::make_unique<PackageData>(mlp.model, /*owned=*/false);
  auto first = Delegate::init(*first_data, true);
  ASSERT_TRUE(first.ok()) << first.status();
  PackageData second_data(mlp.model, /*owned=*/false);
  auto second = Delegate::init(second_data, true);
  ASSERT_TRUE(second.ok()) << second.status();
  ASSERT_EQ((*first)->model(), (*second)->model());
  first->reset();
  first_data->scribble();
  first_data.reset();
  (*second)->expect_runs(mlp, 6);
}

TEST(KilnBackendSharing, ConcurrentRunsThroughOneSharedModelAreCorrect) {
  Mlp mlp(14);
  PackageData data(mlp.model, /*owned=*/true);
  std::vector<std::unique_ptr<Delegate>> delegates;
  for (int i = 0; i < 2; ++i) {
    auto delegate = Delegate::init(data, true);
    ASSERT_TRUE(delegate.ok()) << delegate.status();
    delegates.push_back(std::move(delegate).get());
  }
  ASSERT_EQ(delegates[0]->model(), delegates[1]->model());
  std::vector<std::thread> threads;
  for (int i = 0; i < 2; ++i) {
    threads.emplace_back([&, i] {
      for (uint32_t call = 0; call < 200; ++call) {
        delegates[i]->expect_runs(mlp, call * 2 + static_cast<uint32_t>(i));
        if (::testing::Test::HasFailure()) return;
      }
    });
  }
  for (auto& t : threads) t.join();
}

}  // namespace
}  // namespace kiln::backends
