// JitModule: LLVM IR text -> verified, O3-optimised module -> object code (compiled here, on the
// calling thread, by a per-thread TargetMachine) -> linked by RuntimeDyld into memory the module
// owns, resolving calls against the runtime's own symbols and then the process (libc, libm,
// libmvec). RuntimeDyld is what ORC's LLJIT links with on ELF x86-64; used directly, a link
// needs no JIT session, no target and no LLVM initialisation, which a process's first cache hit
// would otherwise wait for (docs/cpu-runtime.md).
#include "kiln/cpu/jit.h"

#include <dlfcn.h>

#include <llvm/Analysis/TargetLibraryInfo.h>
#include <llvm/AsmParser/Parser.h>
#include <llvm/Config/llvm-config.h>
#include <llvm/ExecutionEngine/JITSymbol.h>
#include <llvm/ExecutionEngine/Orc/CompileUtils.h>
#include <llvm/ExecutionEngine/RuntimeDyld.h>
#include <llvm/ExecutionEngine/SectionMemoryManager.h>
#include <llvm/IR/InlineAsm.h>
#include <llvm/IR/Instructions.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <llvm/IR/Verifier.h>
#include <llvm/Object/ObjectFile.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/SourceMgr.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>
#include <llvm/TargetParser/Triple.h>

#include <algorithm>
#include <chrono>
#include <mutex>
#include <shared_mutex>
#include <unordered_map>
#include <vector>

#include "kiln/graph/error.h"
#include "llvm_setup.h"

namespace kiln::cpu {

// The module's code and data, and the unwind tables registered for them (so that debuggers,
// profilers and sanitizers can walk through kernels); freed, and deregistered, with the module.
struct JitModule::Impl {
  llvm::SectionMemoryManager memory;
  ~Impl() { memory.deregisterEHFrames(); }
};

namespace {

// Symbols the runtime gives generated code (define_host_symbol).
struct HostSymbols {
  std::shared_mutex mu;
  std::unordered_map<std::string, void*> by_name;
};
HostSymbols& host_symbols() {
  static HostSymbols* s = new HostSymbols;  // never destroyed: modules in static storage link late
  return *s;
}

// Whether generated code may call `name`, found in the process at `address`: what the code
// generator and LLVM's lowering emit calls to, namely the math libraries (libm, libmvec), the
// compiler's helper routines (f16/bf16 conversions, 128-bit integer division, powi: libgcc's
// or compiler-rt's `__` names) and memcpy/memmove/memset. Nothing else in the process: a plan
// file or a cache entry is native code, and kernels that declared system(), getenv() or puts()
// called them (issue 31); such a call is now an unresolved symbol, a kiln::Error naming it.
bool callable_from_kernels(std::string_view name, void* address) {
  if (name == "memcpy" || name == "memmove" || name == "memset") return true;
  auto in_math_library = [](void* a) {
    Dl_info info{};
    if (::dladdr(a, &info) == 0 || info.dli_fname == nullptr) return false;
    std::string_view file = info.dli_fname;
    file = file.substr(file.find_last_of('/') == std::string_view::npos ? 0 : file.find_last_of('/') + 1);
    return file.starts_with("libm.so") || file.starts_with("libm-") || file.starts_with("libmvec.so") ||
           file.starts_with("libsystem_m");
  };
  if (in_math_library(address)) return true;
  // A libm function that the process interposes (sanitizers intercept frexp, sincos, ...): the
  // name is libm's, so the interposer is what a call to it reaches anyway.
  static void* const libm = ::dlopen("libm.so.6", RTLD_LAZY | RTLD_NOLOAD);
  if (libm != nullptr)
    if (void* own = ::dlsym(libm, std::string(name).c_str()); own != nullptr && in_math_library(own)) return true;
  static constexpr std::string_view kHelpers[] = {"__extend", "__trunc", "__fix", "__float", "__divti3", "__udivti3",
                                                  "__modti3", "__umodti3", "__muloti4", "__powi", "__divdc3", "__divsc3",
                                                  "__muldc3", "__mulsc3"};
  return std::any_of(std::begin(kHelpers), std::end(kHelpers), [&](std::string_view p) { return name.starts_with(p); });
}

// What an object's undefined symbols resolve to: the runtime's symbols, then what the process
// has of callable_from_kernels (libm; libmvec, loaded on the first object that calls it).
class ProcessResolver final : public llvm::LegacyJITSymbolResolver {
 public:
  llvm::JITSymbol findSymbolInLogicalDylib(const std::string&) override { return nullptr; }
  llvm::JITSymbol findSymbol(const std::string& name) override {
    {
      HostSymbols& h = host_symbols();
      std::shared_lock lock(h.mu);
      auto it = h.by_name.find(name);
      if (it != h.by_name.end()) return symbol(it->second);
    }
    std::string_view plain = name;
#ifdef __APPLE__
    if (!plain.empty() && plain.front() == '_') plain.remove_prefix(1);  // Mach-O's prefix; dlsym adds it
#endif
    if (plain.substr(0, 4) == "_ZGV") detail::vector_math_available();  // libmvec's vector variants
    if (void* address = ::dlsym(RTLD_DEFAULT, std::string(plain).c_str()); address && callable_from_kernels(plain, address))
      return symbol(address);
    return nullptr;
  }

 private:
  static llvm::JITSymbol symbol(void* address) {
    return llvm::JITSymbol(static_cast<llvm::JITTargetAddress>(reinterpret_cast<uintptr_t>(address)),
                           llvm::JITSymbolFlags::Exported | llvm::JITSymbolFlags::Callable);
  }
};

// One TargetMachine per thread and level: optimisation (for TargetTransformInfo) and code
// generation use it. A TargetMachine may compile many modules but not two at a time.
llvm::TargetMachine& thread_machine(int opt_level) {
  thread_local std::unique_ptr<llvm::TargetMachine> machines[4];
  auto& tm = machines[opt_level];
  if (!tm) {
    auto made = detail::host_machine_builder(opt_level).createTargetMachine();
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
  if (vector_math && detail::vector_math_available())
    tlii.addVectorizableFunctionsFromVecLib(llvm::TargetLibraryInfoImpl::LIBMVEC_X86, triple);
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

}  // namespace

// Links result.object_ into memory of result's own and collects the symbols it defines.
void JitModule::link_object(JitModule& result) {
  const std::string& name = result.name_;
  auto file = llvm::object::ObjectFile::createObjectFile(
      llvm::MemoryBufferRef(llvm::StringRef(result.object_.data(), result.object_.size()), name));
  if (!file) fail("cpu JIT: module '", name, "': not an object file: ", llvm::toString(file.takeError()));
  static const llvm::Triple::ArchType host_arch = llvm::Triple(LLVM_HOST_TRIPLE).getArch();
  KILN_CHECK((*file)->getArch() == host_arch, "cpu JIT: module '", name,
             "': the object is for another architecture");
  static ProcessResolver resolver;  // stateless; safe to share between threads
  result.impl_ = std::make_unique<Impl>();  // freed by ~JitModule, also when the steps below throw
  llvm::RuntimeDyld linker(result.impl_->memory, resolver);
  linker.loadObject(**file);
  if (!linker.hasError()) linker.finalizeWithMemoryManagerLocking();  // relocate, register, protect
  if (linker.hasError()) fail("cpu JIT: cannot link module '", name, "': ", linker.getErrorString().str());
  for (const auto& [symbol_name, symbol] : linker.getSymbolTable())
    result.symbols_.emplace(symbol_name.str(), reinterpret_cast<void*>(static_cast<uintptr_t>(symbol.getAddress())));
}

std::unique_ptr<JitModule> JitModule::compile(std::string_view ir_text, std::string_view module_name,
                                              int opt_level, const CompileOptions& options) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  auto mark = start;
  auto lap = [&mark] {
    const auto now = Clock::now();
    const double seconds = std::chrono::duration<double>(now - mark).count();
    mark = now;
    return seconds;
  };
  CompileTimings timings;
  const std::string name(module_name);
  KILN_CHECK(opt_level >= 0 && opt_level <= 3, "cpu JIT: module '", name, "': opt_level ", opt_level,
             " is not in 0..3");
  detail::init_llvm();
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
  // making system calls) is refused, as calls outside callable_from_kernels are at link time.
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
    for (const std::string& entry : options.kernel_entries) {
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

  optimise(*m, tm, opt_level, options.vector_math);

  auto result = std::unique_ptr<JitModule>(new JitModule);
  result->name_ = name;
  if (options.keep_optimized_ir) {
    llvm::raw_string_ostream os(result->optimized_ir_);
    m->print(os, nullptr);
    os.flush();
    result->kept_ir_ = true;
  }

  timings.optimise = lap();

  llvm::orc::SimpleCompiler compiler(tm);
  auto object = compiler(*m);
  if (!object)
    fail("cpu JIT: code generation failed for module '", name, "': ", llvm::toString(object.takeError()));
  m.reset();
  context.reset();
  timings.codegen = lap();

  result->object_.assign((*object)->getBufferStart(), (*object)->getBufferSize());
  object->reset();
  link_object(*result);
  timings.link = lap();
  result->timings_ = timings;
  result->compile_seconds_ = std::chrono::duration<double>(mark - start).count();
  return result;
}

std::unique_ptr<JitModule> JitModule::load_object(std::string_view object, std::string_view module_name) {
  const auto start = std::chrono::steady_clock::now();
  const std::string name(module_name);
  auto result = std::unique_ptr<JitModule>(new JitModule);
  result->name_ = name;
  result->object_.assign(object.data(), object.size());
  link_object(*result);
  result->timings_.link = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  result->compile_seconds_ = result->timings_.link;
  return result;
}

void prepare_for_cache_hits() {
  // The identity a hit checks its entry against (its key only needs host_fingerprint(), its link
  // nothing), then libmvec (~0.25 ms) before the objects that call it ask for it.
  host_identity();
  detail::vector_math_available();
}


void define_host_symbol(std::string_view name, void* address) {
  HostSymbols& h = host_symbols();
  std::unique_lock lock(h.mu);
  if (!h.by_name.emplace(std::string(name), address).second)
    fail("cpu JIT: host symbol '", name, "' is already defined");
}

JitModule::~JitModule() = default;

void* JitModule::find(std::string_view symbol) const {
  auto it = symbols_.find(std::string(symbol));
  return it == symbols_.end() ? nullptr : it->second;
}

void* JitModule::lookup(std::string_view symbol) const {
  auto it = symbols_.find(std::string(symbol));
  if (it != symbols_.end()) return it->second;
  std::vector<std::string> known;
  for (const auto& [n, address] : symbols_) known.push_back(n);
  std::sort(known.begin(), known.end());
  std::string list;
  for (size_t i = 0; i < known.size() && i < 20; ++i) list += (i ? ", " : "") + known[i];
  fail("cpu JIT: module '", name_, "' defines no symbol '", symbol,
       "' (it defines: ", list.empty() ? "nothing" : list, known.size() > 20 ? ", ..." : "", ")");
}

const std::string& JitModule::optimized_ir() const {
  KILN_CHECK(kept_ir_, "cpu JIT: module '", name_,
             "' was compiled without CompileOptions::keep_optimized_ir, so its optimised IR was not kept");
  return optimized_ir_;
}

}  // namespace kiln::cpu
