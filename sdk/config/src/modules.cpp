// kiln::modules: finding and loading Kiln's modules (kiln/config/modules.h).
#include "kiln/config/modules.h"

#include <map>
#include <mutex>
#include <vector>

#include "kiln/config/config.h"
#include "kiln/graph/error.h"

#if defined(__EMSCRIPTEN__) || !defined(__unix__)
#define KILN_MODULES_LOADABLE 0
#else
#define KILN_MODULES_LOADABLE 1
#include <dlfcn.h>
#include <unistd.h>
#include <climits>
#endif

namespace kiln::modules {
namespace {

struct Loaded {
  std::mutex mu;
  std::map<std::string, void*> handles;  // by name; never closed (kernels and tables point in)
};
Loaded& loaded_modules() {
  static Loaded* l = new Loaded;  // never destroyed: threads may still load while the process exits
  return *l;
}

#if KILN_MODULES_LOADABLE
// The folder of the running executable ("" when /proc does not say).
std::string executable_dir() {
  char path[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", path, sizeof path - 1);
  if (n <= 0) return "";
  const std::string exe(path, static_cast<size_t>(n));
  const size_t slash = exe.rfind('/');
  return slash == std::string::npos ? "" : exe.substr(0, slash);
}

std::vector<std::string> search_dirs() {
  std::vector<std::string> dirs;
  if (std::string dir = config::get<std::string>("module_dir"); !dir.empty()) dirs.push_back(dir);
  if (const std::string exe = executable_dir(); !exe.empty()) {
    dirs.push_back(exe);
    dirs.push_back(exe + "/../lib/kiln");
  }
  dirs.push_back(KILN_BUILD_MODULE_DIR);
  dirs.push_back(KILN_INSTALL_MODULE_DIR);
  return dirs;
}

void* open_module(const std::string& name, const std::string& purpose) {
  const std::string file = "lib" + name + ".so";
  std::string tried;
  for (const std::string& dir : search_dirs()) {
    const std::string path = dir + "/" + file;
    if (::access(path.c_str(), F_OK) != 0) {
      tried += "\n  " + path + ": no such file";
      continue;
    }
    // The first one found is the one: one that cannot be loaded or comes from another Kiln is
    // an error, not a reason to take another copy from further down the list.
    // RTLD_LOCAL: a module's symbols (and LLVM's) stay out of the global scope, where generated
    // kernels' calls are resolved.
    void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      const char* why = ::dlerror();
      fail("Kiln's module ", path, " (", purpose, ") could not be loaded: ", why ? why : "dlopen failed");
    }
    using AbiFunction = const char* (*)();
    auto abi = reinterpret_cast<AbiFunction>(::dlsym(handle, "kiln_module_abi"));
    const std::string its = abi ? abi() : "no kiln_module_abi";
    if (its != kAbi) {
      ::dlclose(handle);
      fail("Kiln's module ", path, " (", purpose, ") was built by another Kiln (\"", its, "\"; this program is \"",
           kAbi, "\"): refused");
    }
    return handle;
  }
  fail("Kiln's module ", file, " (", purpose, ") could not be loaded; looked in:", tried,
       "\n(set KILN_MODULE_DIR to the folder that holds it: an installed Kiln's <libdir>/kiln)");
}
#endif

}  // namespace

void* entry(const std::string& name, const std::string& symbol, const std::string& purpose) {
#if KILN_MODULES_LOADABLE
  Loaded& l = loaded_modules();
  void* handle = nullptr;
  {
    std::lock_guard lock(l.mu);
    void*& h = l.handles[name];
    if (!h) {
      try {
        h = open_module(name, purpose);
      } catch (...) {
        l.handles.erase(name);
        throw;
      }
    }
    handle = h;
  }
  void* address = ::dlsym(handle, symbol.c_str());
  KILN_CHECK(address, "Kiln's module lib", name, ".so (", purpose, ") has no symbol ", symbol);
  return address;
#else
  fail("Kiln's module lib", name, ".so (", purpose, ") cannot be loaded in this build (", symbol, ")");
#endif
}

bool loaded(const std::string& name) {
  Loaded& l = loaded_modules();
  std::lock_guard lock(l.mu);
  return l.handles.count(name) != 0;
}

}  // namespace kiln::modules
