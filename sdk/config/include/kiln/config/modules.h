// kiln::modules: Kiln's loadable modules, shared libraries of Kiln's own code that a process
// loads the first time it needs them (dlopen), not at start. What is behind one is a library a
// program should not pay for unless it uses it: LLVM 16 (libLLVM-16.so.1: 28 ms and ~390,000
// relocations to load on the 2-core VM, against ~7 ms for the rest of `kiln --help`) is linked
// only by the CPU target's JIT module (kiln_cpu_llvm) and the CUDA target's PTX module
// (kiln_cuda_llvm).
// A module is lib<name>.so, looked for in these folders in turn; the first file found is the one
// loaded (one that does not load, or comes from another Kiln, is an error, not skipped):
//   - the option module_dir (KILN_MODULE_DIR), where it is set;
//   - the folder of the program's executable, then ../lib/kiln from it (a carried or
//     installed `kiln`);
//   - this build's module folder (<build>/lib/kiln), then its install folder (<libdir>/kiln).
// A module's functions take and give C++ types (std::string, kiln::Error), so a module built by
// another compiler or with other tables is refused, not called: each defines
// `extern "C" const char* kiln_module_abi()` (KILN_MODULE_ABI_FUNCTION below), which must
// give the loader's kAbi.
#pragma once

#include <string>

namespace kiln::modules {

// The compiler, and the revision of the modules' tables: bump it when one changes.
inline constexpr const char* kAbi = "kiln modules 1, compiler " __VERSION__;

// The address of `symbol` in module `name`, loading it on the first call (later calls return
// the same address; the module is never unloaded). `purpose` says in errors what needed it
// ("the cpu target's JIT"). A kiln::Error says which folders were tried and what each said.
void* entry(const std::string& name, const std::string& symbol, const std::string& purpose);

// Whether module `name` has been loaded in this process.
bool loaded(const std::string& name);

}  // namespace kiln::modules

// Defines a module's kiln_module_abi() (once in each module).
#define KILN_MODULE_ABI_FUNCTION \
  extern "C" __attribute__((visibility("default"))) const char* kiln_module_abi() { return ::kiln::modules::kAbi; }
