// Keys, the entry format and guards.
#include <cstring>
#include <ctime>

#include "bytes.h"
#include "kiln/cache/cache.h"
#include "kiln/config/config.h"
#include "kiln/graph/error.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "kiln_fingerprint.h"

#ifndef KILN_VERSION_STRING
#error "KILN_VERSION_STRING must be defined by the build"
#endif

namespace kiln::cache {

std::string kiln_version() { return KILN_VERSION_STRING "+" KILN_SOURCE_FINGERPRINT; }

std::string hash_hex(std::string_view bytes) {
  const XXH128_hash_t h = XXH3_128bits(bytes.data(), bytes.size());
  static const char digits[] = "0123456789abcdef";
  std::string s(32, '0');
  for (int i = 0; i < 16; ++i) s[static_cast<size_t>(15 - i)] = digits[(h.high64 >> (4 * i)) & 15];
  for (int i = 0; i < 16; ++i) s[static_cast<size_t>(31 - i)] = digits[(h.low64 >> (4 * i)) & 15];
  return s;
}

bool is_valid_key(std::string_view hex) {
  if (hex.size() != 32) return false;
  for (char c : hex)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

Key make_key(const KeyInputs& in) {
  detail::Writer w;
  w.str("kiln.cache.key");
  w.u32(kEntryFormatVersion);
  w.str(in.pipeline);
  w.str(in.graph);
  w.str(in.inputs);
  w.u64(in.codegen_hash);
  w.str(in.target);
  w.str(in.device);
  w.str(in.toolchain);
  w.str(in.kiln_version);
  w.str(in.tag);
  return Key{hash_hex(w.out)};
}

KeyInputs graph_key_inputs(const Graph& canonical, std::string graph_json, std::string pipeline, std::string target,
                           std::string device, std::string toolchain) {
  KeyInputs in;
  in.pipeline = std::move(pipeline);
  in.graph = std::move(graph_json);
  for (NodeId i : canonical.inputs()) in.inputs += canonical.node(i).meta.str() + ";";
  in.codegen_hash = config::codegen_hash();
  in.target = std::move(target);
  in.device = std::move(device);
  in.toolchain = std::move(toolchain);
  in.kiln_version = kiln_version();
  in.tag = config::get<std::string>("cache_key_tag");
  return in;
}

std::vector<Guard> guards_for(const KeyInputs& in) {
  return {
      {"pipeline", in.pipeline},
      {"target", in.target},
      {"device", in.device},
      {"toolchain", in.toolchain},
      {"kiln_version", in.kiln_version},
      {"graph", hash_hex(in.graph)},
      {"inputs", in.inputs},
      {"codegen_hash", std::to_string(in.codegen_hash)},
      {"cache_key_tag", in.tag},
  };
}

namespace {
constexpr char kEntryMagic[8] = {'K', 'I', 'L', 'N', 'E', 'N', 'T', 'R'};
// Bounds that keep a damaged length field from asking for absurd allocations.
constexpr uint64_t kMaxCount = 1u << 20;
}  // namespace

std::string encode_entry(const Entry& e) {
  detail::Writer body;
  body.str(e.key);
  body.str(e.description);
  body.i64(e.created_unix);
  body.str(e.plan);
  body.u64(e.blobs.size());
  for (const auto& [name, bytes] : e.blobs) {
    body.str(name);
    body.str(bytes);
  }
  body.u64(e.guards.size());
  for (const Guard& g : e.guards) {
    body.str(g.name);
    body.str(g.value);
  }
  detail::Writer w;
  w.out.append(kEntryMagic, sizeof kEntryMagic);
  w.u32(kEntryFormatVersion);
  w.u64(body.out.size());
  w.out += body.out;
  const XXH128_hash_t h = XXH3_128bits(w.out.data(), w.out.size());
  w.u64(h.high64);
  w.u64(h.low64);
  return std::move(w.out);
}

Entry decode_entry(std::string_view bytes, std::string_view source) {
  const std::string where(source);
  KILN_CHECK(bytes.size() >= sizeof kEntryMagic + 4 + 8 + 16, where, ": not a Kiln cache entry (", bytes.size(),
             " bytes, shorter than the header)");
  KILN_CHECK(std::memcmp(bytes.data(), kEntryMagic, sizeof kEntryMagic) == 0, where,
             ": not a Kiln cache entry (wrong magic bytes)");
  detail::Reader header(bytes.substr(sizeof kEntryMagic, 12), where);
  const uint32_t version = header.u32();
  KILN_CHECK(version == kEntryFormatVersion, where, ": cache entry format version ", version,
             ", this build reads version ", kEntryFormatVersion);
  const uint64_t body_size = header.u64();
  const size_t head = sizeof kEntryMagic + 12;
  // Said as the body's length (header + body + checksum can wrap: a length of 2^64 - 1 "needs" 35 bytes).
  KILN_CHECK(body_size == bytes.size() - head - 16, where, ": truncated or overlong cache entry (", bytes.size(),
             " bytes, so ", bytes.size() - head - 16, " bytes of fields; the header says ", body_size, ")");
  const XXH128_hash_t h = XXH3_128bits(bytes.data(), head + body_size);
  detail::Reader tail(bytes.substr(head + body_size), where);
  const uint64_t hi = tail.u64(), lo = tail.u64();
  KILN_CHECK(hi == h.high64 && lo == h.low64, where, ": checksum mismatch (the entry is damaged)");
  detail::Reader r(bytes.substr(head, body_size), where);
  Entry e;
  e.key = r.str();
  e.description = r.str();
  e.created_unix = r.i64();
  e.plan = r.str();
  const uint64_t nblobs = r.u64();
  KILN_CHECK(nblobs <= kMaxCount, where, ": ", nblobs, " blobs is not a plausible count");
  for (uint64_t i = 0; i < nblobs; ++i) {
    std::string name = r.str();
    e.blobs.emplace_back(std::move(name), r.str());
  }
  const uint64_t nguards = r.u64();
  KILN_CHECK(nguards <= kMaxCount, where, ": ", nguards, " guards is not a plausible count");
  for (uint64_t i = 0; i < nguards; ++i) {
    Guard g;
    g.name = r.str();
    g.value = r.str();
    e.guards.push_back(std::move(g));
  }
  r.expect_end();
  return e;
}

std::string check_guards(const Entry& e, const std::vector<Guard>& expected) {
  for (const Guard& want : expected) {
    const Guard* have = nullptr;
    for (const Guard& g : e.guards)
      if (g.name == want.name) have = &g;
    if (!have) return want.name + ": the entry has no such guard";
    if (have->value != want.value) {
      auto cut = [](const std::string& s) { return s.size() > 120 ? s.substr(0, 117) + "..." : s; };
      return want.name + ": entry made for '" + cut(have->value) + "', this process has '" + cut(want.value) + "'";
    }
  }
  return "";
}

}  // namespace kiln::cache
