#include <kiln/engine/specialization/devices.h>

#include <sched.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#define KILN_HAVE_CPUID 1
#if __has_include(<sys/platform/x86.h>)  // glibc 2.33 and later
// The header is C: its inline functions return _Bool, which Clang's C++ does not know.
#define _Bool bool  // NOLINT(bugprone-reserved-identifier)
#include <sys/platform/x86.h>
#undef _Bool
#define KILN_HAVE_GLIBC_X86 1
#endif
#endif

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <utility>

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

#if defined(KILN_HAVE_GLIBC_X86)
// The code features of this x86 CPU that the OS has enabled, under the names /proc/cpuinfo's
// flags give them, as glibc found them at start-up ("active": the CPU has the feature and the
// OS saves its register state). Asking the CPU again costs: each cpuid exits a virtual machine,
// about 10 us there, and reading /proc/cpuinfo about 0.3 ms of every process's first load.
std::vector<std::string> x86_code_features() {
  const std::pair<bool, const char*> features[] = {
      {CPU_FEATURE_ACTIVE(SSE4_1), "sse4_1"},
      {CPU_FEATURE_ACTIVE(SSE4_2), "sse4_2"},
      {CPU_FEATURE_ACTIVE(AVX), "avx"},
      {CPU_FEATURE_ACTIVE(FMA), "fma"},
      {CPU_FEATURE_ACTIVE(F16C), "f16c"},
      {CPU_FEATURE_ACTIVE(AVX2), "avx2"},
      {CPU_FEATURE_ACTIVE(AVX_VNNI), "avx_vnni"},
      {CPU_FEATURE_ACTIVE(AVX512F), "avx512f"},
      {CPU_FEATURE_ACTIVE(AVX512DQ), "avx512dq"},
      {CPU_FEATURE_ACTIVE(AVX512_IFMA), "avx512ifma"},
      {CPU_FEATURE_ACTIVE(AVX512CD), "avx512cd"},
      {CPU_FEATURE_ACTIVE(AVX512BW), "avx512bw"},
      {CPU_FEATURE_ACTIVE(AVX512VL), "avx512vl"},
      {CPU_FEATURE_ACTIVE(AVX512_VBMI), "avx512vbmi"},
      {CPU_FEATURE_ACTIVE(AVX512_VBMI2), "avx512_vbmi2"},
      {CPU_FEATURE_ACTIVE(AVX512_VNNI), "avx512_vnni"},
      {CPU_FEATURE_ACTIVE(AVX512_BITALG), "avx512_bitalg"},
      {CPU_FEATURE_ACTIVE(AVX512_VPOPCNTDQ), "avx512_vpopcntdq"},
      {CPU_FEATURE_ACTIVE(AVX512_BF16), "avx512_bf16"},
      {CPU_FEATURE_ACTIVE(AVX512_FP16), "avx512_fp16"},
      {CPU_FEATURE_ACTIVE(AMX_TILE), "amx_tile"},
      {CPU_FEATURE_ACTIVE(AMX_BF16), "amx_bf16"},
      {CPU_FEATURE_ACTIVE(AMX_INT8), "amx_int8"},
  };
  std::vector<std::string> out;
  for (const auto& [has, name] : features) {
    if (has) out.emplace_back(name);
  }
  std::sort(out.begin(), out.end());
  return out;
}
#elif defined(KILN_HAVE_CPUID)
// The code features of this x86 CPU that the OS has enabled, by cpuid and xgetbv, under the
// names /proc/cpuinfo's flags give them: a few cpuid instructions (microseconds; about 10 us
// each in a virtual machine), where reading /proc/cpuinfo costs about 0.3 ms of every
// process's first load. Like the kernel, a feature whose register state the OS does not save
// (XCR0) is absent, and the AVX-512 extensions need AVX-512F.
std::vector<std::string> x86_code_features() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  std::vector<std::string> out;
  if (__get_cpuid(1, &eax, &ebx, &ecx, &edx) == 0) return out;
  const unsigned leaf1_ecx = ecx;
  uint64_t xcr0 = 0;
  if ((leaf1_ecx & (1u << 27)) != 0) {  // OSXSAVE: xgetbv is available
    unsigned low = 0, high = 0;
    __asm__ volatile("xgetbv" : "=a"(low), "=d"(high) : "c"(0));
    xcr0 = (uint64_t{high} << 32) | low;
  }
  const bool avx_state = (xcr0 & 0x6) == 0x6;                    // XMM, YMM
  const bool avx512_state = avx_state && (xcr0 & 0xe0) == 0xe0;  // opmask, ZMM
  const bool amx_state = (xcr0 & 0x60000) == 0x60000;            // tile config and data
  unsigned l7_ebx = 0, l7_ecx = 0, l7_edx = 0, l7s1_eax = 0;
  if (__get_cpuid_max(0, nullptr) >= 7) {
    __cpuid_count(7, 0, eax, l7_ebx, l7_ecx, l7_edx);
    if (eax >= 1) __cpuid_count(7, 1, l7s1_eax, ebx, ecx, edx);
  }
  auto bit = [](unsigned reg, int n) { return (reg & (1u << n)) != 0; };
  const bool avx512f = avx512_state && bit(l7_ebx, 16);
  const std::pair<bool, const char*> features[] = {
      {bit(leaf1_ecx, 19), "sse4_1"},
      {bit(leaf1_ecx, 20), "sse4_2"},
      {avx_state && bit(leaf1_ecx, 28), "avx"},
      {avx_state && bit(leaf1_ecx, 12), "fma"},
      {avx_state && bit(leaf1_ecx, 29), "f16c"},
      {avx_state && bit(l7_ebx, 5), "avx2"},
      {avx_state && bit(l7s1_eax, 4), "avx_vnni"},
      {avx512f, "avx512f"},
      {avx512f && bit(l7_ebx, 17), "avx512dq"},
      {avx512f && bit(l7_ebx, 21), "avx512ifma"},
      {avx512f && bit(l7_ebx, 28), "avx512cd"},
      {avx512f && bit(l7_ebx, 30), "avx512bw"},
      {avx512f && bit(l7_ebx, 31), "avx512vl"},
      {avx512f && bit(l7_ecx, 1), "avx512vbmi"},
      {avx512f && bit(l7_ecx, 6), "avx512_vbmi2"},
      {avx512f && bit(l7_ecx, 11), "avx512_vnni"},
      {avx512f && bit(l7_ecx, 12), "avx512_bitalg"},
      {avx512f && bit(l7_ecx, 14), "avx512_vpopcntdq"},
      {avx512f && bit(l7s1_eax, 5), "avx512_bf16"},
      {avx512f && bit(l7_edx, 23), "avx512_fp16"},
      {amx_state && bit(l7_edx, 24), "amx_tile"},
      {amx_state && bit(l7_edx, 22), "amx_bf16"},
      {amx_state && bit(l7_edx, 25), "amx_int8"},
  };
  for (const auto& [has, name] : features) {
    if (has) out.emplace_back(name);
  }
  std::sort(out.begin(), out.end());
  return out;
}
#endif

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
  // The features do not change while the process runs; read them once.
  static const std::string features = [] {
    std::string text = architecture();
    text += ':';
#if defined(KILN_HAVE_CPUID)
    const std::vector<std::string> features = x86_code_features();
#else
    const std::vector<std::string>& features = read_cpuinfo().features;
#endif
    for (size_t i = 0; i < features.size(); ++i) {
      if (i != 0) text += ',';
      text += features[i];
    }
    return text;
  }();
  return features;
}

}  // namespace kiln::engine::specialization
