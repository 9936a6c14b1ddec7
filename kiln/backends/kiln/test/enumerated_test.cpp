// KilnBackend with an enumerated manifest: a package of several static functions, one per input
// shape, each computing something different (x + 1, x + 2, x + 3) so the test sees which one ran.
// Each listed shape runs its function; an unlisted shape runs nothing; init checks every listed
// function and binds them all, or fails.
#include <kiln/backends/kiln/kiln_backend.h>
#include <kiln/backends/kiln/test/kiln_test_programs.h>
#include <kiln/engine/ir/graph.h>
#include <kiln/engine/loader/background_stores.h>
#include <kiln/engine/loader/model_loader.h>
#include <kiln/engine/package/package.h>
#include <kiln/runtime/backend/named_data.h>
#include <kiln/runtime/backend/registry.h>
#include <kiln/runtime/core/data_loader.h>
#include <kiln/runtime/executor/method.h>
#include <kiln/runtime/executor/program.h>
#include <kiln/testing/program_builder.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

namespace kiln::backends {
namespace {

namespace ir = engine::ir;
using runtime::Error;
using runtime::EValue;
using runtime::Result;
using runtime::ShapeDynamism;
using runtime::Tensor;
using testing::F32;
using ::testing::HasSubstr;
using testing::ProgramBuilder;

constexpr const char* kPackageKey = "kiln/package/enumerated";

// Adds function `name`: y = x + `addend` for x of `shape` (a weight of shape [1] broadcast).
void add_function(ir::Model& model, const std::string& name, std::vector<ir::Dim> shape,
                  float addend, runtime::ScalarType dtype = F32) {
  ir::Graph g;
  g.name = name;
  ir::Value x;
  x.name = "x";
  x.type.dtype = dtype;
  x.type.shape = shape;
  int xi = g.add_value(std::move(x));
  ir::Weight w;
  w.name = name + "_addend";
  w.sizes = {1};
  w.data = testing::to_bytes({addend});
  ir::Value c;
  c.name = w.name;
  c.type.shape = {1};
  c.weight = model.add_weight(std::move(w));
  int ci = g.add_value(std::move(c));
  ir::Value y;
  y.name = "y";
  y.type.dtype = dtype;
  y.type.shape = std::move(shape);
  int yi = g.add_value(std::move(y));
  ir::Node n;
  n.name = "Add_0";
  n.op = "Add";
  n.inputs = {xi, ci};
  n.outputs = {yi};
  g.nodes.push_back(std::move(n));
  g.inputs = {xi};
  g.outputs = {yi};
  model.functions.push_back(std::move(g));
}

// add_one: [1, 4] -> x + 1; add_two: [1, 8] -> x + 2; add_three: [2, 4] -> x + 3;
// add_any: [batch, 4] -> x + 9 and add_square: [n, n] -> x + 6 (symbolic).
std::vector<uint8_t> package() {
  ir::Model model;
  add_function(model, "add_square", {ir::Dim::symbol("n"), ir::Dim::symbol("n")}, 6.0f);
  add_function(model, "add_one", {1, 4}, 1.0f);
  add_function(model, "add_two", {1, 8}, 2.0f);
  add_function(model, "add_three", {2, 4}, 3.0f);
  add_function(model, "add_any", {ir::Dim::symbol("batch"), 4}, 9.0f);
  auto bytes = engine::package::write_package(model);
  EXPECT_TRUE(bytes.ok()) << bytes.status();
  return bytes.ok() ? *bytes : std::vector<uint8_t>{};
}

std::string entry(const std::string& function, const std::string& shape) {
  return R"({"function": ")" + function + R"(", "input_shapes": [)" + shape + "]}";
}

std::string enumerated_manifest(const std::vector<std::string>& entries) {
  std::string list;
  for (const auto& e : entries) list += (list.empty() ? "" : ", ") + e;
  return R"({"package": ")" + std::string(kPackageKey) +
         R"(", "input_names": ["x"], "output_names": ["y"], "enumerated": true,
             "enumerated_functions": [)" +
         list + "]}";
}

std::string three_functions() {
  return enumerated_manifest(
      {entry("add_one", "[1, 4]"), entry("add_two", "[1, 8]"), entry("add_three", "[2, 4]")});
}

// A delegate made by calling KilnBackend::init directly; destroyed with this object.
class Delegate {
 public:
  static Result<std::unique_ptr<Delegate>> init(const std::string& manifest) {
    auto d = std::make_unique<Delegate>();
    d->backend_ = runtime::get_backend("KilnBackend");
    if (d->backend_ == nullptr) return runtime::Status(Error::NotFound, "no KilnBackend");
    runtime::BackendInitContext context("forward", "forward_0", {}, &d->named_data_);
    runtime::FreeableBuffer blob(manifest.data(), manifest.size());
    KILN_ASSIGN_OR_RETURN(d->handle_, d->backend_->init(context, &blob, {}));
    return d;
  }
  Delegate() : named_data_(package(), kPackageKey) {}
  ~Delegate() {
    if (handle_ != nullptr) backend_->destroy(handle_);
  }
  runtime::DelegateHandle* handle() const { return handle_; }
  runtime::Status execute(Tensor& x, Tensor& y) const {
    EValue in(x), out(y);
    EValue* inputs[] = {&in};
    EValue* outputs[] = {&out};
    runtime::BackendExecutionContext context("forward");
    auto status = backend_->execute(context, handle_, inputs, outputs);
    y = out.to_tensor();
    return status;
  }

 private:
  kiln_test::OnePackage named_data_;
  std::shared_ptr<runtime::BackendInterface> backend_;
  runtime::DelegateHandle* handle_ = nullptr;
};

using ShapeList = std::vector<std::vector<std::vector<int64_t>>>;

// A program whose method "forward" is one KilnBackend delegate with x and y of any [?, ?] shape.
struct Loaded {
  std::shared_ptr<runtime::Program> program;
  std::unique_ptr<runtime::Method> method;
};

Result<Loaded> load(const std::string& manifest) {
  ProgramBuilder builder;
  builder.method("forward")
      .input("x", F32, {0, 0}, ShapeDynamism::Unbounded, {"batch", "seq"})
      .tensor("y", F32, {0, 0}, ShapeDynamism::Unbounded)
      .delegate("KilnBackend", std::vector<uint8_t>(manifest.begin(), manifest.end()), {"x"}, {"y"})
      .output("y")
      .named_data(kPackageKey, package());
  KILN_ASSIGN_OR_RETURN(auto bytes, builder.build());
  auto owned = std::make_shared<std::vector<uint8_t>>(std::move(bytes));
  auto loader = std::make_shared<runtime::BufferDataLoader>(owned->data(), owned->size(), owned);
  Loaded loaded;
  KILN_ASSIGN_OR_RETURN(loaded.program, runtime::Program::load(loader));
  KILN_ASSIGN_OR_RETURN(loaded.method, loaded.program->load_method("forward"));
  return loaded;
}

std::vector<float> iota(int64_t n) {
  std::vector<float> v(static_cast<size_t>(n));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i);
  return v;
}

TEST(KilnBackendEnumerated, EachListedShapeRunsItsFunction) {
  auto kiln = load(three_functions());
  ASSERT_TRUE(kiln.ok()) << kiln.status();
  struct Case {
    std::vector<int64_t> shape;
    float addend;
  };
  // Twice round, so a session is found again after other shapes ran.
  for (int round = 0; round < 2; ++round) {
    for (const Case& c : {Case{{1, 8}, 2.0f}, Case{{1, 4}, 1.0f}, Case{{2, 4}, 3.0f}}) {
      SCOPED_TRACE(runtime::shape_to_string(c.shape));
      auto x = iota(c.shape[0] * c.shape[1]);
      ASSERT_TRUE(kiln->method->set_input(0, EValue(Tensor(F32, c.shape, x.data()))).ok());
      auto status = kiln->method->execute();
      ASSERT_TRUE(status.ok()) << status;
      const Tensor& y = kiln->method->get_output(0).to_tensor();
      ASSERT_EQ(std::vector<int64_t>(y.sizes().begin(), y.sizes().end()), c.shape);
      for (size_t i = 0; i < x.size(); ++i) {
        EXPECT_EQ(y.data_ptr<float>()[i], x[i] + c.addend) << "element " << i;
      }
    }
  }
}

TEST(KilnBackendEnumerated, AWarmInitBuildsTheFirstShapeAndTheOthersOnFirstUse) {
  {
    auto cold = Delegate::init(three_functions());  // stores the artifact (or finds it)
    ASSERT_TRUE(cold.ok()) << cold.status();
  }
  engine::wait_for_background_stores();
  auto warm = Delegate::init(three_functions());
  ASSERT_TRUE(warm.ok()) << warm.status();
  const engine::LoadedModel* model = KilnBackend::model_of((*warm)->handle());
  ASSERT_NE(model, nullptr);
  ASSERT_EQ(model->load_report().cache, "hit");
  // add_one, the first listed, is built by the load (while the entry's checksum is checked)
  // and ready when init returns; the other two are deferred.
  EXPECT_EQ(model->load_report().deferred_functions, 2u);
  EXPECT_EQ(model->num_built(), 1u);
  auto x = iota(8);
  std::vector<float> out(8);
  Tensor in(F32, {1, 8}, x.data()), y(F32, {1, 8}, out.data());
  ASSERT_TRUE((*warm)->execute(in, y).ok());
  EXPECT_EQ(model->num_built(), 2u);  // add_two, built by its first call
  EXPECT_EQ(out[7], 9.0f);
}

TEST(KilnBackendEnumerated, UnlistedShapeRunsNothingAndNamesTheShapes) {
  auto d = Delegate::init(three_functions());
  ASSERT_TRUE(d.ok()) << d.status();
  for (std::vector<int64_t> shape : {std::vector<int64_t>{1, 5}, std::vector<int64_t>{2, 8}}) {
    auto x = iota(shape[0] * shape[1]);
    std::vector<float> out(16, -7.0f);
    Tensor in(F32, shape, x.data());
    Tensor y(F32, {1, 16}, out.data(), ShapeDynamism::Bounded);
    auto status = (*d)->execute(in, y);
    ASSERT_FALSE(status.ok());
    EXPECT_EQ(status.code(), Error::InvalidArgument);
    EXPECT_THAT(status.message(),
                HasSubstr("execute functions ['add_one', 'add_two', 'add_three']: input shapes (" +
                          runtime::shape_to_string(shape) +
                          ") (expected one of ([1, 4]) for 'add_one', ([1, 8]) for 'add_two', "
                          "([2, 4]) for 'add_three')"));
    EXPECT_EQ(std::vector<int64_t>(y.sizes().begin(), y.sizes().end()),
              (std::vector<int64_t>{1, 16}));
    EXPECT_EQ(out, std::vector<float>(16, -7.0f)) << "the output was written";
  }
}

TEST(KilnBackendEnumerated, WrongRankOrDtypeIsRejectedBeforeDispatch) {
  auto d = Delegate::init(three_functions());
  ASSERT_TRUE(d.ok()) << d.status();
  std::vector<float> x(4), out(4);
  Tensor rank1(F32, {4}, x.data());
  Tensor y(F32, {1, 4}, out.data());
  auto status = (*d)->execute(rank1, y);
  EXPECT_EQ(status.code(), Error::InvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("input 'x' has rank 1 (expected 2)"));
  std::vector<int64_t> ints(4);
  Tensor wrong_dtype(testing::I64, {1, 4}, ints.data());
  status = (*d)->execute(wrong_dtype, y);
  EXPECT_EQ(status.code(), Error::InvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("input 'x' has dtype"));
}

TEST(KilnBackendEnumerated, AcceptedInputShapesListsEachForm) {
  auto enumerated = Delegate::init(three_functions());
  ASSERT_TRUE(enumerated.ok()) << enumerated.status();
  EXPECT_EQ(KilnBackend::accepted_input_shapes((*enumerated)->handle()),
            (ShapeList{{{1, 4}}, {{1, 8}}, {{2, 4}}}));

  auto function = [](const std::string& name) {
    return R"({"package": ")" + std::string(kPackageKey) +
           R"(", "input_names": ["x"], "output_names": ["y"], "function": ")" + name + R"("})";
  };
  auto fixed = Delegate::init(function("add_three"));
  ASSERT_TRUE(fixed.ok()) << fixed.status();
  EXPECT_EQ(KilnBackend::accepted_input_shapes((*fixed)->handle()), (ShapeList{{{2, 4}}}));

  auto symbolic = Delegate::init(function("add_any"));
  ASSERT_TRUE(symbolic.ok()) << symbolic.status();
  EXPECT_EQ(KilnBackend::accepted_input_shapes((*symbolic)->handle()), ShapeList{});
  // Any shape runs there, and binding new shapes does not change the answer.
  std::vector<float> x = iota(12), out(12);
  Tensor in(F32, {3, 4}, x.data());
  Tensor y(F32, {3, 4}, out.data());
  ASSERT_TRUE((*symbolic)->execute(in, y).ok());
  EXPECT_EQ(out[11], 11.0f + 9.0f);
  EXPECT_EQ(KilnBackend::accepted_input_shapes((*symbolic)->handle()), ShapeList{});
}

TEST(KilnBackendEnumerated, SymbolicFunctionCanBeListedAtOneShape) {
  auto d =
      Delegate::init(enumerated_manifest({entry("add_one", "[1, 4]"), entry("add_any", "[5, 4]")}));
  ASSERT_TRUE(d.ok()) << d.status();
  std::vector<float> x = iota(20), out(20);
  Tensor in(F32, {5, 4}, x.data());
  Tensor y(F32, {5, 4}, out.data());
  ASSERT_TRUE((*d)->execute(in, y).ok());
  EXPECT_EQ(out[19], 19.0f + 9.0f);
  // Only the listed batch: the symbolic function is not bound on demand here.
  Tensor other(F32, {3, 4}, x.data());
  Tensor y3(F32, {3, 4}, out.data());
  EXPECT_EQ((*d)->execute(other, y3).code(), Error::InvalidArgument);
}

TEST(KilnBackendEnumerated, BindFailureFailsInit) {
  // add_square's IR gives x the shape [n, n]: [2, 3] fits each dim (both symbolic), and only
  // binding finds n bound to 2 and 3.
  auto d = Delegate::init(enumerated_manifest(
      {entry("add_one", "[1, 4]"), entry("add_square", "[3, 3]"), entry("add_two", "[1, 8]")}));
  ASSERT_TRUE(d.ok()) << d.status();
  std::vector<float> x = iota(9), out(9);
  Tensor in(F32, {3, 3}, x.data());
  Tensor y(F32, {3, 3}, out.data());
  ASSERT_TRUE((*d)->execute(in, y).ok());
  EXPECT_EQ(out[8], 8.0f + 6.0f);

  auto bad = Delegate::init(enumerated_manifest(
      {entry("add_one", "[1, 4]"), entry("add_square", "[2, 3]"), entry("add_two", "[1, 8]")}));
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), Error::InvalidArgument);
  EXPECT_THAT(bad.status().message(),
              HasSubstr("init delegate 'forward_0' of method 'forward': bind function "
                        "'add_square' to input shapes ([2, 3])"));
}

struct BadInit {
  const char* name;
  std::string manifest;
  const char* substring;
};

class KilnBackendEnumeratedInit : public ::testing::TestWithParam<BadInit> {};

TEST_P(KilnBackendEnumeratedInit, FailsNamingTheFunction) {
  auto d = Delegate::init(GetParam().manifest);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), Error::InvalidArgument) << d.status();
  EXPECT_THAT(d.status().message(), HasSubstr("init delegate 'forward_0' of method 'forward'"));
  EXPECT_THAT(d.status().message(), HasSubstr(GetParam().substring));
}

INSTANTIATE_TEST_SUITE_P(
    Cases, KilnBackendEnumeratedInit,
    ::testing::Values(
        BadInit{"FunctionNotInPackage",
                enumerated_manifest({entry("add_one", "[1, 4]"), entry("add_four", "[1, 9]")}),
                "manifest field 'enumerated_functions[1].function' is 'add_four', which package "
                "'kiln/package/enumerated' does not hold"},
        BadInit{"ShapeContradictsStaticDim",
                enumerated_manifest({entry("add_one", "[1, 4]"), entry("add_two", "[1, 16]")}),
                "manifest field 'enumerated_functions[1].input_shapes' gives input 'x' of "
                "function 'add_two' the shape [1, 16] (expected f32[1, 8])"},
        BadInit{"ShapeContradictsRank", enumerated_manifest({entry("add_one", "[4]")}),
                "gives input 'x' of function 'add_one' the shape [4] (expected f32[1, 4])"},
        BadInit{"ShapeContradictsSymbolicFunctionsStaticDim",
                enumerated_manifest({entry("add_any", "[2, 5]")}),
                "gives input 'x' of function 'add_any' the shape [2, 5] (expected f32[batch, 4])"},
        BadInit{"InputNamesDiffer",
                R"({"package": "kiln/package/enumerated", "input_names": ["ids"],
                    "output_names": ["y"], "enumerated": true,
                    "enumerated_functions": [{"function": "add_one", "input_shapes": [[1, 4]]}]})",
                "field 'input_names' is ['ids'] (expected ['x'], the inputs of function "
                "'add_one')"}),
    [](const ::testing::TestParamInfo<BadInit>& info) { return std::string(info.param.name); });

TEST(KilnBackendEnumerated, DtypesMustAgreeAcrossFunctions) {
  ir::Model model;
  add_function(model, "add_one", {1, 4}, 1.0f);
  add_function(model, "add_half", {1, 2}, 0.5f, runtime::ScalarType::Float16);
  auto bytes = engine::package::write_package(model);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  kiln_test::OnePackage named_data(*bytes, kPackageKey);
  auto backend = runtime::get_backend("KilnBackend");
  runtime::BackendInitContext context("forward", "forward_0", {}, &named_data);
  std::string manifest =
      enumerated_manifest({entry("add_one", "[1, 4]"), entry("add_half", "[1, 2]")});
  runtime::FreeableBuffer blob(manifest.data(), manifest.size());
  auto handle = backend->init(context, &blob, {});
  ASSERT_FALSE(handle.ok());
  EXPECT_EQ(handle.status().code(), Error::InvalidArgument);
  EXPECT_THAT(handle.status().message(),
              HasSubstr("manifest field 'enumerated_functions[1].function': input 'x' of function "
                        "'add_half' has dtype"));
  EXPECT_THAT(handle.status().message(), HasSubstr("as in function 'add_one'"));
}

}  // namespace
}  // namespace kiln::backends
