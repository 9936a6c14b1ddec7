#include <kiln/exporter/onnx/onnx_importer.h>

#include <kiln/engine/passes/common_subexpressions.h>
#include <kiln/engine/passes/constant_folding.h>
#include <kiln/engine/passes/pattern_rewrites.h>
#include <kiln/engine/passes/rank_completion.h>
#include <kiln/exporter/onnx/onnx_sandbox.h>
#include <kiln/exporter/onnx/onnx_tensor.h>

#include <onnx/checker.h>
#include <onnx/defs/data_type_utils.h>
#include <onnx/defs/schema.h>
#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>
#include <onnx/version_converter/convert.h>

#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>

namespace kiln::exporter {

namespace ir = engine::ir;
using runtime::Error;
using runtime::Result;
using runtime::Status;

namespace {

constexpr int64_t kMinOpset = 7;
constexpr int64_t kMaxOpset = 18;
constexpr int kUpgradeTarget = 13;

std::string describe(const onnx::NodeProto& node) {
  std::string name =
      node.name().empty() ? (node.output_size() ? node.output(0) : "?") : node.name();
  return "node '" + name + "' (" + node.op_type() + ")";
}

class Importer {
 public:
  Importer(const onnx::ModelProto& proto, std::string source, const ImportOptions& options,
           int64_t original_opset)
      : proto_(proto),
        source_(std::move(source)),
        options_(options),
        original_opset_(original_opset) {}

  Result<ir::Model> run() {
    KILN_RETURN_IF_ERROR(check_opsets());
    const auto& g = proto_.graph();
    for (const auto& v : g.input()) types_[v.name()] = &v.type();
    for (const auto& v : g.output()) types_[v.name()] = &v.type();
    for (const auto& v : g.value_info()) types_[v.name()] = &v.type();
    ir::Graph graph;
    graph.name = options_.function_name;
    for (const auto& init : g.initializer()) {
      auto weight = weight_from_proto(init);
      if (!weight.ok()) return weight.status().with_context(where());
      KILN_RETURN_IF_ERROR(add_weight_value(graph, init.name(), std::move(weight).get()));
    }
    for (const auto& input : g.input()) {
      if (graph.find_value(input.name()) >= 0) continue;  // IR < 4 lists initializers as inputs
      KILN_ASSIGN_OR_RETURN(ir::TensorType type, type_of(input.name(), "graph input"));
      graph.inputs.push_back(graph.add_value(ir::Value{input.name(), std::move(type), -1}));
    }
    nodes_ = &graph.nodes;
    KILN_RETURN_IF_ERROR(import_nodes(g, graph));
    for (const auto& output : g.output()) {
      int index = graph.find_value(output.name());
      if (index < 0) {
        return Status(Error::InvalidProgram,
                      where() + ": graph output '" + output.name() + "' is produced by no node");
      }
      graph.outputs.push_back(index);
    }
    engine::passes::complete_ranks(model_, graph);
    if (options_.rewrite_patterns) {
      engine::passes::rewrite_patterns(model_, graph);
      engine::passes::merge_common_subexpressions(graph);
    }
    model_.functions.push_back(std::move(graph));
    return std::move(model_);
  }

 private:
  std::string where() const { return "import model '" + source_ + "'"; }

  Status check_opsets() {
    bool found = false;
    for (const auto& opset : proto_.opset_import()) {
      if (opset.domain().empty() || opset.domain() == "ai.onnx") {
        found = true;
        opset_ = opset.version();
      }
    }
    if (!found) opset_ = 1;
    if (opset_ < kMinOpset || opset_ > kMaxOpset) {
      return Status(Error::NotSupported,
                    where() + ": default-domain opset " + std::to_string(opset_) + " (expected " +
                        std::to_string(kMinOpset) + " to " + std::to_string(kMaxOpset) + ")");
    }
    return Status();
  }

  Status add_weight_value(ir::Graph& graph, const std::string& name, ir::Weight weight) {
    ir::Value value;
    value.name = name;
    value.type.dtype = weight.dtype;
    value.type.shape.assign(weight.sizes.begin(), weight.sizes.end());
    weight.name = name;
    value.weight = model_.add_weight(std::move(weight));
    int existing = graph.find_value(name);
    if (existing >= 0) {
      graph.values[existing] = std::move(value);
    } else {
      graph.add_value(std::move(value));
    }
    return Status();
  }

  Result<ir::TensorType> type_of(const std::string& name, const std::string& what) {
    auto it = types_.find(name);
    if (it == types_.end() || it->second == nullptr) {
      return Status(Error::NotSupported, where() + ": " + what + " '" + name +
                                             "' has no type (shape inference could not infer it)");
    }
    const onnx::TypeProto& type = *it->second;
    if (!type.has_tensor_type()) {
      std::string kind = type.has_sequence_type()   ? "sequence"
                         : type.has_optional_type() ? "optional"
                         : type.has_map_type()      ? "map"
                                                    : "non-tensor";
      return Status(Error::NotSupported,
                    where() + ": " + what + " '" + name + "' has a " + kind + " type");
    }
    ir::TensorType out;
    auto dtype = dtype_from_onnx(type.tensor_type().elem_type());
    if (!dtype.ok()) return dtype.status().with_context(where() + ": " + what + " '" + name + "'");
    out.dtype = *dtype;
    if (!type.tensor_type().has_shape()) {
      out.rank_known = false;
      return out;
    }
    for (const auto& dim : type.tensor_type().shape().dim()) {
      if (dim.has_dim_value()) {
        out.shape.emplace_back(dim.dim_value());
      } else {
        out.shape.push_back(ir::Dim::symbol(dim.has_dim_param() ? dim.dim_param() : ""));
      }
    }
    return out;
  }

  Result<ir::Attribute> convert_attribute(const onnx::NodeProto& node,
                                          const onnx::AttributeProto& a) {
    ir::Attribute out;
    out.name = a.name();
    switch (a.type()) {
      case onnx::AttributeProto::INT:
        out.value = static_cast<int64_t>(a.i());
        break;
      case onnx::AttributeProto::FLOAT:
        out.value = static_cast<double>(a.f());
        break;
      case onnx::AttributeProto::STRING:
        out.value = a.s();
        break;
      case onnx::AttributeProto::INTS:
        out.value = std::vector<int64_t>(a.ints().begin(), a.ints().end());
        break;
      case onnx::AttributeProto::FLOATS:
        out.value = std::vector<double>(a.floats().begin(), a.floats().end());
        break;
      case onnx::AttributeProto::STRINGS:
        out.value = std::vector<std::string>(a.strings().begin(), a.strings().end());
        break;
      case onnx::AttributeProto::TENSOR: {
        auto weight = weight_from_proto(a.t());
        if (!weight.ok()) return weight.status().with_context(where() + ": " + describe(node));
        out.value = ir::WeightRef{model_.add_weight(std::move(weight).get())};
        break;
      }
      default:
        return Status(Error::NotSupported, where() + ": " + describe(node) + ": attribute '" +
                                               a.name() + "' of type " +
                                               onnx::AttributeProto::AttributeType_Name(a.type()));
    }
    return out;
  }

  // Constant nodes become weights.
  Status import_constant(const onnx::NodeProto& node, ir::Graph& graph) {
    if (node.attribute_size() != 1 || node.output_size() != 1) {
      return Status(Error::InvalidProgram,
                    where() + ": " + describe(node) + ": expected exactly one value attribute");
    }
    const auto& a = node.attribute(0);
    ir::Weight w;
    if (a.name() == "value") {
      auto weight = weight_from_proto(a.t());
      if (!weight.ok()) return weight.status().with_context(where() + ": " + describe(node));
      w = std::move(weight).get();
    } else if (a.name() == "value_float" || a.name() == "value_floats") {
      std::vector<float> v = a.name() == "value_float"
                                 ? std::vector<float>{a.f()}
                                 : std::vector<float>(a.floats().begin(), a.floats().end());
      w.dtype = runtime::ScalarType::Float32;
      if (a.name() == "value_floats") w.sizes = {static_cast<int64_t>(v.size())};
      w.data.resize(v.size() * 4);
      std::memcpy(w.data.data(), v.data(), w.data.size());
    } else if (a.name() == "value_int" || a.name() == "value_ints") {
      std::vector<int64_t> v = a.name() == "value_int"
                                   ? std::vector<int64_t>{a.i()}
                                   : std::vector<int64_t>(a.ints().begin(), a.ints().end());
      w.dtype = runtime::ScalarType::Int64;
      if (a.name() == "value_ints") w.sizes = {static_cast<int64_t>(v.size())};
      w.data.resize(v.size() * 8);
      std::memcpy(w.data.data(), v.data(), w.data.size());
    } else {
      return Status(Error::NotSupported,
                    where() + ": " + describe(node) + ": attribute '" + a.name() + "'");
    }
    return add_weight_value(graph, node.output(0), std::move(w));
  }

  // An If whose condition is a weight is replaced by the nodes of the branch taken.
  Status inline_if(const onnx::NodeProto& node, ir::Graph& graph, int condition) {
    const ir::Weight& w = model_.weights[graph.values[condition].weight];
    bool taken = !w.data.empty() && w.data[0] != 0;
    const onnx::GraphProto* branch = nullptr;
    for (const auto& a : node.attribute()) {
      if (a.name() == (taken ? "then_branch" : "else_branch")) branch = &a.g();
    }
    if (branch == nullptr) {
      return Status(Error::InvalidProgram, where() + ": " + describe(node) + ": branch missing");
    }
    for (const auto& v : branch->value_info()) types_[v.name()] = &v.type();
    for (const auto& v : branch->output()) types_[v.name()] = &v.type();
    for (const auto& init : branch->initializer()) {
      auto weight = weight_from_proto(init);
      if (!weight.ok()) return weight.status().with_context(where());
      KILN_RETURN_IF_ERROR(add_weight_value(graph, init.name(), std::move(weight).get()));
    }
    KILN_RETURN_IF_ERROR(import_nodes(*branch, graph));
    if (branch->output_size() != node.output_size()) {
      return Status(Error::InvalidProgram, where() + ": " + describe(node) + ": branch has " +
                                               std::to_string(branch->output_size()) +
                                               " outputs (expected " +
                                               std::to_string(node.output_size()) + ")");
    }
    for (int i = 0; i < node.output_size(); ++i) {
      onnx::NodeProto identity;
      identity.set_op_type("Identity");
      identity.set_name(node.name() + "/out" + std::to_string(i));
      identity.add_input(branch->output(i).name());
      identity.add_output(node.output(i));
      if (types_.find(node.output(i)) == types_.end()) {
        types_[node.output(i)] = &branch->output(i).type();
      }
      KILN_RETURN_IF_ERROR(import_node(identity, graph));
    }
    return Status();
  }

  Status import_nodes(const onnx::GraphProto& g, ir::Graph& graph) {
    for (const auto& node : g.node()) KILN_RETURN_IF_ERROR(import_node(node, graph));
    return Status();
  }

  Status import_node(const onnx::NodeProto& node, ir::Graph& graph) {
    if (!node.domain().empty() && node.domain() != "ai.onnx") {
      return Status(Error::NotSupported, where() + ": " + describe(node) + ": domain '" +
                                             node.domain() + "' (expected the default domain)");
    }
    if (node.op_type() == "Constant") return import_constant(node, graph);
    ir::Node out;
    out.name = node.name().empty() ? node.op_type() + "_" + std::to_string(graph.nodes.size())
                                   : node.name();
    out.op = node.op_type();
    for (const auto& input : node.input()) {
      if (input.empty()) {
        out.inputs.push_back(-1);
        continue;
      }
      int index = graph.find_value(input);
      if (index < 0) {
        return Status(Error::InvalidProgram, where() + ": " + describe(node) + ": input '" + input +
                                                 "' is not defined before it is used");
      }
      out.inputs.push_back(index);
    }
    if (node.op_type() == "If" && !out.inputs.empty() && out.inputs[0] >= 0 &&
        graph.values[out.inputs[0]].weight >= 0) {
      return inline_if(node, graph, out.inputs[0]);
    }
    if (node.op_type() == "If") return import_if(node, graph, std::move(out));
    for (const auto& a : node.attribute()) {
      if (a.type() == onnx::AttributeProto::GRAPH || a.type() == onnx::AttributeProto::GRAPHS) {
        return Status(Error::NotSupported,
                      where() + ": " + describe(node) + ": operator " + node.op_type());
      }
      KILN_ASSIGN_OR_RETURN(ir::Attribute attribute, convert_attribute(node, a));
      out.attributes.push_back(std::move(attribute));
    }
    KILN_RETURN_IF_ERROR(add_outputs(node, graph, out));
    if (out.op == "PRelu" && original_opset_ < 7) channel_slope(out, graph);
    if (out.op == "RoiAlign" && opset_ < 16) roi_align_10_coordinates(out);
    nodes_->push_back(std::move(out));
    if (options_.fold_constants) {
      auto folded = engine::passes::fold_node(model_, graph, nodes_->back());
      if (!folded.ok()) return folded.status().with_context(where());
      if (*folded) nodes_->pop_back();
    }
    return Status();
  }

  // A data-dependent If keeps both branches as regions of one node; the lowering turns them
  // into a conditional jump. Branch values join the function's value table (ONNX names are
  // unique across a model's scopes), and branches read outer values by name.
  Status import_if(const onnx::NodeProto& node, ir::Graph& graph, ir::Node out) {
    for (const char* name : {"then_branch", "else_branch"}) {
      const onnx::GraphProto* branch = nullptr;
      for (const auto& a : node.attribute()) {
        if (a.name() == name && a.type() == onnx::AttributeProto::GRAPH) branch = &a.g();
      }
      if (branch == nullptr) {
        return Status(Error::InvalidProgram,
                      where() + ": " + describe(node) + ": attribute '" + name + "' missing");
      }
      if (branch->output_size() != node.output_size()) {
        return Status(Error::InvalidProgram,
                      where() + ": " + describe(node) + ": " + name + " has " +
                          std::to_string(branch->output_size()) + " outputs (expected " +
                          std::to_string(node.output_size()) + ", one per If output)");
      }
      for (const auto& v : branch->value_info()) types_[v.name()] = &v.type();
      for (const auto& v : branch->output()) types_[v.name()] = &v.type();
      for (int i = 0; i < node.output_size(); ++i) {
        // Shape inference normally types the If's outputs (merging both branches).
        if (!node.output(i).empty() && types_.find(node.output(i)) == types_.end()) {
          types_[node.output(i)] = &branch->output(i).type();
        }
      }
      for (const auto& init : branch->initializer()) {
        auto weight = weight_from_proto(init);
        if (!weight.ok()) return weight.status().with_context(where());
        KILN_RETURN_IF_ERROR(add_weight_value(graph, init.name(), std::move(weight).get()));
      }
      ir::Region region;
      std::vector<ir::Node>* outer = nodes_;
      nodes_ = &region.nodes;
      Status imported = import_nodes(*branch, graph);
      nodes_ = outer;
      KILN_RETURN_IF_ERROR(imported);
      for (const auto& output : branch->output()) {
        int index = graph.find_value(output.name());
        if (index < 0) {
          return Status(Error::InvalidProgram, where() + ": " + describe(node) + ": " + name +
                                                   " output '" + output.name() +
                                                   "' is not defined");
        }
        region.outputs.push_back(index);
      }
      out.regions.push_back(std::move(region));
    }
    KILN_RETURN_IF_ERROR(add_outputs(node, graph, out));
    nodes_->push_back(std::move(out));
    return Status();
  }

  // The dtype of output `index` of `node` from the operator's schema: the dtype of an input
  // bound to the same type parameter, or the one type the parameter allows. Shape inference
  // leaves outputs without a name untyped, but a kernel still writes them (GRU's Y, MaxPool's
  // Indices, Unique's counts), so they need their real dtype.
  std::optional<runtime::ScalarType> unnamed_output_dtype(const onnx::NodeProto& node, int index,
                                                          const ir::Graph& graph) const {
    const auto* schema = onnx::OpSchemaRegistry::Schema(node.op_type(), opset_, node.domain());
    if (schema == nullptr || index >= static_cast<int>(schema->outputs().size())) return {};
    const std::string& type = schema->outputs()[index].GetTypeStr();
    const auto& inputs = schema->inputs();
    for (int i = 0; i < node.input_size() && i < static_cast<int>(inputs.size()); ++i) {
      if (inputs[i].GetTypeStr() != type || node.input(i).empty()) continue;
      int value = graph.find_value(node.input(i));
      if (value >= 0) return graph.values[value].type.dtype;
    }
    std::vector<std::string> allowed = {type};
    for (const auto& constraint : schema->typeConstraintParams()) {
      if (constraint.type_param_str == type) allowed = constraint.allowed_type_strs;
    }
    if (allowed.size() != 1) return {};
    try {
      const auto& proto =
          onnx::Utils::DataTypeUtils::ToTypeProto(onnx::Utils::DataTypeUtils::ToType(allowed[0]));
      if (!proto.has_tensor_type()) return {};
      auto dtype = dtype_from_onnx(proto.tensor_type().elem_type());
      if (!dtype.ok()) return {};
      return *dtype;
    } catch (const std::exception&) {
      return {};
    }
  }

  Status add_outputs(const onnx::NodeProto& node, ir::Graph& graph, ir::Node& out) {
    for (int i = 0; i < node.output_size(); ++i) {
      const std::string& output = node.output(i);
      if (output.empty()) {
        auto dtype = unnamed_output_dtype(node, i, graph);
        if (!dtype) {
          out.outputs.push_back(-1);
          continue;
        }
        ir::TensorType type;
        type.dtype = *dtype;
        type.rank_known = false;
        out.outputs.push_back(graph.add_value(
            ir::Value{out.name + "/unused_output_" + std::to_string(i), std::move(type), -1}));
        continue;
      }
      auto type = type_of(output, "output of " + describe(node) + ",");
      if (!type.ok()) return type.status();
      int existing = graph.find_value(output);
      if (existing >= 0) {
        return Status(Error::InvalidProgram, where() + ": " + describe(node) + ": output '" +
                                                 output + "' is produced twice");
      }
      out.outputs.push_back(graph.add_value(ir::Value{output, std::move(type).get(), -1}));
    }
    return Status();
  }

  // RoiAlign-10 shifts only its output by half a pixel. Opset 16 added the attribute
  // 'coordinate_transformation_mode' with default "half_pixel", which also shifts the input, so
  // an older node gets "output_half_pixel" spelled out (the kernels implement the opset-16 form).
  static void roi_align_10_coordinates(ir::Node& node) {
    for (const auto& attribute : node.attributes) {
      if (attribute.name == "coordinate_transformation_mode") return;
    }
    node.attributes.push_back(
        ir::Attribute{"coordinate_transformation_mode", std::string("output_half_pixel")});
  }

  // PRelu before opset 7 applies a 1-D slope of C values per channel (dim 1); the version
  // converter leaves it as is, so the slope weight is reshaped to [C, 1, ..., 1].
  void channel_slope(ir::Node& node, ir::Graph& graph) {
    if (node.inputs.size() != 2 || node.inputs[0] < 0 || node.inputs[1] < 0) return;
    const ir::Value& x = graph.values[node.inputs[0]];
    ir::Value& slope = graph.values[node.inputs[1]];
    if (slope.weight < 0 || !x.type.rank_known || x.type.shape.size() < 3) return;
    const ir::Weight& w = model_.weights[slope.weight];
    if (w.sizes.size() != 1 || !(x.type.shape[1] == ir::Dim(w.sizes[0]))) return;
    ir::Weight reshaped = w;
    reshaped.sizes.assign(x.type.shape.size() - 1, 1);
    reshaped.sizes[0] = w.sizes[0];
    ir::Value value = slope;
    value.name = slope.name + "/per_channel";
    value.type.shape.assign(reshaped.sizes.begin(), reshaped.sizes.end());
    value.weight = model_.add_weight(std::move(reshaped));
    node.inputs[1] = graph.add_value(std::move(value));
  }

  const onnx::ModelProto& proto_;
  std::string source_;
  ImportOptions options_;
  int64_t opset_ = 0;
  int64_t original_opset_ = 0;  // before the upgrade to opset 13
  std::map<std::string, const onnx::TypeProto*> types_;
  ir::Model model_;
  std::vector<ir::Node>* nodes_ = nullptr;  // where imported nodes go: the graph or a branch
};

int64_t default_opset(const onnx::ModelProto& proto) {
  for (const auto& opset : proto.opset_import()) {
    if (opset.domain().empty() || opset.domain() == "ai.onnx") return opset.version();
  }
  return 0;
}

// Every graph output (and every branch output, which may also name a value of an enclosing
// graph) is a graph input, an initializer or a node output. ONNX's checker lets an undefined
// output through, and its version converter then crashes, so this runs before the upgrade.
Status check_outputs_defined(const onnx::GraphProto& graph, std::set<std::string> defined,
                             const std::string& where) {
  for (const auto& v : graph.input()) defined.insert(v.name());
  for (const auto& init : graph.initializer()) defined.insert(init.name());
  for (const auto& node : graph.node()) {
    for (const auto& a : node.attribute()) {
      if (a.has_g()) KILN_RETURN_IF_ERROR(check_outputs_defined(a.g(), defined, where));
      for (const auto& g : a.graphs()) {
        KILN_RETURN_IF_ERROR(check_outputs_defined(g, defined, where));
      }
    }
    for (const auto& output : node.output()) defined.insert(output);
  }
  for (const auto& output : graph.output()) {
    if (defined.count(output.name()) == 0) {
      return Status(Error::InvalidProgram, where + ": graph '" + graph.name() + "' output '" +
                                               output.name() + "' is produced by no node");
    }
  }
  return Status();
}

// Checks that ONNX 1.12's shape inference skips and then crashes on (it indexes W's dims by X's
// rank): Conv-like nodes whose X and W ranks are known from the graph's declared types must
// agree and be at least 3. Ranks known only after inference cannot be checked here.
Status check_conv_ranks(const onnx::GraphProto& graph, const std::string& where) {
  std::map<std::string, int> ranks;
  auto note = [&](const onnx::ValueInfoProto& v) {
    if (v.type().has_tensor_type() && v.type().tensor_type().has_shape()) {
      ranks[v.name()] = v.type().tensor_type().shape().dim_size();
    }
  };
  for (const auto& v : graph.input()) note(v);
  for (const auto& v : graph.value_info()) note(v);
  for (const auto& init : graph.initializer()) ranks[init.name()] = init.dims_size();
  for (const auto& node : graph.node()) {
    const std::string& op = node.op_type();
    if (op != "Conv" && op != "ConvTranspose" && op != "ConvInteger") continue;
    if (node.input_size() < 2) continue;
    auto x = ranks.find(node.input(0));
    auto w = ranks.find(node.input(1));
    if (x == ranks.end() || w == ranks.end()) continue;
    if (x->second != w->second || x->second < 3) {
      return Status(Error::InvalidProgram,
                    where + ": node '" + node.name() + "' (" + op + "): input X has rank " +
                        std::to_string(x->second) + " and W rank " + std::to_string(w->second) +
                        " (expected equal ranks of at least 3: batch, channels, spatial dims)");
    }
  }
  return Status();
}

// Kernels implement the opset-13 forms of operators (with the older attribute forms accepted
// where they still parse the same). Older models are brought to opset 13 with ONNX's own version
// converter; a model it cannot convert keeps its opset if that is at least 7.
Status upgrade_opset(onnx::ModelProto& proto, const std::string& source_name) {
  int64_t opset = default_opset(proto);
  if (opset == 0 || opset >= kUpgradeTarget) return Status();
  for (const auto& node : proto.graph().node()) {
    if (!node.domain().empty() && node.domain() != "ai.onnx") return Status();
  }
  try {
    // Several adapters need the shapes of their inputs (Gemm's C, Softmax's input), which the
    // converter reads from value_info: infer them first. A model whose shapes cannot be
    // inferred at its own opset is converted without them.
    try {
      onnx::shape_inference::InferShapes(proto);
    } catch (const std::exception&) {
    }
    proto = onnx::version_conversion::ConvertVersion(proto, kUpgradeTarget);
    // Opset 13 belongs to IR 7, where initializers need not be graph inputs (the converter
    // adds initializers but keeps the model's older IR version).
    if (proto.ir_version() < 7) proto.set_ir_version(7);
    return Status();
  } catch (const std::exception& e) {
    if (opset >= kMinOpset) return Status();
    return Status(Error::NotSupported, "import model '" + source_name + "': default-domain opset " +
                                           std::to_string(opset) + " could not be upgraded to " +
                                           std::to_string(kUpgradeTarget) + ": " + e.what());
  }
}

// ONNX's checker (before and after the opset upgrade), our structural checks, the upgrade and
// strict shape inference, in place on `proto`.
Status prepare_with_onnx(onnx::ModelProto& proto, const std::string& source_name) {
  // ONNX's version converter trusts its input (it crashes on some malformed graphs), so the
  // checker sees the model first, at its own opset, and again after the upgrade.
  for (int pass = 0; pass < 2; ++pass) {
    try {
      onnx::checker::check_model(proto);
    } catch (const std::exception& e) {
      return Status(Error::InvalidProgram,
                    "import model '" + source_name + "': invalid model: " + e.what());
    }
    if (pass == 0) {
      KILN_RETURN_IF_ERROR(
          check_outputs_defined(proto.graph(), {}, "import model '" + source_name + "'"));
      KILN_RETURN_IF_ERROR(check_conv_ranks(proto.graph(), "import model '" + source_name + "'"));
      KILN_RETURN_IF_ERROR(upgrade_opset(proto, source_name));
    }
  }
  try {
    // Strict: a node whose inputs contradict its operator (an Add of [2, 3] and [4, 5]) is an
    // error naming the node, not a model that fails later at run time.
    onnx::ShapeInferenceOptions strict(/*check_type_val=*/true, /*strict_mode_val=*/1);
    onnx::shape_inference::InferShapes(proto, onnx::OpSchemaRegistry::Instance(), strict);
  } catch (const std::exception& e) {
    return Status(Error::InvalidProgram,
                  "import model '" + source_name + "': shape inference failed: " + e.what());
  }
  return Status();
}

}  // namespace

Result<ir::Model> import_onnx(const std::string& bytes, const std::string& source_name,
                              const ImportOptions& options) {
  onnx::ModelProto proto;
  if (!proto.ParseFromString(bytes)) {
    return Status(Error::InvalidProgram, "import model '" + source_name +
                                             "': not a valid ONNX protobuf (" +
                                             std::to_string(bytes.size()) + " bytes)");
  }
  if (!proto.has_graph()) {
    return Status(Error::InvalidProgram, "import model '" + source_name + "': has no graph");
  }
  int64_t original_opset = default_opset(proto);
  // ONNX's own steps run in a child process: they crash on some malformed models.
  auto prepared = run_in_child("import model '" + source_name + "'", [&]() -> Result<std::string> {
    KILN_RETURN_IF_ERROR(prepare_with_onnx(proto, source_name));
    std::string bytes;
    if (!proto.SerializeToString(&bytes)) {
      return Status(Error::NotSupported, "import model '" + source_name +
                                             "': the checked model does not serialize "
                                             "(over 2 GiB?)");
    }
    return bytes;
  });
  if (!prepared.ok()) return prepared.status();
  proto.Clear();
  if (!proto.ParseFromString(*prepared)) {
    return Status(Error::Internal,
                  "import model '" + source_name + "': the checked model does not parse back");
  }
  try {
    return Importer(proto, source_name, options, original_opset).run();
  } catch (const std::exception& e) {
    return Status(Error::Internal, "import model '" + source_name + "': " + e.what());
  }
}

Result<ir::Model> import_onnx_file(const std::string& path, const ImportOptions& options) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return Status(Error::AccessFailed, "import model '" + path + "': cannot open the file");
  }
  std::stringstream buffer;
  buffer << in.rdbuf();
  return import_onnx(buffer.str(), path, options);
}

}  // namespace kiln::exporter
