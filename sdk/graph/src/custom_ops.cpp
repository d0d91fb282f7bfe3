#include "kiln/graph/custom_ops.h"

#include <cctype>
#include <cstdio>
#include <map>
#include <mutex>

#include "kiln/graph/error.h"

namespace kiln {

namespace {

struct Registry {
  std::mutex mu;
  std::map<std::string, std::shared_ptr<const CustomOpDef>, std::less<>> ops;
};

Registry& registry() {
  static auto* r = new Registry();  // never destroyed: kernels may run from other threads at exit
  return *r;
}

// Letters, digits and '_' (and '.' where `dots`: a namespace may be an ONNX domain, com.example).
bool word(std::string_view s, bool dots) {
  if (s.empty()) return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || (dots && c == '.'))) return false;
  return true;
}

}  // namespace

void register_custom_op(CustomOpDef op) {
#ifdef __EMSCRIPTEN__
  // The browser's build runs no user code: nothing registers there, so every lookup of a custom
  // op fails (find_custom_op) before its functions would be called.
  fail("custom op ", op.name, ": not in the browser");
#else
  const size_t sep = op.name.find("::");
  KILN_CHECK(sep != std::string::npos && word(std::string_view(op.name).substr(0, sep), true) &&
                 word(std::string_view(op.name).substr(sep + 2), false),
             "custom op \"", op.name, "\": the name must be namespace::name (letters, digits and '_' on each side, ",
             "and '.' in the namespace)");
  KILN_CHECK(!op.version.empty(), "custom op ", op.name, ": the version must not be empty");
  KILN_CHECK(op.min_inputs >= 0 && (op.max_inputs < 0 || op.max_inputs >= op.min_inputs), "custom op ", op.name,
             ": takes ", op.min_inputs, " to ", op.max_inputs, " inputs, which is no range");
  KILN_CHECK(op.infer != nullptr, "custom op ", op.name, ": needs a shape rule");
  KILN_CHECK(op.compute != nullptr, "custom op ", op.name, ": needs a host kernel");
  if (!op.device_kernels.empty()) {
    uint64_t h = 14695981039346656037ull;  // FNV-1a over the targets, entries, blocks and sources
    auto mix = [&h](std::string_view s) {
      for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
      h = (h ^ 0xff) * 1099511628211ull;
    };
    for (const auto& [target, k] : op.device_kernels) {
      KILN_CHECK(!k.source.empty() && !k.entry.empty(), "custom op ", op.name, ": its ", target,
                 " kernel needs a source and an entry");
      KILN_CHECK(k.block >= 1 && k.block <= 1024, "custom op ", op.name, ": its ", target,
                 " kernel's block must be 1 to 1024 threads, got ", k.block);
      mix(target);
      mix(k.entry);
      mix(std::to_string(k.block));
      mix(k.source);
    }
    char hex[17];
    std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
    op.version += std::string(" #") + hex;
  }
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  std::string name = op.name;
  r.ops[std::move(name)] = std::make_shared<const CustomOpDef>(std::move(op));
#endif
}

bool unregister_custom_op(std::string_view name) {
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  const auto it = r.ops.find(name);
  if (it == r.ops.end()) return false;
  r.ops.erase(it);
  return true;
}

std::shared_ptr<const CustomOpDef> find_custom_op(std::string_view name) {
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  const auto it = r.ops.find(name);
  return it == r.ops.end() ? nullptr : it->second;
}

void run_custom_op_function(std::string_view name, std::string_view role, const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    const std::string what = e.what();
    fail(what.find(name) == std::string::npos ? "custom op " + std::string(name) + ": " + what : what);
  } catch (const std::exception& e) {
    fail("custom op ", name, ": its ", role, " threw: ", e.what());
  }
}

std::shared_ptr<const CustomOpDef> find_custom_op(std::string_view name, std::string_view version) {
  std::shared_ptr<const CustomOpDef> op = find_custom_op(name);
  KILN_CHECK(op != nullptr, "custom op ", name, " is not registered in this process (register it before compiling, ",
             "loading or running what calls it)");
  KILN_CHECK(op->version == version, "custom op ", name, " is registered at version \"", op->version,
             "\", but this graph was made with version \"", version, "\"");
  return op;
}

}  // namespace kiln
