// Loads a .kiln program through an installed kiln, runs method "forward" on inputs of ones
// (shapes from its MethodMeta) and prints the outputs. Exit status 0 on success.
//
// Usage: kiln_consumer PROGRAM.kiln

#include <kiln/extension/module/module.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

namespace {

using kiln::runtime::EValue;
using kiln::runtime::ScalarType;
using kiln::runtime::Tag;
using kiln::runtime::Tensor;
using kiln::runtime::TensorMeta;

// Fills `count` elements of `dtype` at `data` with the value one.
void fill_ones(ScalarType dtype, void* data, int64_t count) {
  for (int64_t i = 0; i < count; ++i) {
    switch (dtype) {
      case ScalarType::Float32:
        static_cast<float*>(data)[i] = 1.0f;
        break;
      case ScalarType::Float64:
        static_cast<double*>(data)[i] = 1.0;
        break;
      case ScalarType::Float16:
        static_cast<uint16_t*>(data)[i] = kiln::runtime::float_to_half(1.0f);
        break;
      case ScalarType::BFloat16:
        static_cast<uint16_t*>(data)[i] = kiln::runtime::float_to_bfloat16(1.0f);
        break;
      case ScalarType::Int8:
        static_cast<int8_t*>(data)[i] = 1;
        break;
      case ScalarType::UInt8:
        static_cast<uint8_t*>(data)[i] = 1;
        break;
      case ScalarType::Int16:
        static_cast<int16_t*>(data)[i] = 1;
        break;
      case ScalarType::Int32:
        static_cast<int32_t*>(data)[i] = 1;
        break;
      case ScalarType::Int64:
        static_cast<int64_t*>(data)[i] = 1;
        break;
      case ScalarType::Bool:
        static_cast<uint8_t*>(data)[i] = 1;
        break;
    }
  }
}

// An input of ones for `meta`; tensor storage is appended to `storage`, which must outlive it.
EValue make_input(const TensorMeta& meta, std::vector<std::vector<uint64_t>>& storage) {
  switch (meta.tag) {
    case Tag::Tensor:
      break;
    case Tag::Bool:
      return EValue(true);
    case Tag::Int:
      return EValue(int64_t{1});
    case Tag::Double:
      return EValue(1.0);
    default:
      return EValue();
  }
  std::vector<int64_t> sizes = meta.sizes;
  for (int64_t& size : sizes) {
    if (size <= 0) size = 1;  // a dynamic dim without a bound: any size works
  }
  int64_t numel = 1;
  for (int64_t size : sizes) numel *= size;
  size_t nbytes = static_cast<size_t>(numel) * kiln::runtime::element_size(meta.dtype);
  storage.emplace_back((nbytes + 7) / 8 + 1, 0);
  void* data = storage.back().data();
  fill_ones(meta.dtype, data, numel);
  return EValue(Tensor(meta.dtype, sizes, data));
}

void print_output(size_t index, const EValue& value) {
  std::cout << "output " << index << ": ";
  if (!value.is_tensor()) {
    std::cout << "(" << kiln::runtime::to_string(value.tag()) << ")\n";
    return;
  }
  const Tensor& tensor = value.to_tensor();
  std::cout << kiln::runtime::to_string(tensor.dtype()) << " "
            << kiln::runtime::shape_to_string(tensor.sizes());
  if (tensor.dtype() == ScalarType::Float32) {
    std::cout << " [";
    int64_t shown = tensor.numel() < 8 ? tensor.numel() : 8;
    for (int64_t i = 0; i < shown; ++i) {
      std::cout << (i ? ", " : "") << tensor.data_ptr<float>()[i];
    }
    std::cout << (tensor.numel() > shown ? ", ...]" : "]");
  }
  std::cout << "\n";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: " << argv[0] << " PROGRAM.kiln\n";
    return 2;
  }
  kiln::extension::Module module{std::string(argv[1])};
  auto status = module.load();
  if (!status.ok()) {
    std::cerr << "load " << argv[1] << ": " << status.message() << "\n";
    return 1;
  }
  auto meta = module.method_meta("forward");
  if (!meta.ok()) {
    std::cerr << "method_meta forward: " << meta.status().message() << "\n";
    return 1;
  }
  std::vector<std::vector<uint64_t>> storage;
  std::vector<EValue> inputs;
  for (const TensorMeta& input : meta->inputs) inputs.push_back(make_input(input, storage));

  auto outputs = module.forward(inputs);
  if (!outputs.ok()) {
    std::cerr << "forward: " << outputs.status().message() << "\n";
    return 1;
  }
  if (outputs->size() != meta->outputs.size()) {
    std::cerr << "forward: returned " << outputs->size() << " outputs (expected "
              << meta->outputs.size() << ")\n";
    return 1;
  }
  for (size_t i = 0; i < outputs->size(); ++i) print_output(i, (*outputs)[i]);
  std::cout << "kiln_consumer: ok\n";
  return 0;
}
