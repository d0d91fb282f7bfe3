// host_info and the host's triple and data layout, from LLVM's host detection.
#include <llvm/Support/CommandLine.h>
#include <llvm/ADT/StringMap.h>
#include <llvm/Analysis/TargetTransformInfo.h>
#include <llvm/Config/llvm-config.h>
#include <llvm/IR/Function.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/Support/Host.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Target/TargetMachine.h>

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

#include "kiln/cpu/jit.h"
#include "kiln/cpu/thread_pool.h"
#include "kiln/graph/error.h"
#include "llvm_setup.h"

namespace kiln::cpu {
namespace detail {
namespace {
// The host's features, asked once (each query runs cpuid for every leaf: ~0.1 ms, and a
// process's first cache hit used to ask four times).
// The host's facts are made once and never destroyed: the JIT set-up thread that first asks for
// them (frontends/cpp) may still read them while the process exits and runs static destructors.
const llvm::StringMap<bool>& host_features() {
  static const llvm::StringMap<bool>* features = [] {
    auto* f = new llvm::StringMap<bool>();
    llvm::sys::getHostCPUFeatures(*f);
    return f;
  }();
  return *features;
}

// LLVM's name for the host CPU, asked once (cpuid again).
const std::string& host_cpu_name() {
  static const std::string* name = new std::string(llvm::sys::getHostCPUName().str());
  return *name;
}

bool host_has(const char* feature) {
  const llvm::StringMap<bool>& features = host_features();
  auto it = features.find(feature);
  return it != features.end() && it->second;
}
}  // namespace

void init_llvm() {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    llvm::InitializeNativeTargetAsmParser();
    // No vectorised epilogue loop after the main vector loop: kernels' inner loops are long, so
    // it buys little, and it doubles the code (and the compile time) of every vector loop.
    // Options are process-wide; only set them when the host program has not.
    if (auto* opt = llvm::cl::getRegisteredOptions().lookup("enable-epilogue-vectorization");
        opt && opt->getNumOccurrences() == 0) {
      const char* argv[] = {"kiln", "-enable-epilogue-vectorization=false"};
      llvm::cl::ParseCommandLineOptions(2, argv, "", &llvm::nulls());
    }
  });
}

namespace {
// libmvec's 8-wide entry points (_ZGVdN8v_*) need AVX2; the 4-wide ones SSE only. A host with
// AVX but not AVX2 would vectorise 8 wide and call AVX2 code, so it goes without.
bool host_suits_libmvec() {
  return llvm::sys::getProcessTriple().find("x86_64") == 0 && !(host_has("avx") && !host_has("avx2"));
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

llvm::orc::JITTargetMachineBuilder host_machine_builder(int opt_level) {
  init_llvm();
  llvm::orc::JITTargetMachineBuilder jtmb((llvm::Triple(llvm::sys::getProcessTriple())));
  jtmb.setCPU(host_cpu_name());
  for (const auto& f : host_features()) jtmb.getFeatures().AddFeature(f.first(), f.second);
  static const llvm::CodeGenOpt::Level levels[] = {llvm::CodeGenOpt::None, llvm::CodeGenOpt::Less,
                                                   llvm::CodeGenOpt::Default, llvm::CodeGenOpt::Aggressive};
  jtmb.setCodeGenOptLevel(levels[std::clamp(opt_level, 0, 3)]);
  return jtmb;
}

}  // namespace detail

HostIdentity host_identity() {
  static const HostIdentity& identity = *new HostIdentity([] {  // never destroyed, as host_features()
    HostIdentity h;
    h.cpu_name = detail::host_cpu_name();
    std::vector<std::string> on;
    for (const auto& e : detail::host_features())
      if (e.second) on.push_back("+" + e.first().str());
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
  static const std::string& fingerprint = *new std::string([] {  // never destroyed, as host_features()
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
  static const HostFacts& facts = *new HostFacts([] {  // never destroyed, as host_features()
    HostFacts f;
    auto jtmb = detail::host_machine_builder(3);
    auto tm = jtmb.createTargetMachine();
    if (!tm) fail("cpu: cannot create a target machine for this host: ", llvm::toString(tm.takeError()));
    f.data_layout = (*tm)->createDataLayout().getStringRepresentation();
    static_cast<HostIdentity&>(f.info) = host_identity();
    // Ask the target what the vectorisers will use: on some AVX-512 CPUs LLVM prefers 256 bits.
    llvm::LLVMContext ctx;
    llvm::Module m("kiln.host_probe", ctx);
    m.setDataLayout((*tm)->createDataLayout());
    auto* fn = llvm::Function::Create(llvm::FunctionType::get(llvm::Type::getVoidTy(ctx), false),
                                      llvm::Function::ExternalLinkage, "probe", m);
    auto tti = (*tm)->getTargetTransformInfo(*fn);
    int bits = static_cast<int>(
        tti.getRegisterBitWidth(llvm::TargetTransformInfo::RGK_FixedWidthVector).getFixedValue());
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
