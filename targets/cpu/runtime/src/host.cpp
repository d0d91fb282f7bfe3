// host_info and the host's triple and data layout, from LLVM's host detection.
#include <llvm/Support/CommandLine.h>
#include <llvm/ADT/StringMap.h>
#include <llvm/Analysis/TargetTransformInfo.h>
#include <llvm/Config/llvm-config.h>
#include <llvm/IR/Function.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/Support/DynamicLibrary.h>
#include <llvm/Support/Host.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Target/TargetMachine.h>

#include <algorithm>
#include <mutex>
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

bool vector_math_available() {
  // libmvec's 8-wide entry points (_ZGVdN8v_*) need AVX2; the 4-wide ones SSE only. A host
  // with AVX but not AVX2 would vectorise 8 wide and call AVX2 code, so it goes without.
  static const bool usable = [] {
    if (llvm::sys::getProcessTriple().find("x86_64") != 0 || (host_has("avx") && !host_has("avx2"))) return false;
    std::string error;
    return !llvm::sys::DynamicLibrary::LoadLibraryPermanently("libmvec.so.1", &error);
  }();
  return usable;
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
    h.vector_math = detail::vector_math_available();
    return h;
  }());
  return identity;
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
std::string target_triple() { return llvm::sys::getProcessTriple(); }
std::string data_layout() { return host_facts().data_layout; }

}  // namespace kiln::cpu
