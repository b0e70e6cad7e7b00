// Encoding through the generated classes of src/export/onnx_proto/onnx.proto (ONNX's field
// numbers).
#include "export/onnx_export.h"

#include <bit>
#include <cstring>

#include "base/atomic_file.h"
#include "base/error.h"
#include "export/onnx_proto/onnx.pb.h"

namespace dtrain {
namespace {

namespace proto = ::dtrain::onnx;

void set_shape(const OnnxValue& value, proto::ValueInfoProto* info) {
  info->set_name(value.name);
  proto::TypeProto::Tensor* tensor = info->mutable_type()->mutable_tensor_type();
  tensor->set_elem_type(proto::TensorProto::FLOAT);
  for (const int64_t d : value.shape) {
    proto::TensorShapeProto::Dimension* dim = tensor->mutable_shape()->add_dim();
    if (d == kOnnxBatch) {
      dim->set_dim_param("batch");
    } else {
      dim->set_dim_value(d);
    }
  }
}

// raw_data is little-endian whatever the host; dtrain builds only for little-endian machines.
template <typename T>
std::string little_endian_bytes(const std::vector<T>& values) {
  static_assert(std::endian::native == std::endian::little);
  std::string bytes(values.size() * sizeof(T), '\0');
  if (!values.empty()) std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

void set_initializer(const OnnxInitializer& init, proto::TensorProto* tensor) {
  tensor->set_name(init.name);
  for (const int64_t d : init.dims) tensor->add_dims(d);
  if (init.is_int64) {
    tensor->set_data_type(proto::TensorProto::INT64);
    tensor->set_raw_data(little_endian_bytes(init.int64s));
  } else {
    tensor->set_data_type(proto::TensorProto::FLOAT);
    tensor->set_raw_data(little_endian_bytes(init.floats));
  }
}

void set_node(const OnnxNode& node, proto::NodeProto* out) {
  out->set_op_type(node.op_type);
  out->set_name(node.name);
  for (const std::string& input : node.inputs) out->add_input(input);
  for (const std::string& output : node.outputs) out->add_output(output);
  for (const OnnxAttribute& attribute : node.attributes) {
    proto::AttributeProto* a = out->add_attribute();
    a->set_name(attribute.name);
    if (attribute.real) {
      a->set_type(proto::AttributeProto::FLOAT);
      a->set_f(*attribute.real);
    } else if (attribute.is_list) {
      a->set_type(proto::AttributeProto::INTS);
      for (const int64_t v : attribute.ints) a->add_ints(v);
    } else {
      a->set_type(proto::AttributeProto::INT);
      a->set_i(attribute.ints.at(0));
    }
  }
}

}  // namespace

std::string encode_onnx_model(const OnnxGraph& graph, const OnnxModelInfo& info) {
  proto::ModelProto model;
  model.set_ir_version(kOnnxIrVersion);
  proto::OperatorSetIdProto* opset = model.add_opset_import();
  opset->set_domain("");
  opset->set_version(kOnnxOpset);
  model.set_producer_name("dtrain");
  model.set_model_version(1);
  if (!info.doc_string.empty()) model.set_doc_string(info.doc_string);
  for (const auto& [key, value] : info.metadata) {
    proto::StringStringEntryProto* entry = model.add_metadata_props();
    entry->set_key(key);
    entry->set_value(value);
  }
  proto::GraphProto* g = model.mutable_graph();
  g->set_name(graph.name);
  for (const OnnxNode& node : graph.nodes) set_node(node, g->add_node());
  for (const OnnxInitializer& init : graph.initializers)
    set_initializer(init, g->add_initializer());
  set_shape(graph.input, g->add_input());
  set_shape(graph.output, g->add_output());
  for (const OnnxValue& value : graph.intermediates) set_shape(value, g->add_value_info());
  std::string bytes;
  if (!model.SerializeToString(&bytes)) throw Error("ONNX export: the model does not serialize");
  return bytes;
}

void write_onnx_model(const std::filesystem::path& path, const OnnxGraph& graph,
                      const OnnxModelInfo& info) {
  const std::string bytes = encode_onnx_model(graph, info);
  AtomicFileWriter writer(path, kSharedFileMode);
  writer.append(bytes);
  writer.commit();
}

}  // namespace dtrain
