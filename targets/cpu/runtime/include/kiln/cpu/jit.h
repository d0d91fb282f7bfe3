// kiln::cpu JIT: takes LLVM IR text (what targets/cpu/codegen emits) and gives callable machine
// code for this host. Each JitModule is parsed, verified, optimised with LLVM's O3 pipeline for
// the host CPU and its features (loop and SLP vectorisers on), compiled to machine code at once,
// and linked by LLVM's RuntimeDyld into memory of its own (calls resolve to the runtime's
// symbols, then the process's: libc, libm, libmvec); its functions are then looked up by name.
// Linking stored object code (load_object) needs no LLVM set-up at all. LLVM itself is in the
// module libkiln_cpu_llvm.so, loaded the first time anything here needs it (kiln/config/modules.h),
// so a process that never compiles, links or asks about the host does not load it. Bad IR, a
// foreign data layout, an unresolved symbol or an unknown name give a
// kiln::Error. Safe to use from several threads; a JitModule frees its code when destroyed.
// See docs/cpu-runtime.md for the contract the codegen must follow (triple, data layout, kernel
// signature).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace kiln::cpu {

// What makes object code compiled here valid on another host: the same CPU name and features
// (and the same LLVM, which the caller's key holds), and libmvec there when the code calls it.
// No target machine, but ~30 cpuid instructions (each a VM exit: ~6 us in a VM): a cache entry
// carries it and a hit checks it, on the copy made before the first trace, before the code runs.
struct HostIdentity {
  std::string cpu_name;      // LLVM's name for the host CPU: "znver4", "skylake-avx512", ...
  std::string features;      // enabled features, sorted: "+adx,+aes,+avx,+avx2,..."
  bool vector_math = false;  // exp/log/sin/... in vector loops call glibc's libmvec
};
HostIdentity host_identity();  // computed once, then cached
std::string identity_text(const HostIdentity& h);  // "znver4 +adx,+aes,... libmvec"

// What a cache key holds of the host instead: on x86 five cpuid leaves (vendor; family, model
// and stepping; feature leaves 1, 7 and 0x80000001) and XCR0, elsewhere the first processor of
// /proc/cpuinfo; glibc's version. Tens of microseconds where host_identity()
// takes hundreds in a VM; hosts it calls alike are told apart by the identity an entry carries.
// Where neither says anything it is identity_text(host_identity()).
std::string host_fingerprint();  // computed once, then cached

// What this host offers the CPU target: its identity (which belongs in cache keys) and what the
// code generator makes of it (vector_bits follows from the CPU, its features and LLVM's version).
struct HostInfo : HostIdentity {
  int vector_bits = 128;  // vector register width LLVM's vectorisers use here: 128, 256 or 512
  int cores = 1;          // hardware threads this process may run on (affinity mask)
};
HostInfo host_info();  // computed once, then cached (asks the target: ~1 ms the first time)

// The one-time set-up a cache hit needs (~5 ms, most of it opening LLVM's module): the cpu
// target's Runtime::prepare runs it before the first trace, on the caller's thread.
// host_identity() (which a hit checks its entry against) and libmvec; any thread, any number of
// times. LLVM's target set-up (host_info()) is left to the first compile (see cpu/target).
void prepare_for_cache_hits();

std::string llvm_version();   // "16.0.6"
std::string target_triple();  // the host triple, e.g. "x86_64-pc-linux-gnu"
std::string data_layout();    // the host data layout string the codegen must put in a module

struct CompileOptions {
  // Keep the optimised IR text for optimized_ir() (debugging, tests; costs a print).
  bool keep_optimized_ir = false;
  // Let the loop vectoriser call libmvec's vector exp/log/sin/cos/pow (host_info().vector_math
  // says whether it is available); off: such loops call the scalar libm function per element.
  bool vector_math = true;
  // Functions the runtime will call as kernels, void(ptr buffers, ptr sizes, i64 begin, i64 end):
  // each must be defined with exactly that type (a kiln::Error otherwise, before anything runs).
  std::vector<std::string> kernel_entries;
};

// Where compile() spent its time, in seconds (they add up to about compile_seconds()).
struct CompileTimings {
  double parse = 0;     // text -> module, and the verifier
  double optimise = 0;  // the IR pass pipeline (and printing the IR when kept)
  double codegen = 0;   // module -> object code
  double link = 0;      // loading the object into memory, relocating it, resolving its symbols
};

// One JIT-compiled module.
// Makes `address` resolvable as `name` from every module compiled after this call (functions
// the runtime provides to generated code, e.g. kiln_sgemm). Defining a name twice is an error.
void define_host_symbol(std::string_view name, void* address);

class JitModule {
 public:
  // ir_text: a whole LLVM 16 module in text form. An empty triple / data layout is set to the
  // host's; a different data layout is an error. opt_level 0..3 picks both the IR pipeline
  // (O0..O3) and the code generator's level. Throws kiln::Error naming module_name with LLVM's
  // diagnostic (line:column and message) when the text does not parse or verify.
  static std::unique_ptr<JitModule> compile(std::string_view ir_text, std::string_view module_name,
                                            int opt_level = 3, const CompileOptions& options = {});
  // Links object code that compile() made (object()) on a host with the same CPU and features
  // (the caller's cache key guarantees it): no parse, optimisation or code generation. Every
  // function and global the object defines is resolved at once, as in compile(). Bytes that are
  // not an object file for this host, or that need a symbol nobody defines, give a kiln::Error
  // naming module_name.
  static std::unique_ptr<JitModule> load_object(std::string_view object, std::string_view module_name);
  ~JitModule();
  JitModule(const JitModule&) = delete;
  JitModule& operator=(const JitModule&) = delete;

  // Address of a function or global the module defines (external linkage); an unknown symbol
  // throws kiln::Error naming it and the module. Cheap (a hash lookup), thread-safe.
  void* lookup(std::string_view symbol) const;
  // The same, or null when the module does not define it.
  void* find(std::string_view symbol) const;
  template <class Fn>
  Fn* function(std::string_view symbol) const {
    return reinterpret_cast<Fn*>(lookup(symbol));
  }

  const std::string& name() const { return name_; }
  // Wall time compile() took: parse, verify, optimise, code generation, linking.
  double compile_seconds() const { return compile_seconds_; }
  const CompileTimings& timings() const { return timings_; }
  // The relocatable object code this module was linked from (ELF on Linux): what a compile
  // cache stores, and load_object() takes.
  const std::string& object() const { return object_; }
  // The module after optimisation; throws kiln::Error unless compiled with keep_optimized_ir.
  const std::string& optimized_ir() const;

  struct Impl;

 private:
  JitModule() = default;
  static void link_object(JitModule& result);
  std::string name_;
  double compile_seconds_ = 0;
  CompileTimings timings_;
  bool kept_ir_ = false;
  std::string optimized_ir_;
  std::string object_;
  std::unordered_map<std::string, void*> symbols_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kiln::cpu
