#pragma once

// Builds small ONNX models in code for importer tests.
#include <onnx/onnx_pb.h>

#include <string>
#include <vector>

namespace kiln::exporter::test {

class OnnxModelBuilder {
 public:
  explicit OnnxModelBuilder(int64_t opset = 13) {
    model_.set_ir_version(7);
    auto* op = model_.add_opset_import();
    op->set_domain("");
    op->set_version(opset);
    model_.mutable_graph()->set_name("test");
  }
  OnnxModelBuilder& input(const std::string& name, int elem_type, std::vector<int64_t> dims,
                          std::vector<std::string> params = {}) {
    add_value(model_.mutable_graph()->add_input(), name, elem_type, dims, params);
    return *this;
  }
  OnnxModelBuilder& output(const std::string& name, int elem_type, std::vector<int64_t> dims,
                           std::vector<std::string> params = {}) {
    add_value(model_.mutable_graph()->add_output(), name, elem_type, dims, params);
    return *this;
  }
  OnnxModelBuilder& initializer_f32(const std::string& name, std::vector<int64_t> dims,
                                    std::vector<float> values) {
    auto* t = model_.mutable_graph()->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    for (auto d : dims) t->add_dims(d);
    for (auto v : values) t->add_float_data(v);
    return *this;
  }
  OnnxModelBuilder& initializer_i64(const std::string& name, std::vector<int64_t> dims,
                                    std::vector<int64_t> values) {
    auto* t = model_.mutable_graph()->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::INT64);
    for (auto d : dims) t->add_dims(d);
    for (auto v : values) t->add_int64_data(v);
    return *this;
  }
  onnx::NodeProto& node(const std::string& op, std::vector<std::string> inputs,
                        std::vector<std::string> outputs, const std::string& name = "") {
    auto* n = model_.mutable_graph()->add_node();
    n->set_op_type(op);
    n->set_name(name.empty() ? op + std::to_string(model_.graph().node_size()) : name);
    for (auto& i : inputs) n->add_input(i);
    for (auto& o : outputs) n->add_output(o);
    return *n;
  }
  static void int_attribute(onnx::NodeProto& n, const std::string& name, int64_t v) {
    auto* a = n.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(v);
  }
  static void ints_attribute(onnx::NodeProto& n, const std::string& name,
                             const std::vector<int64_t>& v) {
    auto* a = n.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INTS);
    for (int64_t i : v) a->add_ints(i);
  }
  static void float_attribute(onnx::NodeProto& n, const std::string& name, float v) {
    auto* a = n.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::FLOAT);
    a->set_f(v);
  }
  /// A graph of one node `op` over `inputs` (outer values, for an If branch) into `output`, an
  /// f32 tensor of `dims` (0 with a name in `params`: symbolic).
  static onnx::GraphProto one_node_graph(const std::string& name, const std::string& op,
                                         std::vector<std::string> inputs,
                                         const std::string& output, std::vector<int64_t> dims,
                                         std::vector<std::string> params = {}) {
    onnx::GraphProto g;
    g.set_name(name);
    auto* n = g.add_node();
    n->set_op_type(op);
    n->set_name(name + "_" + op);
    for (auto& i : inputs) n->add_input(i);
    n->add_output(output);
    add_value(g.add_output(), output, onnx::TensorProto::FLOAT, dims, params);
    return g;
  }
  static void graph_attribute(onnx::NodeProto& n, const std::string& name,
                              const onnx::GraphProto& graph) {
    auto* a = n.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::GRAPH);
    *a->mutable_g() = graph;
  }
  onnx::ModelProto& model() { return model_; }
  std::string bytes() const { return model_.SerializeAsString(); }

 private:
  static void add_value(onnx::ValueInfoProto* v, const std::string& name, int elem_type,
                        const std::vector<int64_t>& dims, const std::vector<std::string>& params) {
    v->set_name(name);
    auto* t = v->mutable_type()->mutable_tensor_type();
    t->set_elem_type(elem_type);
    auto* shape = t->mutable_shape();
    for (size_t i = 0; i < dims.size(); ++i) {
      auto* d = shape->add_dim();
      if (i < params.size() && !params[i].empty()) {
        d->set_dim_param(params[i]);
      } else {
        d->set_dim_value(dims[i]);
      }
    }
  }
  onnx::ModelProto model_;
};

}  // namespace kiln::exporter::test
