// The target registry and the request's accessors (target.h).
#include "kiln/target/target.h"

#include <algorithm>
#include <charconv>
#include <mutex>
#include <thread>
#include <vector>

#include "kiln/cache/cache.h"
#include "kiln/config/config.h"
#include "kiln/config/log.h"
#include "kiln/graph/error.h"

namespace kiln::target {

std::string CodegenRequest::text(const std::string& key, const std::string& otherwise) const {
  auto it = values.find(key);
  return it == values.end() ? otherwise : it->second;
}

int64_t CodegenRequest::integer(const std::string& key, int64_t otherwise) const {
  auto it = values.find(key);
  if (it == values.end()) return otherwise;
  int64_t v = 0;
  const std::string& s = it->second;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  KILN_CHECK(ec == std::errc() && end == s.data() + s.size(), "codegen request: '", key, "' is '", s,
             "', not an integer");
  return v;
}

std::string CodegenRequest::str() const {
  std::string s;
  for (const auto& [k, v] : values) s += (s.empty() ? "" : " ") + k + "=" + v;
  return s;
}

TensorData Runtime::move_through(const TensorData& t, Device to,
                                 const std::function<TensorData(const TensorData&)>& to_host,
                                 const std::function<TensorData(const TensorData&, int)>& to_device) const {
  const Device from = t.device();
  if (from == to) return t;
  std::string why;
  if (!available(&why)) fail("to(", to.str(), "): ", why);
  const DeviceType mine = device_type();
  if (to.type == DeviceType::cpu) {
    KILN_CHECK(from.type == mine, "to(cpu): cannot move a tensor from ", from.str());
    return to_host(t);
  }
  KILN_CHECK(to.type == mine, "to(", to.str(), "): the ", name(), " target cannot move a tensor there");
  if (from.type == mine) return to_device(to_host(t), to.index);
  KILN_CHECK(from.type == DeviceType::cpu, "to(", to.str(), "): cannot move a tensor from ", from.str());
  return to_device(t, to.index);
}

namespace {

struct Registry {
  std::mutex mu;
  std::map<std::string, std::shared_ptr<const Codegen>, std::less<>> codegens;
  std::map<std::string, std::shared_ptr<Runtime>, std::less<>> runtimes;
};
Registry& registry() {
  static Registry r;
  return r;
}

template <class Map>
std::vector<std::string> keys(Map& m) {
  std::lock_guard lock(registry().mu);
  std::vector<std::string> names;
  for (const auto& [name, _] : m) names.push_back(name);
  return names;
}

std::string listed(const std::vector<std::string>& names) {
  std::string s;
  for (const std::string& n : names) s += (s.empty() ? "" : ", ") + n;
  return s.empty() ? "none" : s;
}

}  // namespace

std::shared_ptr<void> join_when_released(std::vector<std::thread> threads) {
  struct Joined {
    std::vector<std::thread> threads;
    ~Joined() {
      for (std::thread& t : threads)
        if (t.joinable()) t.join();
    }
  };
  std::erase_if(threads, [](const std::thread& t) { return !t.joinable(); });
  if (threads.empty()) return nullptr;
  auto joined = std::make_shared<Joined>();
  joined->threads = std::move(threads);
  return joined;
}

void register_codegen(std::shared_ptr<const Codegen> c) {
  KILN_CHECK(c != nullptr, "register_codegen: no codegen given");
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  r.codegens[c->name()] = std::move(c);
}

void register_runtime(std::shared_ptr<Runtime> rt) {
  KILN_CHECK(rt != nullptr, "register_runtime: no runtime given");
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  r.runtimes[rt->name()] = std::move(rt);
}

const Codegen* find_codegen(std::string_view name) {
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  auto it = r.codegens.find(name);
  return it == r.codegens.end() ? nullptr : it->second.get();
}

Runtime* find_runtime(std::string_view name) {
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  auto it = r.runtimes.find(name);
  return it == r.runtimes.end() ? nullptr : it->second.get();
}

Runtime* find_runtime(DeviceType type) {
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  for (const auto& [_, rt] : r.runtimes)
    if (rt->device_type() == type) return rt.get();
  return nullptr;
}

const Codegen& codegen(std::string_view name) {
  const Codegen* c = find_codegen(name);
  KILN_CHECK(c != nullptr, "unknown target '", name, "' (this build has: ", listed(codegen_names()), ")");
  return *c;
}

Runtime& runtime(std::string_view name) {
  Runtime* r = find_runtime(name);
  KILN_CHECK(r != nullptr, "this build of Kiln cannot run plans on target '", name,
             "' (it runs: ", listed(runtime_names()), ")");
  return *r;
}

std::vector<std::string> codegen_names() { return keys(registry().codegens); }
std::vector<std::string> runtime_names() { return keys(registry().runtimes); }

Compiled compile_graph(const Codegen& codegen, const Graph& g, const CodegenRequest& request) {
  Compiled c;
  c.schedule = schedule::schedule_graph(g, codegen.capabilities(request));
  const schedule::Schedule& s = c.schedule;
  KILN_LOG(schedule, "schedule (", s.kernels.size(), " kernel", s.kernels.size() == 1 ? "" : "s", "):\n", s.str());
  c.generated = codegen.generate(s, request);
  const plan::KernelPlan& p = c.generated.plan;
  KILN_LOG(output_code, "kernel plan:\n", p.str(), "module:\n", p.module_source());
  return c;
}

plan::PlanOrigin plan_origin(std::string scheduled_graph_json, const CodegenRequest& request) {
  plan::PlanOrigin o;
  o.graph = std::move(scheduled_graph_json);
  o.request = request.values;
  // As config::parse_value reads them back: strings bare, other values as config prints them.
  for (const auto& [name, value] : config::codegen_values())
    o.options[name] = value.is<std::string>() ? std::get<std::string>(value.variant()) : config::to_string(value);
  o.kiln_version = cache::kiln_version();
  return o;
}

plan::KernelPlan regenerate(const Codegen& codegen, const Graph& scheduled, const plan::PlanOrigin& origin) {
  std::map<std::string, ConfigValue> options;
  for (const auto& [name, text] : origin.options) options[name] = config::parse_value(name, text);
  const config::Patch patch(std::move(options));
  CodegenRequest request;
  request.values = origin.request;
  plan::KernelPlan p = compile_graph(codegen, scheduled, request).generated.plan;
  p.origin = origin;
  return p;
}

}  // namespace kiln::target
