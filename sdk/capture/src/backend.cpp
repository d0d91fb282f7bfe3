#include "kiln/capture/backend.h"

#include <map>
#include <mutex>

#include "kiln/graph/error.h"

namespace kiln {

namespace {
struct Registry {
  std::mutex mutex;
  std::map<std::string, Backend, std::less<>> backends;
};
Registry& registry() {
  static Registry r;
  return r;
}
}  // namespace

void BackendRegistry::add(const std::string& name, Backend backend) {
  KILN_CHECK(!name.empty(), "register_backend: the backend name is empty");
  KILN_CHECK(static_cast<bool>(backend), "register_backend: backend '", name, "' is an empty function");
  std::lock_guard lock(registry().mutex);
  registry().backends[name] = std::move(backend);
}

std::vector<std::string> BackendRegistry::names() {
  std::lock_guard lock(registry().mutex);
  std::vector<std::string> out;
  for (const auto& [name, _] : registry().backends) out.push_back(name);
  return out;
}

Backend BackendRegistry::get(std::string_view name) {
  std::lock_guard lock(registry().mutex);
  auto it = registry().backends.find(name);
  if (it != registry().backends.end()) return it->second;
  std::string known;
  for (const auto& [n, _] : registry().backends) known += (known.empty() ? "" : ", ") + n;
  fail("unknown backend '", name, "'; registered backends are: ", known.empty() ? "(none)" : known);
}

}  // namespace kiln
