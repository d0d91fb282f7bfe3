// libFuzzer target for the compile cache's byte formats (sdk/cache): decode_entry and
// load_cache_artifacts (bundles) may give an entry (a load) or throw kiln::Error; any other
// exception (kiln::InternalError, a bug in Kiln, included: it escapes and libFuzzer reports the
// abort), a crash or a sanitizer report is a finding.
//
// The first byte of an input chooses what the rest (the payload) is, so that mutations reach the
// decoders past the checksums that would otherwise reject nearly all of them:
//   0  an entry, as is: decode_entry;
//   1  an entry whose length field and XXH3-128 checksum the fuzzer sets to match its bytes
//      (payloads under 36 bytes as is), then decode_entry;
//   2  a bundle, as is: load_cache_artifacts;
//   3  a bundle's entries (a count, then key and entry strings, as save_cache_artifacts writes
//      them) under a header of this build's formats, Kiln version and the fuzzer's device, with
//      the checksum set: load_cache_artifacts. (A bundle's own header holds kiln_version(), which
//      changes with every change of the sources, so raw bundles seeds stop being loadable.)
// An entry that decodes must encode back to the same bytes (the format has one encoding: fields
// in order, lengths and the checksum determined by them), and its plan (if any) must validate or
// be refused with a kiln::Error. A bundle that loads must save and load again (the memory layer
// holds what it loaded; the disk layer is off).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "kiln/cache/cache.h"
#include "kiln/graph/error.h"
#include "kiln/plan/bind.h"
#include "kiln/plan/plan_json.h"
#include "fuzz_util.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

namespace {

constexpr const char* kDevice = "fuzz-device";

void put_u32(std::string& s, uint32_t v) {
  for (int i = 0; i < 4; ++i) s.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}
void put_u64(std::string& s, uint64_t v) {
  for (int i = 0; i < 8; ++i) s.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}
void set_u64(std::string& s, size_t at, uint64_t v) {
  for (int i = 0; i < 8; ++i) s[at + static_cast<size_t>(i)] = static_cast<char>((v >> (8 * i)) & 0xFF);
}
// The XXH3-128 of everything but the last 16 bytes, written into them (high half first).
void set_checksum(std::string& s) {
  const XXH128_hash_t h = XXH3_128bits(s.data(), s.size() - 16);
  set_u64(s, s.size() - 16, h.high64);
  set_u64(s, s.size() - 8, h.low64);
}

[[noreturn]] void finding(const std::string& what) {
  std::fprintf(stderr, "%s\n", what.c_str());
  std::abort();
}

void entry(std::string_view bytes) {
  kiln::cache::Entry e;
  try {
    e = kiln::cache::decode_entry(bytes, "fuzz entry");
  } catch (const kiln::Error& e) {
    kiln::fuzz::rejected(e);
    return;  // rejected with a message: fine (only kiln::Error: an InternalError must escape)
  }
  if (kiln::cache::encode_entry(e) != bytes) finding("an entry that decoded encodes to other bytes");
  // Its plan, with the kernel sources its blobs hold, validated as a cache hit validates it
  // before any target loads it (objects are not linked here: an entry's code is trusted only
  // when signed, docs/plan-trust.md).
  if (e.plan.empty()) return;
  try {
    (void)kiln::plan::plan_from_json(e.plan, "fuzz entry: plan", e.blobs);
  } catch (const kiln::Error& err) {
    kiln::fuzz::rejected(err);
  }
}

void bundle(std::string_view bytes) {
  kiln::cache::LoadResult r;
  try {
    r = kiln::cache::load_cache_artifacts(bytes, kDevice);
  } catch (const kiln::Error& e) {
    kiln::fuzz::rejected(e);
    kiln::cache::reset_memory_for_testing();
    return;
  }
  if (r.loaded > 0) {
    const std::string saved = kiln::cache::save_cache_artifacts(kDevice);
    kiln::cache::reset_memory_for_testing();
    try {
      const kiln::cache::LoadResult again = kiln::cache::load_cache_artifacts(saved, kDevice);
      if (again.loaded == 0 || !again.reason.empty())
        finding("a bundle saved from what a bundle loaded loads " + std::to_string(again.loaded) + " entries: " + again.reason);
    } catch (const kiln::Error& e) {
      finding(std::string("a bundle saved from what a bundle loaded does not load: ") + e.what());
    }
  }
  kiln::cache::reset_memory_for_testing();
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // Bundles load into the memory layer only: no disk, no remote.
  setenv("KILN_CACHE_PLAN_CACHE", "0", 1);
  setenv("KILN_REMOTE_CACHE", "0", 1);
  setenv("KILN_CACHE_DIR", "/nonexistent/kiln-fuzz-cache", 1);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const int mode = data[0] % 4;
  const std::string_view payload(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (mode) {
    case 0: entry(payload); break;
    case 1: {
      std::string fixed(payload);
      if (fixed.size() >= 36) {  // magic 8, version 4, length 8, checksum 16
        set_u64(fixed, 12, fixed.size() - 36);
        set_checksum(fixed);
      }
      entry(fixed);
      break;
    }
    case 2: bundle(payload); break;
    case 3: {
      std::string b = "KILNBNDL";
      put_u32(b, kiln::cache::kBundleFormatVersion);
      put_u32(b, kiln::cache::kEntryFormatVersion);
      const std::string version = kiln::cache::kiln_version();
      put_u64(b, version.size());
      b += version;
      put_u64(b, std::string_view(kDevice).size());
      b += kDevice;
      b += payload;
      b.append(16, '\0');
      set_checksum(b);
      bundle(b);
      break;
    }
  }
  return 0;
}
