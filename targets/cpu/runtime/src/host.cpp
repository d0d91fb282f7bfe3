// host_info and the host's triple and data layout: what LLVM says of the host (asked through
// the CPU target's LLVM module, src/llvm_module.h), cpuid, libmvec; and loading that module.
#include <llvm/Config/llvm-config.h>  // LLVM_VERSION_STRING, LLVM_HOST_TRIPLE: constants, nothing linked

#include <dlfcn.h>
#include <link.h>
#include <unistd.h>

#ifdef __GLIBC__
#include <gnu/libc-version.h>
#endif
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include <algorithm>
#include <array>
#include <cstdio>
#include <mutex>
#include <string_view>
#include <vector>

#include "kiln/config/modules.h"
#include "kiln/cpu/jit.h"
#include "kiln/cpu/thread_pool.h"
#include "kiln/graph/error.h"
#include "llvm_module.h"

namespace kiln::cpu {
namespace detail {

const LlvmTable& llvm_module() {
  static const LlvmTable& table = *[] {
    using Entry = const LlvmTable* (*)();
    auto entry = reinterpret_cast<Entry>(modules::entry("kiln_cpu_llvm", "kiln_cpu_llvm_table", "the cpu target's JIT"));
    return entry();
  }();
  return table;
}

namespace {
// LLVM's name for the host CPU and its features, asked once (each query runs cpuid for every
// leaf: ~0.1 ms, and a process's first cache hit used to ask four times). The host's facts are
// made once and never destroyed: the JIT set-up thread that first asks for them (frontends/cpp)
// may still read them while the process exits and runs static destructors.
struct HostCpu {
  std::string name;
  std::vector<std::pair<std::string, bool>> features;
};
const HostCpu& host_cpu() {
  static const HostCpu& cpu = *new HostCpu([] {
    HostCpu c;
    llvm_module().host_cpu(c.name, c.features);
    return c;
  }());
  return cpu;
}

bool host_has(const char* feature) {
  for (const auto& [name, on] : host_cpu().features)
    if (name == feature) return on;
  return false;
}
}  // namespace

namespace {
// libmvec's 8-wide entry points (_ZGVdN8v_*) need AVX2; the 4-wide ones SSE only. A host with
// AVX but not AVX2 would vectorise 8 wide and call AVX2 code, so it goes without.
bool host_suits_libmvec() {
#if defined(__x86_64__)
  return !(host_has("avx") && !host_has("avx2"));
#else
  return false;
#endif
}

// The directory of the libm this process loaded ("" when none is found).
std::string libm_directory() {
  std::string dir;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* out) {
        const std::string_view name = info->dlpi_name ? info->dlpi_name : "";
        const size_t slash = name.rfind('/');
        if (slash == std::string_view::npos || name.substr(slash + 1).rfind("libm.so", 0) != 0) return 0;
        *static_cast<std::string*>(out) = std::string(name.substr(0, slash));
        return 1;
      },
      &dir);
  return dir;
}
}  // namespace

bool vector_math_usable() {
  static const bool usable = [] {
    if (!host_suits_libmvec()) return false;
    const std::string dir = libm_directory();
    if (dir.empty()) return vector_math_available();  // no libm seen: ask the loader itself
    return ::access((dir + "/libmvec.so.1").c_str(), R_OK) == 0;
  }();
  return usable;
}

bool vector_math_available() {
  // Loaded into the process's global scope, where the JIT's linker looks symbols up (dlsym), and
  // never closed. Plain dlopen rather than LLVM's DynamicLibrary: its registry is a static that
  // exit() destroys, while the set-up thread may still be loading (a crash at exit, seen in
  // short cuda processes that never touched the cpu target).
  static const bool loaded = [] {
    if (!host_suits_libmvec()) return false;
    return ::dlopen("libmvec.so.1", RTLD_NOW | RTLD_GLOBAL) != nullptr;
  }();
  return loaded;
}

}  // namespace detail

HostIdentity host_identity() {
  static const HostIdentity& identity = *new HostIdentity([] {  // never destroyed, as host_cpu()
    HostIdentity h;
    h.cpu_name = detail::host_cpu().name;
    std::vector<std::string> on;
    for (const auto& [name, enabled] : detail::host_cpu().features)
      if (enabled) on.push_back("+" + name);
    std::sort(on.begin(), on.end());
    for (size_t i = 0; i < on.size(); ++i) h.features += (i ? "," : "") + on[i];
    h.vector_math = detail::vector_math_usable();
    return h;
  }());
  return identity;
}

std::string identity_text(const HostIdentity& h) {
  return h.cpu_name + " " + h.features + (h.vector_math ? " libmvec" : " no-libmvec");
}

std::string host_fingerprint() {
  static const std::string& fingerprint = *new std::string([] {  // never destroyed, as host_cpu()
    std::string text;
#if defined(__x86_64__) || defined(__i386__)
    // The cpuid leaves that say which CPU it is and what it offers (vendor; family, model and
    // stepping; the feature leaves 1, 7 and 0x80000001) and what the OS enables (XCR0); not the
    // core's APIC id. Five cpuid instructions, where LLVM's name and features take about 30.
    auto leaf = [&text](unsigned l, unsigned sub, unsigned ebx_mask) {
      std::array<unsigned, 4> r{};
      __cpuid_count(l, sub, r[0], r[1], r[2], r[3]);
      r[1] &= ebx_mask;
      char buf[64];
      std::snprintf(buf, sizeof buf, "%x.%x:%x,%x,%x,%x ", l, sub, r[0], r[1], r[2], r[3]);
      text += buf;
      return r;
    };
    const unsigned max_leaf = leaf(0, 0, ~0u)[0];
    const bool osxsave = (leaf(1, 0, 0x00ffffffu)[2] >> 27) & 1;  // EBX[31:24]: the APIC id
    if (max_leaf >= 7) {
      leaf(7, 0, ~0u);
      leaf(7, 1, ~0u);
    }
    unsigned max_ext = 0, b = 0, c = 0, d = 0;
    __cpuid(0x80000000u, max_ext, b, c, d);
    if (max_ext >= 0x80000001u) leaf(0x80000001u, 0, ~0u);
    if (osxsave) {
      unsigned lo = 0, hi = 0;
      __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
      text += "xcr0:" + std::to_string((uint64_t{hi} << 32) | lo) + " ";
    }
    text = "cpuid " + text;
#else
    // Elsewhere what the kernel says of the first processor (/proc/cpuinfo): on Arm its
    // implementer, part and features; not the fields that change from core to core or minute
    // to minute.
    static const char* const kept[] = {"vendor_id",       "cpu family", "model",       "model name",
                                       "stepping",        "flags",      "CPU implementer",
                                       "CPU architecture", "CPU variant", "CPU part",  "CPU revision",
                                       "Features",        "isa",        "cpu"};
    if (std::FILE* f = std::fopen("/proc/cpuinfo", "re")) {
      char line[8192];
      while (std::fgets(line, sizeof line, f)) {
        std::string_view l(line);
        if (l == "\n") break;  // the end of the first processor's block
        const size_t colon = l.find(':');
        if (colon == std::string_view::npos) continue;
        std::string_view field = l.substr(0, colon);
        while (!field.empty() && (field.back() == ' ' || field.back() == '\t')) field.remove_suffix(1);
        if (std::find(std::begin(kept), std::end(kept), field) != std::end(kept)) text += l;
      }
      std::fclose(f);
    }
    if (!text.empty()) text = "cpuinfo " + text;
#endif
    if (text.empty()) return "llvm " + identity_text(host_identity());
#ifdef __GLIBC__
    text += std::string("glibc ") + gnu_get_libc_version();
#endif
    return text;  // the triple is in the key's toolchain
  }());
  return fingerprint;
}

namespace {
struct HostFacts {
  HostInfo info;
  std::string data_layout;
};

const HostFacts& host_facts() {
  static const HostFacts& facts = *new HostFacts([] {  // never destroyed, as host_cpu()
    HostFacts f;
    int bits = 0;
    detail::llvm_module().host_target(f.data_layout, bits);
    static_cast<HostIdentity&>(f.info) = host_identity();
    f.info.vector_bits = bits > 0 ? bits : 128;
    f.info.cores = hardware_threads();
    return f;
  }());
  return facts;
}
}  // namespace

HostInfo host_info() { return host_facts().info; }
std::string llvm_version() { return LLVM_VERSION_STRING; }
// LLVM's build constant, not sys::getProcessTriple(): the same for a 64-bit process, and a
// cache key asks for it before anything else has called into LLVM (a first call there costs
// ~0.08 ms of lazy symbol binding).
std::string target_triple() { return LLVM_HOST_TRIPLE; }
std::string data_layout() { return host_facts().data_layout; }

}  // namespace kiln::cpu
