// JitModule: LLVM IR text -> object code -> code in memory the module owns, through the CPU
// target's LLVM module (src/llvm_module.h: compiling and linking are LLVM's, loaded at first use).
// What stays here is the runtime's: which symbols generated code may call (the runtime's own,
// then libc's memory functions, libm, libmvec, the compiler's helpers), timing, and the module's
// symbol table.
#include "kiln/cpu/jit.h"

#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <mutex>
#include <shared_mutex>
#include <unordered_map>
#include <vector>

#include "kiln/graph/error.h"
#include "llvm_module.h"

namespace kiln::cpu {

// The module's code and data (and their unwind tables), as the LLVM module linked them; freed
// with the JitModule.
struct JitModule::Impl {
  detail::LinkedCode* code = nullptr;
  ~Impl() {
    if (code) detail::llvm_module().release(code);
  }
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
void* resolve_for_kernels(const std::string& name) {
  {
    HostSymbols& h = host_symbols();
    std::shared_lock lock(h.mu);
    auto it = h.by_name.find(name);
    if (it != h.by_name.end()) return it->second;
  }
  std::string_view plain = name;
#ifdef __APPLE__
  if (!plain.empty() && plain.front() == '_') plain.remove_prefix(1);  // Mach-O's prefix; dlsym adds it
#endif
  if (plain.substr(0, 4) == "_ZGV") detail::vector_math_available();  // libmvec's vector variants
  if (void* address = ::dlsym(RTLD_DEFAULT, std::string(plain).c_str()); address && callable_from_kernels(plain, address))
    return address;
  return nullptr;
}

}  // namespace

// Links result.object_ into memory of result's own and collects the symbols it defines.
void JitModule::link_object(JitModule& result) {
  std::vector<std::pair<std::string, void*>> symbols;
  result.impl_ = std::make_unique<Impl>();
  result.impl_->code = detail::llvm_module().link(result.object_, result.name_, resolve_for_kernels, symbols);
  for (auto& [symbol_name, address] : symbols) result.symbols_.emplace(std::move(symbol_name), address);
}

std::unique_ptr<JitModule> JitModule::compile(std::string_view ir_text, std::string_view module_name,
                                              int opt_level, const CompileOptions& options) {
  using Clock = std::chrono::steady_clock;
  const detail::LlvmTable& llvm = detail::llvm_module();  // loaded before the clock starts, as LLVM's set-up
  const auto start = Clock::now();
  auto result = std::unique_ptr<JitModule>(new JitModule);
  result->name_ = std::string(module_name);
  const bool vector_math = options.vector_math && detail::vector_math_available();
  result->object_ = llvm.compile(ir_text, result->name_, opt_level, vector_math, options.kernel_entries,
                                 result->timings_, options.keep_optimized_ir ? &result->optimized_ir_ : nullptr);
  result->kept_ir_ = options.keep_optimized_ir;
  const auto linking = Clock::now();
  link_object(*result);
  const auto end = Clock::now();
  result->timings_.link = std::chrono::duration<double>(end - linking).count();
  result->compile_seconds_ = std::chrono::duration<double>(end - start).count();
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
