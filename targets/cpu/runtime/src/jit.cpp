// JitModule: LLVM IR text -> verified, O3-optimised module -> object code (compiled here, on the
// calling thread, by a per-thread TargetMachine) -> linked into its own JITDylib of one
// process-wide LLJIT, whose main JITDylib resolves libc/libm/libmvec symbols from the process.
#include "kiln/cpu/jit.h"

#include <llvm/Analysis/TargetLibraryInfo.h>
#include <llvm/AsmParser/Parser.h>
#include <llvm/ExecutionEngine/Orc/CompileUtils.h>
#include <llvm/ExecutionEngine/Orc/Core.h>
#include <llvm/ExecutionEngine/Orc/ExecutionUtils.h>
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <llvm/IR/Verifier.h>
#include <llvm/Object/ObjectFile.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/SourceMgr.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>
#include <llvm/TargetParser/Host.h>
#include <llvm/TargetParser/Triple.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <vector>

#include "kiln/graph/error.h"
#include "llvm_setup.h"

namespace kiln::cpu {

struct JitModule::Impl {
  llvm::orc::JITDylib* dylib = nullptr;
};

namespace {

// Errors ORC reports outside a call's return value (e.g. "Symbols not found: [ foo ]" while
// linking); linking runs on the thread that looks symbols up, so they are collected per thread.
thread_local std::string t_session_errors;

struct Session {
  std::unique_ptr<llvm::orc::LLJIT> jit;
  std::atomic<uint64_t> next_id{0};
};

// The process-wide LLJIT. Never destroyed: JitModules in static storage may outlive any
// destruction order we could pick.
Session& session() {
  static Session* s = [] {
    // Modules are compiled by JitModule::compile and only linked here, so the session's own
    // IR compiler is never used: the concurrent one makes its target machine per use, that is
    // never (the default would make one now, ~0.25 ms of a process's first cache hit). For the
    // same reason the session needs neither the host's CPU and features (cpuid, slow in a VM)
    // nor a target machine for its data layout: it only mangles symbol names, so the layout
    // need only say how (ELF: as written; Mach-O: a leading underscore). Kernels have no static
    // constructors or destructors, so no platform support either (the generic one costs ~0.15
    // ms of a process's first cache hit).
    detail::init_llvm();
    const llvm::Triple triple(llvm::sys::getProcessTriple());
    llvm::orc::LLJITBuilder builder;
    builder.setJITTargetMachineBuilder(llvm::orc::JITTargetMachineBuilder(triple))
        .setDataLayout(llvm::DataLayout(triple.isOSBinFormatMachO() ? "e-m:o" : "e-m:e"))
        .setPlatformSetUp(llvm::orc::setUpInactivePlatform)
        .setCompileFunctionCreator([](llvm::orc::JITTargetMachineBuilder jtmb)
                                       -> llvm::Expected<std::unique_ptr<llvm::orc::IRCompileLayer::IRCompiler>> {
          return std::make_unique<llvm::orc::ConcurrentIRCompiler>(std::move(jtmb));
        });
    auto jit = builder.create();
    if (!jit) fail("cpu JIT: cannot create the LLJIT session: ", llvm::toString(jit.takeError()));
    auto* session = new Session;
    session->jit = std::move(*jit);
    session->jit->getExecutionSession().setErrorReporter([](llvm::Error e) {
      if (!t_session_errors.empty()) t_session_errors += "; ";
      t_session_errors += llvm::toString(std::move(e));
    });
    // Kernels call expf, sinf, memcpy, libmvec's vector functions, ...: resolve from the process.
    auto generator = llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess(
        session->jit->getDataLayout().getGlobalPrefix());
    if (!generator)
      fail("cpu JIT: cannot search the process for symbols: ", llvm::toString(generator.takeError()));
    session->jit->getMainJITDylib().addGenerator(std::move(*generator));
    return session;
  }();
  return *s;
}

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

std::string take_session_errors() {
  std::string s = std::move(t_session_errors);
  t_session_errors.clear();
  return s;
}

}  // namespace

// Adds `object` to a new JITDylib of the session for `result` and resolves `names` (mangled
// with the session's prefix) into result.symbols_.
void JitModule::link_object(JitModule& result, std::unique_ptr<llvm::MemoryBuffer> object,
                            const std::vector<std::string>& names) {
  Session& s = session();
  llvm::orc::LLJIT& jit = *s.jit;
  const std::string& name = result.name_;
  llvm::orc::ExecutionSession& es = jit.getExecutionSession();
  auto dylib = jit.createJITDylib("kiln." + name + "." + std::to_string(s.next_id++));
  if (!dylib) fail("cpu JIT: module '", name, "': ", llvm::toString(dylib.takeError()));
  result.impl_ = std::make_unique<Impl>();
  result.impl_->dylib = &*dylib;  // removed by ~JitModule, also when the steps below throw
  dylib->addToLinkOrder(jit.getMainJITDylib());
  if (auto err = jit.addObjectFile(*dylib, std::move(object)))
    fail("cpu JIT: cannot add module '", name, "': ", llvm::toString(std::move(err)));

  if (!names.empty()) {
    llvm::orc::SymbolLookupSet lookup_set;
    for (const auto& n : names) lookup_set.add(jit.mangleAndIntern(n));
    take_session_errors();
    auto found = es.lookup(llvm::orc::makeJITDylibSearchOrder(&*dylib), std::move(lookup_set));
    if (!found) {
      std::string message = llvm::toString(found.takeError());
      std::string reported = take_session_errors();
      fail("cpu JIT: cannot link module '", name,
           "': ", reported.empty() ? message : reported + " (" + message + ")");
    }
    for (const auto& n : names) {
      auto it = found->find(jit.mangleAndIntern(n));
      if (it != found->end())
        result.symbols_.emplace(n, reinterpret_cast<void*>(static_cast<uintptr_t>(it->second.getAddress())));
    }
  }
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
  session();  // LLVM initialised, the session made
  llvm::TargetMachine& tm = thread_machine(opt_level);
  lap();  // first-use setup (LLVM, the session, this thread's TargetMachine) is in no phase

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

  // What the module defines for the outside: resolved eagerly below.
  std::vector<std::string> names;
  for (const llvm::GlobalValue& g : m->global_values()) {
    if (g.isDeclaration() || g.hasLocalLinkage() || g.hasAppendingLinkage() || g.getName().empty()) continue;
    if (g.getName().startswith("llvm.") || llvm::isa<llvm::GlobalIFunc>(g)) continue;
    names.push_back(g.getName().str());
  }

  llvm::orc::SimpleCompiler compiler(tm);
  auto object = compiler(*m);
  if (!object)
    fail("cpu JIT: code generation failed for module '", name, "': ", llvm::toString(object.takeError()));
  m.reset();
  context.reset();
  timings.codegen = lap();

  result->object_.assign((*object)->getBufferStart(), (*object)->getBufferSize());
  link_object(*result, std::move(*object), names);
  timings.link = lap();
  result->timings_ = timings;
  result->compile_seconds_ = std::chrono::duration<double>(mark - start).count();
  return result;
}

std::unique_ptr<JitModule> JitModule::load_object(std::string_view object, std::string_view module_name) {
  const auto start = std::chrono::steady_clock::now();
  const std::string name(module_name);
  const llvm::Triple host = session().jit->getTargetTriple();  // LLVM initialised, the session made
  auto result = std::unique_ptr<JitModule>(new JitModule);
  result->name_ = name;
  result->object_.assign(object.data(), object.size());
  // What the object defines for the outside (functions and data with global binding), and
  // whether it calls libmvec (loaded now if so: ~0.25 ms that other hits need not pay).
  std::vector<std::string> names;
  bool calls_libmvec = false;
  {
    auto file = llvm::object::ObjectFile::createObjectFile(
        llvm::MemoryBufferRef(llvm::StringRef(result->object_.data(), result->object_.size()), name));
    if (!file) fail("cpu JIT: module '", name, "': not an object file: ", llvm::toString(file.takeError()));
    KILN_CHECK((*file)->getArch() == host.getArch(), "cpu JIT: module '", name, "': the object is for another architecture");
    for (const llvm::object::SymbolRef& sym : (*file)->symbols()) {
      auto flags = sym.getFlags();
      if (!flags) fail("cpu JIT: module '", name, "': bad symbol table: ", llvm::toString(flags.takeError()));
      if (*flags & llvm::object::SymbolRef::SF_Undefined) {
        auto sym_name = sym.getName();
        if (sym_name && sym_name->startswith("_ZGV")) calls_libmvec = true;
        continue;
      }
      if (!(*flags & llvm::object::SymbolRef::SF_Global) || (*flags & llvm::object::SymbolRef::SF_FormatSpecific))
        continue;
      auto type = sym.getType();
      if (!type) fail("cpu JIT: module '", name, "': bad symbol table: ", llvm::toString(type.takeError()));
      if (*type != llvm::object::SymbolRef::ST_Function && *type != llvm::object::SymbolRef::ST_Data) continue;
      auto sym_name = sym.getName();
      if (!sym_name) fail("cpu JIT: module '", name, "': bad symbol table: ", llvm::toString(sym_name.takeError()));
      names.push_back(sym_name->str());
    }
  }
  if (calls_libmvec) detail::vector_math_available();
  link_object(*result, llvm::MemoryBuffer::getMemBufferCopy(llvm::StringRef(result->object_.data(), result->object_.size()), name),
              names);
  result->timings_.link = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  result->compile_seconds_ = result->timings_.link;
  return result;
}

void prepare_jit() {
  // In the order a cache hit needs them: the session it links into, the identity it checks the
  // entry against (its key only needs host_fingerprint()), libmvec for objects that call it.
  session();
  host_identity();
  detail::vector_math_available();  // libmvec loaded (~0.25 ms) before a hit's objects ask for it
  host_info();  // what compile() and the code generator ask for
}

void define_host_symbol(std::string_view name, void* address) {
  auto& jit = *session().jit;
  llvm::orc::SymbolMap symbols;
  symbols[jit.mangleAndIntern(llvm::StringRef(name.data(), name.size()))] = llvm::JITEvaluatedSymbol(
      static_cast<llvm::JITTargetAddress>(reinterpret_cast<uintptr_t>(address)),
      llvm::JITSymbolFlags::Exported | llvm::JITSymbolFlags::Callable);
  if (auto err = jit.getMainJITDylib().define(llvm::orc::absoluteSymbols(std::move(symbols))))
    fail("cpu JIT: cannot define host symbol '", name, "': ", llvm::toString(std::move(err)));
}

JitModule::~JitModule() {
  if (impl_ && impl_->dylib) {
    if (auto err = session().jit->getExecutionSession().removeJITDylib(*impl_->dylib))
      llvm::consumeError(std::move(err));
  }
}

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
