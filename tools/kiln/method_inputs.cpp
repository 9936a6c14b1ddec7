// Inputs of a method for `kiln run` and `kiln bench`: .npy files named on the command line,
// seeded random data for the rest.

#include <tools/kiln/method_inputs.h>
#include <tools/kiln/npy.h>
#include <tools/kiln/option_args.h>
#include <tools/kiln/tensor_io.h>

#include <algorithm>
#include <map>
#include <random>

namespace kiln::tools {

using extension::Module;
using extension::TensorPtr;
using runtime::Error;
using runtime::EValue;
using runtime::MethodMeta;
using runtime::Result;
using runtime::Status;

namespace {

std::string quoted(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& name : names) out += (out.empty() ? "'" : ", '") + name + "'";
  return out.empty() ? "none" : out;
}

// Maps input name → .npy path, checking every name against the method's inputs.
Result<std::map<std::string, std::string>> input_files(const std::vector<std::string>& input_args,
                                                       const MethodMeta& meta) {
  std::map<std::string, std::string> files;
  std::vector<std::string> names;
  for (const auto& input : meta.inputs) names.push_back(input.name);
  for (const auto& text : input_args) {
    KILN_ASSIGN_OR_RETURN(auto pair, parse_name_value(text, "--input"));
    if (std::find(names.begin(), names.end(), pair.first) == names.end()) {
      return Status(Error::NotFound, "parse --input '" + text + "': method '" + meta.name +
                                         "' has no input '" + pair.first + "' (expected one of " +
                                         quoted(names) + ")");
    }
    if (!files.emplace(pair.first, pair.second).second) {
      return Status(Error::InvalidArgument, "parse --input '" + text + "': input '" + pair.first +
                                                "' is given twice (expected once)");
    }
  }
  return files;
}

// Reads one input from its .npy file and checks its dtype, so a float64 array from NumPy gets
// a hint instead of a bare mismatch.
Result<TensorPtr> read_input(const runtime::TensorMeta& meta, const std::string& path) {
  KILN_ASSIGN_OR_RETURN(NpyArray array, read_npy(path));
  if (array.dtype != meta.dtype) {
    auto descr = npy_descr(meta.dtype);
    return Status(Error::InvalidArgument,
                  "read input '" + meta.name + "' from '" + path + "': dtype " +
                      std::string(runtime::to_string(array.dtype)) + " (expected " +
                      std::string(runtime::to_string(meta.dtype)) + "; convert with " +
                      "a.astype('" + (descr.ok() ? *descr : "?") + "'))");
  }
  return tensor_from_npy(array);
}

}  // namespace

Result<std::string> choose_method(Module& module, const std::string& requested) {
  if (!requested.empty()) return requested;
  KILN_ASSIGN_OR_RETURN(auto names, module.method_names());
  for (const auto& name : names) {
    if (name == "forward") return name;
  }
  if (names.size() == 1) return names[0];
  return Status(Error::InvalidArgument, "choose a method of program '" + module.path() +
                                            "': it has methods " + quoted(names) +
                                            " (expected --method NAME)");
}

Result<std::vector<MethodInput>> prepare_inputs(const MethodMeta& meta,
                                                const std::vector<std::string>& input_args,
                                                uint64_t seed) {
  KILN_ASSIGN_OR_RETURN(auto files, input_files(input_args, meta));
  std::mt19937_64 rng(seed);
  std::vector<MethodInput> inputs(meta.inputs.size());
  for (size_t i = 0; i < meta.inputs.size(); ++i) {
    const auto& input = meta.inputs[i];
    inputs[i].name = input.name;
    auto file = files.find(input.name);
    if (file != files.end()) {
      KILN_ASSIGN_OR_RETURN(inputs[i].tensor, read_input(input, file->second));
      inputs[i].source = "from " + file->second;
    } else if (input.tag == runtime::Tag::Tensor) {
      KILN_ASSIGN_OR_RETURN(inputs[i].tensor, random_tensor(input, rng));
      inputs[i].source = "random (seed " + std::to_string(seed) + ")";
    }
  }
  return inputs;
}

std::vector<EValue> input_values(const std::vector<MethodInput>& inputs,
                                 const runtime::Method& method) {
  std::vector<EValue> values;
  values.reserve(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    values.push_back(inputs[i].tensor ? EValue(*inputs[i].tensor) : method.get_input(i));
  }
  return values;
}

}  // namespace kiln::tools
