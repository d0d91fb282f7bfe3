// Records: small values (autotune choices, dynamic-shape profiles) kept as entries without blobs
// in the layers of the compile caches (docs/cache.md, "Records").
#include <ctime>

#include "kiln/cache/cache.h"
#include "kiln/config/log.h"
#include "kiln/graph/error.h"

namespace kiln::cache {

KeyInputs record_key_inputs(const RecordKey& k) {
  KILN_CHECK(!k.kind.empty(), "cache record: the kind is empty");
  KeyInputs in;
  in.pipeline = "record." + k.kind;
  in.graph = k.subject;
  in.inputs = k.context;
  in.target = k.target;
  in.device = k.device;
  in.kiln_version = kiln_version();
  return in;
}

std::optional<std::string> get_record(const RecordKey& k, CacheStats* stats, std::optional<Enabled> layers) {
  const KeyInputs in = record_key_inputs(k);
  std::optional<Entry> e = lookup(make_key(in).hex, guards_for(in), stats, layers ? *layers : enabled_layers());
  if (!e) return std::nullopt;
  if (!e->blobs.empty()) {
    discard(e->key, "a " + k.kind + " record with binaries is not a record");
    return std::nullopt;
  }
  return std::move(e->plan);
}

void put_record(const RecordKey& k, const std::string& value, const std::string& description, CacheStats* stats,
                std::optional<Enabled> layers) {
  const KeyInputs in = record_key_inputs(k);
  Entry e;
  e.key = make_key(in).hex;
  e.description = description;
  e.plan = value;
  e.guards = guards_for(in);
  e.created_unix = static_cast<int64_t>(std::time(nullptr));
  store(e, stats, layers ? *layers : enabled_layers());
}

std::optional<std::string> autotune_lookup(const std::string& target, const std::string& device,
                                           const std::string& kernel, const std::string& problem, CacheStats* stats) {
  std::optional<std::string> v = get_record(RecordKey{"autotune", kernel, problem, target, device}, stats, autotune_layers());
  KILN_LOG(cache, "autotune ", target, ": ", v ? "hit: " + *v : std::string("miss"));
  return v;
}

void autotune_store(const std::string& target, const std::string& device, const std::string& kernel,
                    const std::string& problem, const std::string& config_json, const std::string& description,
                    CacheStats* stats) {
  put_record(RecordKey{"autotune", kernel, problem, target, device}, config_json, "autotune " + target + " " + description,
             stats, autotune_layers());
}

}  // namespace kiln::cache
