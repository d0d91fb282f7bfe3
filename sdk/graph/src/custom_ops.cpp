#include "kiln/graph/custom_ops.h"

#include <cctype>
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

bool word(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
  return true;
}

}  // namespace

void register_custom_op(CustomOpDef op) {
  const size_t sep = op.name.find("::");
  KILN_CHECK(sep != std::string::npos && word(std::string_view(op.name).substr(0, sep)) &&
                 word(std::string_view(op.name).substr(sep + 2)),
             "custom op \"", op.name, "\": the name must be namespace::name (letters, digits and '_' on each side)");
  KILN_CHECK(!op.version.empty(), "custom op ", op.name, ": the version must not be empty");
  KILN_CHECK(op.min_inputs >= 0 && (op.max_inputs < 0 || op.max_inputs >= op.min_inputs), "custom op ", op.name,
             ": takes ", op.min_inputs, " to ", op.max_inputs, " inputs, which is no range");
  KILN_CHECK(op.infer != nullptr, "custom op ", op.name, ": needs a shape rule");
  KILN_CHECK(op.compute != nullptr, "custom op ", op.name, ": needs a host kernel");
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  std::string name = op.name;
  r.ops[std::move(name)] = std::make_shared<const CustomOpDef>(std::move(op));
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

std::shared_ptr<const CustomOpDef> find_custom_op(std::string_view name, std::string_view version) {
  std::shared_ptr<const CustomOpDef> op = find_custom_op(name);
  KILN_CHECK(op != nullptr, "custom op ", name, " is not registered in this process (register it before compiling, ",
             "loading or running what calls it)");
  KILN_CHECK(op->version == version, "custom op ", name, " is registered at version \"", op->version,
             "\", but this graph was made with version \"", version, "\"");
  return op;
}

}  // namespace kiln
