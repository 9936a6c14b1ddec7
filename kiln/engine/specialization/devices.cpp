#include <kiln/engine/specialization/devices.h>

#include <sched.h>

#include <algorithm>
#include <iterator>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

namespace kiln::engine::specialization {
namespace {

// Features that select different kernels or change a compiled plan. Keep this list
// append-only: removing a name changes cpu_features() and so every cache key on machines
// that have it.
constexpr std::string_view kCodeFeatures[] = {
    // x86
    "sse4_1", "sse4_2", "avx", "avx2", "fma", "f16c", "avx_vnni", "avx512f", "avx512cd",
    "avx512bw", "avx512dq", "avx512vl", "avx512ifma", "avx512vbmi", "avx512_vbmi2",
    "avx512_vnni", "avx512_bitalg", "avx512_vpopcntdq", "avx512_bf16", "avx512_fp16",
    "amx_tile", "amx_bf16", "amx_int8",
    // Arm
    "asimd", "asimdhp", "asimddp", "fphp", "i8mm", "bf16", "sve", "sve2", "sme"};

bool is_code_feature(std::string_view name) {
  return std::find(std::begin(kCodeFeatures), std::end(kCodeFeatures), name) !=
         std::end(kCodeFeatures);
}

std::string_view trim(std::string_view text) {
  const auto first = text.find_first_not_of(" \t");
  if (first == std::string_view::npos) return {};
  const auto last = text.find_last_not_of(" \t\r");
  return text.substr(first, last - first + 1);
}

int available_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    const int count = CPU_COUNT(&set);
    if (count > 0) return count;
  }
  return std::max(1u, std::thread::hardware_concurrency());
}

const char* architecture() {
#if defined(__x86_64__)
  return "x86_64";
#elif defined(__aarch64__)
  return "aarch64";
#elif defined(__arm__)
  return "arm";
#elif defined(__riscv)
  return "riscv";
#else
  return "unknown";
#endif
}

// The first processor's block of /proc/cpuinfo, read once: the kernel formats the file at each
// read, and every block but the first repeats what this needs (a load asks for it each time).
const CpuInfo& read_cpuinfo() {
  static const CpuInfo info = [] {
    std::ifstream in("/proc/cpuinfo");
    std::string text, line;
    while (std::getline(in, line)) {
      if (line.find_first_not_of(" \t\r") == std::string::npos && !text.empty()) break;
      text += line;
      text += '\n';
    }
    return parse_cpuinfo(text);
  }();
  return info;
}

}  // namespace

CpuInfo parse_cpuinfo(std::string_view text) {
  CpuInfo info;
  bool have_features = false;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    const std::string_view key = trim(line.substr(0, colon));
    const std::string_view value = trim(line.substr(colon + 1));
    // x86 says "model name"; some Arm kernels only give "Hardware" or "CPU part".
    if ((key == "model name" || key == "Hardware") && info.model_name.empty()) {
      info.model_name = std::string(value);
    } else if ((key == "flags" || key == "Features") && !have_features) {
      have_features = true;
      std::istringstream words{std::string(value)};
      std::string word;
      while (words >> word) {
        if (is_code_feature(word)) info.features.push_back(word);
      }
    }
  }
  std::sort(info.features.begin(), info.features.end());
  info.features.erase(std::unique(info.features.begin(), info.features.end()),
                      info.features.end());
  return info;
}

std::vector<Device> available_devices() {
  const CpuInfo& info = read_cpuinfo();
  Device cpu;
  cpu.name = info.model_name.empty() ? "cpu" : info.model_name;
  cpu.kind = ComputeKind::Cpu;
  cpu.num_cores = available_cores();
  cpu.features = info.features;
  return {std::move(cpu)};
}

std::string cpu_features() {
  // /proc/cpuinfo does not change while the process runs; read it once.
  static const std::string features = [] {
    std::string text = architecture();
    text += ':';
    const CpuInfo& info = read_cpuinfo();
    for (size_t i = 0; i < info.features.size(); ++i) {
      if (i != 0) text += ',';
      text += info.features[i];
    }
    return text;
  }();
  return features;
}

}  // namespace kiln::engine::specialization
