// Writes the seed corpus of fuzz_cache_entry (tests/fuzz/corpus/cache_entry) from real cache
// entries (.kce files of a disk cache: KILN_CACHE_DIR=/tmp/c build/release/samples/softmax_mlp):
//   make_cache_seeds OUT_DIR A.kce [B.kce ...]
// Each seed is a mode byte (fuzz_cache_entry.cpp says what each mode is) and a payload: the
// first entry as it is (mode 0), each entry with its blobs cut to 64 bytes and its plan to 256
// (mode 1: the decoder does not look inside them; small seeds mutate faster), a bundle body of
// those entries made for the fuzzer's device (mode 3), a raw bundle of this build (mode 2; it
// loads only in a fuzzer built from the same sources), and damaged ones: truncated, a bad
// checksum, another format version, absurd lengths and counts, a key that is not one, an entry
// stored under another key, an entry made for another device.
// Built on demand (ninja fuzz_make_cache_seeds), from the normal, uninstrumented libraries.
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "kiln/cache/cache.h"
#include "kiln/graph/error.h"

namespace {

constexpr const char* kDevice = "fuzz-device";  // as in fuzz_cache_entry.cpp

void u32(std::string& s, uint32_t v) {
  for (int i = 0; i < 4; ++i) s.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}
void u64(std::string& s, uint64_t v) {
  for (int i = 0; i < 8; ++i) s.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}
void str(std::string& s, const std::string& v) {
  u64(s, v.size());
  s += v;
}

std::string read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void write(const std::string& dir, const std::string& name, char mode, const std::string& payload) {
  std::ofstream out(dir + "/" + name, std::ios::binary | std::ios::trunc);
  out.put(mode);
  out.write(payload.data(), static_cast<std::streamsize>(payload.size()));
  std::printf("%s/%s: %zu bytes\n", dir.c_str(), name.c_str(), payload.size() + 1);
}

// An entry's bytes with its body fields as given (mode 1 sets the length and the checksum).
std::string raw_entry(const std::string& body) {
  std::string s = "KILNENTR";
  u32(s, kiln::cache::kEntryFormatVersion);
  u64(s, body.size());
  s += body;
  s.append(16, '\0');
  return s;
}

kiln::cache::Entry small(kiln::cache::Entry e) {
  for (auto& [name, bytes] : e.blobs)
    if (bytes.size() > 64) bytes.resize(64);
  if (e.plan.size() > 256) e.plan.resize(256);
  for (kiln::cache::Guard& g : e.guards)
    if (g.name == "device") g.value = kDevice;
  return e;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: make_cache_seeds OUT_DIR A.kce [B.kce ...]\n");
    return 2;
  }
  const std::string dir = argv[1];
  try {
    std::vector<kiln::cache::Entry> entries;
    for (int i = 2; i < argc; ++i) entries.push_back(kiln::cache::decode_entry(read(argv[i]), argv[i]));
    const std::string first = kiln::cache::encode_entry(entries[0]);
    write(dir, "entry_real", 0, first);
    std::vector<std::string> smalls;
    for (size_t i = 0; i < entries.size(); ++i) {
      smalls.push_back(kiln::cache::encode_entry(small(entries[i])));
      write(dir, "entry_small_" + std::to_string(i), 1, smalls.back());
    }
    kiln::cache::Entry none = small(entries[0]);
    none.blobs.clear();
    none.guards.clear();
    none.plan.clear();
    write(dir, "entry_empty_fields", 1, kiln::cache::encode_entry(none));

    // Damaged entries.
    write(dir, "entry_truncated", 0, first.substr(0, first.size() / 2));
    std::string flipped = smalls[0];
    flipped[flipped.size() / 2] ^= 0x20;
    write(dir, "entry_bad_checksum", 0, flipped);
    std::string version = smalls[0];
    version[8] = 2;
    write(dir, "entry_version_2", 0, version);
    std::string length = smalls[0];
    for (int i = 0; i < 8; ++i) length[static_cast<size_t>(12 + i)] = '\xff';
    write(dir, "entry_huge_length", 0, length);
    write(dir, "entry_short_header", 0, "KILNENTR\x01\x00\x00");
    std::string body;
    str(body, entries[0].key);
    str(body, "description");
    u64(body, 0);
    str(body, "{}");
    u64(body, uint64_t{1} << 40);  // blobs
    write(dir, "entry_blob_count_huge", 1, raw_entry(body));
    body.clear();
    str(body, entries[0].key);
    u64(body, uint64_t{1} << 62);  // a string longer than the entry
    write(dir, "entry_string_length_huge", 1, raw_entry(body));
    body.clear();
    str(body, entries[0].key);
    str(body, "d");
    u64(body, 0);
    str(body, "");
    u64(body, 1);
    str(body, "blob");  // its bytes missing
    write(dir, "entry_field_past_end", 1, raw_entry(body));
    write(dir, "entry_trailing_bytes", 1, raw_entry(smalls[0].substr(20, smalls[0].size() - 36) + "xyz"));

    // Bundles: bodies of entries for the fuzzer's device (mode 3), and one raw bundle (mode 2).
    auto bundle_body = [&](const std::vector<std::pair<std::string, std::string>>& list) {
      std::string b;
      u64(b, list.size());
      for (const auto& [key, bytes] : list) {
        str(b, key);
        str(b, bytes);
      }
      return b;
    };
    std::vector<std::pair<std::string, std::string>> list;
    for (size_t i = 0; i < entries.size(); ++i) list.emplace_back(entries[i].key, smalls[i]);
    write(dir, "bundle_body", 3, bundle_body(list));
    write(dir, "bundle_body_one", 3, bundle_body({list[0]}));
    write(dir, "bundle_body_empty", 3, bundle_body({}));
    write(dir, "bundle_body_wrong_key", 3, bundle_body({{entries.size() > 1 ? entries[1].key : std::string(32, 'a'), smalls[0]}}));
    write(dir, "bundle_body_invalid_key", 3, bundle_body({{"not-a-key", smalls[0]}}));
    write(dir, "bundle_body_other_device", 3, bundle_body({{entries[0].key, first}}));
    write(dir, "bundle_body_damaged_entry", 3, bundle_body({{entries[0].key, flipped}}));
    std::string count = bundle_body({list[0]});
    for (int i = 0; i < 8; ++i) count[static_cast<size_t>(i)] = '\x7f';
    write(dir, "bundle_body_count_huge", 3, count);
    std::string raw = "KILNBNDL";
    u32(raw, kiln::cache::kBundleFormatVersion);
    u32(raw, kiln::cache::kEntryFormatVersion);
    str(raw, kiln::cache::kiln_version());
    str(raw, kDevice);
    raw += bundle_body({list[0]});
    raw += std::string(16, '\0');  // a checksum that does not match
    write(dir, "bundle_raw_bad_checksum", 2, raw);
    std::string other = raw;
    other[8] = 9;  // another bundle format version
    write(dir, "bundle_raw_version_9", 2, other);
    write(dir, "bundle_raw_short", 2, "KILNBNDL\x01");
  } catch (const kiln::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  return 0;
}
