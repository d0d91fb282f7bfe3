// libkiln_cpu_llvm.so: the CPU runtime's LLVM half (src/llvm_module.h). LLVM IR text -> verified,
// O3-optimised module -> object code (compiled on the calling thread by a per-thread
// TargetMachine), and object code -> memory of its own, linked by RuntimeDyld. RuntimeDyld is
// what ORC's LLJIT links with on ELF x86-64; used directly, a link needs no JIT session, no target
// and no LLVM initialisation, which a process's first cache hit would otherwise wait for
// (docs/cpu-runtime.md). Which symbols kernels may call is the runtime's decision (`resolve`).
#include <llvm/ADT/StringMap.h>
#include <llvm/Analysis/TargetLibraryInfo.h>
#include <llvm/Analysis/TargetTransformInfo.h>
#include <llvm/AsmParser/Parser.h>
#include <llvm/Config/llvm-config.h>
#include <llvm/ExecutionEngine/JITSymbol.h>
#include <llvm/ExecutionEngine/Orc/CompileUtils.h>
#include <llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h>
#include <llvm/ExecutionEngine/RuntimeDyld.h>
#include <llvm/ExecutionEngine/SectionMemoryManager.h>
#include <llvm/IR/Function.h>
#include <llvm/IR/InlineAsm.h>
#include <llvm/IR/Instructions.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <llvm/IR/Verifier.h>
#include <llvm/Object/ObjectFile.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/CommandLine.h>
#include <llvm/Support/Host.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/SourceMgr.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>
#include <llvm/TargetParser/Triple.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <mutex>

#include "kiln/config/modules.h"
#include "kiln/graph/error.h"
#include "llvm_module.h"

KILN_MODULE_ABI_FUNCTION

namespace kiln::cpu::detail {

// The code and data of one linked object, and the unwind tables registered for them (so that
// debuggers, profilers and sanitizers can walk through kernels); freed, and deregistered, together.
struct LinkedCode {
  llvm::SectionMemoryManager memory;
  ~LinkedCode() { memory.deregisterEHFrames(); }
};

namespace {

// The host's features and CPU name, asked once (each query runs cpuid for every leaf) and never
// destroyed: a set-up thread may still read them while the process exits.
const llvm::StringMap<bool>& host_features() {
  static const llvm::StringMap<bool>* features = [] {
    auto* f = new llvm::StringMap<bool>();
    llvm::sys::getHostCPUFeatures(*f);
    return f;
  }();
  return *features;
}

const std::string& host_cpu_name() {
  static const std::string* name = new std::string(llvm::sys::getHostCPUName().str());
  return *name;
}

// InitializeNativeTarget / AsmPrinter / AsmParser and LLVM's options, exactly once.
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

// Host triple, CPU and features; opt_level 0..3 sets the code generator's level.
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

// One TargetMachine per thread and level: optimisation (for TargetTransformInfo) and code
// generation use it. A TargetMachine may compile many modules but not two at a time.
llvm::TargetMachine& thread_machine(int opt_level) {
  thread_local std::unique_ptr<llvm::TargetMachine> machines[4];
  auto& tm = machines[opt_level];
  if (!tm) {
    auto made = host_machine_builder(opt_level).createTargetMachine();
    if (!made) fail("cpu JIT: cannot create a target machine: ", llvm::toString(made.takeError()));
    tm = std::move(*made);
  }
  return *tm;
}

void optimise(llvm::Module& m, llvm::TargetMachine& tm, int opt_level, bool vector_math) {
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  llvm::PipelineTuningOptions tuning;
  tuning.LoopVectorization = opt_level >= 2;
  tuning.SLPVectorization = opt_level >= 2;
  tuning.LoopUnrolling = opt_level >= 2;
  tuning.LoopInterleaving = opt_level >= 2;
  llvm::PassBuilder pb(&tm, tuning);
  // Registered before the defaults so it wins: the host's libm, plus libmvec's vector variants.
  llvm::Triple triple(m.getTargetTriple());
  llvm::TargetLibraryInfoImpl tlii(triple);
  if (vector_math) tlii.addVectorizableFunctionsFromVecLib(llvm::TargetLibraryInfoImpl::LIBMVEC_X86, triple);
  fam.registerPass([&] { return llvm::TargetLibraryAnalysis(tlii); });
  pb.registerModuleAnalyses(mam);
  pb.registerCGSCCAnalyses(cgam);
  pb.registerFunctionAnalyses(fam);
  pb.registerLoopAnalyses(lam);
  pb.crossRegisterProxies(lam, fam, cgam, mam);
  static const llvm::OptimizationLevel levels[] = {llvm::OptimizationLevel::O0, llvm::OptimizationLevel::O1,
                                                   llvm::OptimizationLevel::O2, llvm::OptimizationLevel::O3};
  llvm::ModulePassManager mpm = opt_level == 0 ? pb.buildO0DefaultPipeline(levels[0])
                                               : pb.buildPerModuleDefaultPipeline(levels[opt_level]);
  mpm.run(m, mam);
}

// An object's undefined symbols, resolved by the runtime's function.
class Resolver final : public llvm::LegacyJITSymbolResolver {
 public:
  explicit Resolver(void* (*resolve)(const std::string&)) : resolve_(resolve) {}
  llvm::JITSymbol findSymbolInLogicalDylib(const std::string&) override { return nullptr; }
  llvm::JITSymbol findSymbol(const std::string& name) override {
    void* address = resolve_ ? resolve_(name) : nullptr;
    if (!address) return nullptr;
    return llvm::JITSymbol(static_cast<llvm::JITTargetAddress>(reinterpret_cast<uintptr_t>(address)),
                           llvm::JITSymbolFlags::Exported | llvm::JITSymbolFlags::Callable);
  }

 private:
  void* (*resolve_)(const std::string&);
};

void host_cpu(std::string& name, std::vector<std::pair<std::string, bool>>& features) {
  name = host_cpu_name();
  features.clear();
  for (const auto& e : host_features()) features.emplace_back(e.first().str(), e.second);
}

void host_target(std::string& data_layout, int& vector_bits) {
  auto tm = host_machine_builder(3).createTargetMachine();
  if (!tm) fail("cpu: cannot create a target machine for this host: ", llvm::toString(tm.takeError()));
  data_layout = (*tm)->createDataLayout().getStringRepresentation();
  // Ask the target what the vectorisers will use: on some AVX-512 CPUs LLVM prefers 256 bits.
  llvm::LLVMContext ctx;
  llvm::Module m("kiln.host_probe", ctx);
  m.setDataLayout((*tm)->createDataLayout());
  auto* fn = llvm::Function::Create(llvm::FunctionType::get(llvm::Type::getVoidTy(ctx), false),
                                    llvm::Function::ExternalLinkage, "probe", m);
  auto tti = (*tm)->getTargetTransformInfo(*fn);
  vector_bits = static_cast<int>(tti.getRegisterBitWidth(llvm::TargetTransformInfo::RGK_FixedWidthVector).getFixedValue());
}

std::string compile(std::string_view ir_text, const std::string& name, int opt_level, bool vector_math,
                    const std::vector<std::string>& kernel_entries, CompileTimings& timings, std::string* optimized_ir) {
  using Clock = std::chrono::steady_clock;
  auto mark = Clock::now();
  auto lap = [&mark] {
    const auto now = Clock::now();
    const double seconds = std::chrono::duration<double>(now - mark).count();
    mark = now;
    return seconds;
  };
  KILN_CHECK(opt_level >= 0 && opt_level <= 3, "cpu JIT: module '", name, "': opt_level ", opt_level,
             " is not in 0..3");
  init_llvm();
  llvm::TargetMachine& tm = thread_machine(opt_level);
  lap();  // first-use setup (LLVM, this thread's TargetMachine) is in no phase

  // Parse (the copy gives LLVM's lexer the terminating NUL it needs) and verify.
  auto context = std::make_unique<llvm::LLVMContext>();
  auto buffer = llvm::MemoryBuffer::getMemBufferCopy(llvm::StringRef(ir_text.data(), ir_text.size()), name);
  llvm::SMDiagnostic diagnostic;
  std::unique_ptr<llvm::Module> m = llvm::parseAssembly(buffer->getMemBufferRef(), diagnostic, *context);
  if (!m) {
    fail("cpu JIT: LLVM IR of module '", name, "' does not parse: ", name, ":", diagnostic.getLineNo(), ":",
         diagnostic.getColumnNo() + 1, ": ", diagnostic.getMessage().str(), "\n",
         diagnostic.getLineContents().str());
  }
  {
    std::string text;
    llvm::raw_string_ostream os(text);
    if (llvm::verifyModule(*m, &os)) fail("cpu JIT: LLVM IR of module '", name, "' is invalid: ", os.str());
  }
  // Kiln's code generator never writes assembly; a module that has some (a plan file's kernel
  // making system calls) is refused, as calls outside the runtime's resolver are at link time.
  KILN_CHECK(m->getModuleInlineAsm().empty(), "cpu JIT: module '", name,
             "' has module-level assembly, which Kiln's code generator never writes: refused (a plan is native code)");
  for (const llvm::Function& f : *m)
    for (const llvm::BasicBlock& bb : f)
      for (const llvm::Instruction& in : bb)
        if (const auto* call = llvm::dyn_cast<llvm::CallBase>(&in); call && call->isInlineAsm())
          fail("cpu JIT: module '", name, "': function '", f.getName().str(),
               "' has inline assembly, which Kiln's code generator never writes: refused (a plan is native code)");

  // The kernels the runtime calls: defined here, with the type it calls them with (a plan whose
  // kernel signature does not match its launch is refused, not called).
  {
    llvm::Type* ptr = llvm::PointerType::get(*context, 0);
    llvm::Type* i64 = llvm::Type::getInt64Ty(*context);
    llvm::FunctionType* kernel = llvm::FunctionType::get(llvm::Type::getVoidTy(*context), {ptr, ptr, i64, i64}, false);
    for (const std::string& entry : kernel_entries) {
      const llvm::Function* f = m->getFunction(entry);
      KILN_CHECK(f && !f->isDeclaration(), "cpu JIT: module '", name, "' does not define kernel '", entry, "'");
      if (f->getFunctionType() != kernel) {
        std::string type;
        llvm::raw_string_ostream os(type);
        f->getFunctionType()->print(os);
        fail("cpu JIT: kernel '", entry, "' of module '", name, "' has type ", os.str(),
             ", not the kernel signature void (ptr, ptr, i64, i64) the runtime calls it with: refused");
      }
    }
  }
  timings.parse = lap();

  // The host's triple and data layout: fill in when absent, refuse a foreign data layout.
  const llvm::DataLayout host_layout = tm.createDataLayout();
  if (m->getDataLayoutStr().empty()) {
    m->setDataLayout(host_layout);
  } else if (m->getDataLayout() != host_layout) {
    fail("cpu JIT: module '", name, "' has data layout \"", m->getDataLayoutStr(), "\" but this host's is \"",
         host_layout.getStringRepresentation(), "\"");
  }
  if (!m->getTargetTriple().empty()) {
    llvm::Triple given(m->getTargetTriple());
    KILN_CHECK(given.getArch() == tm.getTargetTriple().getArch(), "cpu JIT: module '", name, "' targets \"",
               m->getTargetTriple(), "\" but this host is \"", tm.getTargetTriple().str(), "\"");
  }
  m->setTargetTriple(tm.getTargetTriple().str());

  optimise(*m, tm, opt_level, vector_math);
  if (optimized_ir) {
    llvm::raw_string_ostream os(*optimized_ir);
    m->print(os, nullptr);
    os.flush();
  }
  timings.optimise = lap();

  llvm::orc::SimpleCompiler compiler(tm);
  auto object = compiler(*m);
  if (!object)
    fail("cpu JIT: code generation failed for module '", name, "': ", llvm::toString(object.takeError()));
  m.reset();
  context.reset();
  std::string bytes((*object)->getBufferStart(), (*object)->getBufferSize());
  timings.codegen = lap();
  return bytes;
}

LinkedCode* link(std::string_view object, const std::string& name, void* (*resolve)(const std::string&),
                 std::vector<std::pair<std::string, void*>>& symbols) {
  auto file = llvm::object::ObjectFile::createObjectFile(
      llvm::MemoryBufferRef(llvm::StringRef(object.data(), object.size()), name));
  if (!file) fail("cpu JIT: module '", name, "': not an object file: ", llvm::toString(file.takeError()));
  static const llvm::Triple::ArchType host_arch = llvm::Triple(LLVM_HOST_TRIPLE).getArch();
  KILN_CHECK((*file)->getArch() == host_arch, "cpu JIT: module '", name, "': the object is for another architecture");
  Resolver resolver(resolve);
  auto code = std::make_unique<LinkedCode>();  // freed when the steps below throw
  llvm::RuntimeDyld linker(code->memory, resolver);
  linker.loadObject(**file);
  if (!linker.hasError()) linker.finalizeWithMemoryManagerLocking();  // relocate, register, protect
  if (linker.hasError()) fail("cpu JIT: cannot link module '", name, "': ", linker.getErrorString().str());
  symbols.clear();
  for (const auto& [symbol_name, symbol] : linker.getSymbolTable())
    symbols.emplace_back(symbol_name.str(), reinterpret_cast<void*>(static_cast<uintptr_t>(symbol.getAddress())));
  return code.release();
}

void release(LinkedCode* code) { delete code; }

}  // namespace
}  // namespace kiln::cpu::detail

extern "C" __attribute__((visibility("default"))) const kiln::cpu::detail::LlvmTable* kiln_cpu_llvm_table() {
  using namespace kiln::cpu::detail;
  static const LlvmTable table{host_cpu, host_target, compile, link, release};
  return &table;
}
