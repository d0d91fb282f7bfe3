// sdk/cache on its own: keys, the entry format, guards, the memory and disk stores, eviction,
// bundles.
#include <boost/test/unit_test.hpp>

#include <sstream>

#include <sys/stat.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <thread>
#include <unistd.h>

#include "kiln/cache/cache.h"
#include "kiln/config/config.h"
#include "kiln/format/graph_json.h"
#include "kiln/graph/error.h"

namespace fs = std::filesystem;
using namespace kiln;
using namespace kiln::cache;

namespace {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

struct TempDir {
  fs::path path;
  TempDir() {
    static int n = 0;
    path = fs::temp_directory_path() / ("kiln-cache-unit-" + std::to_string(::getpid()) + "-" + std::to_string(n++));
    fs::remove_all(path);
  }
  ~TempDir() { fs::remove_all(path); }
};

KeyInputs sample_inputs() {
  KeyInputs in;
  in.pipeline = "cpu.graph";
  in.graph = "{\"format\":\"kiln.graph\",\"nodes\":[1,2,3]}";
  in.inputs = "f32[64, 96];";
  in.codegen_hash = 1234;
  in.target = "cpu";
  in.device = "znver4 +avx2,+avx512f vector_bits=512 libmvec";
  in.toolchain = "llvm 16.0.6 x86_64-pc-linux-gnu O3";
  in.kiln_version = kiln_version();
  in.tag = "";
  return in;
}

Entry sample_entry() {
  const KeyInputs in = sample_inputs();
  Entry e;
  e.key = make_key(in).hex;
  e.description = "cpu.graph: 3 ops, 1 kernels, 1 objects";
  e.plan = "{\"format\":\"kiln.plan\"}";
  e.blobs = {{"module0.o", std::string("\x7f" "ELF\0\0binary\xff", 13)}, {"module1.o", std::string(1000, '\0')}};
  e.guards = guards_for(in);
  e.created_unix = 1700000000;
  return e;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(keys)

BOOST_AUTO_TEST_CASE(key_is_stable_and_hex) {
  const Key a = make_key(sample_inputs()), b = make_key(sample_inputs());
  BOOST_TEST(a.hex == b.hex);
  BOOST_TEST(is_valid_key(a.hex));
  BOOST_TEST(!is_valid_key("ABCDEF0123456789abcdef0123456789"));
  BOOST_TEST(!is_valid_key("../../etc/passwd"));
  BOOST_TEST(hash_hex("") != hash_hex(std::string(1, '\0')));
}

BOOST_AUTO_TEST_CASE(every_component_changes_the_key) {
  const std::string base = make_key(sample_inputs()).hex;
  const std::vector<std::pair<const char*, std::function<void(KeyInputs&)>>> changes = {
      {"pipeline", [](KeyInputs& k) { k.pipeline = "cpu.eager"; }},
      {"graph", [](KeyInputs& k) { k.graph += " "; }},
      {"inputs", [](KeyInputs& k) { k.inputs = "f32[64, 97];"; }},
      {"codegen_hash", [](KeyInputs& k) { k.codegen_hash += 1; }},
      {"target", [](KeyInputs& k) { k.target = "cuda"; }},
      {"device", [](KeyInputs& k) { k.device = "skylake-avx512 +avx2 vector_bits=512 libmvec"; }},
      {"toolchain", [](KeyInputs& k) { k.toolchain = "llvm 17.0.0 x86_64-pc-linux-gnu O3"; }},
      {"kiln_version", [](KeyInputs& k) { k.kiln_version = "9.9.9"; }},
      {"tag", [](KeyInputs& k) { k.tag = "experiment-2"; }},
  };
  std::set<std::string> seen{base};
  for (const auto& [name, change] : changes) {
    KeyInputs k = sample_inputs();
    change(k);
    const std::string key = make_key(k).hex;
    BOOST_TEST(key != base, name);
    BOOST_TEST(seen.insert(key).second, name);
  }
  // Fields are length-prefixed: moving bytes from one field to the next is another key.
  KeyInputs a = sample_inputs(), b = sample_inputs();
  a.target = "cp";
  a.device = "u" + a.device;
  BOOST_TEST(make_key(a).hex != make_key(b).hex);
}

// The graph as keys hash it: a constant over 256 bytes (a weight) by its XXH3-128, not as
// base64 text; a small one (a scale, a shape) as to_json writes it; any change of a byte is
// another key text.
BOOST_AUTO_TEST_CASE(big_constants_are_keyed_by_their_hash) {
  auto graph_of = [](float last) {
    Graph g;
    const NodeId x = g.add_input(TensorMeta{DType::f32, Device::cpu(), static_shape(std::vector<int64_t>{1000}), {}});
    auto big = std::make_shared<ConstantData>();
    big->sizes = {1000};
    std::vector<float> v(1000, 0.5f);
    v.back() = last;
    big->bytes.resize(v.size() * sizeof(float));
    std::memcpy(big->bytes.data(), v.data(), big->bytes.size());
    auto small = std::make_shared<ConstantData>();
    small->sizes = {2};
    small->bytes.resize(2 * sizeof(float));
    const NodeId w = g.add(OpId::constant, {}, {std::shared_ptr<const ConstantData>(big)});
    const NodeId b = g.add(OpId::constant, {}, {std::shared_ptr<const ConstantData>(small)});
    const NodeId y = g.add(OpId::mul, {x, w});
    g.set_outputs({y, b});
    return g;
  };
  const Graph a = graph_of(0.5f), b = graph_of(0.25f);
  const std::string ka = format::key_json(a, hash_hex_of), kb = format::key_json(b, hash_hex_of);
  BOOST_TEST(ka != kb);
  BOOST_TEST(ka == format::key_json(graph_of(0.5f), hash_hex_of));
  BOOST_TEST(ka.size() < 2000u, ka.size() << " bytes: " << ka);  // 4,000 bytes of weights are not in it
  BOOST_TEST(ka.find("\"data_digest\":\"" + hash_hex_of(a.node(1).attrs.tensor(0).bytes) + "\"") != std::string::npos, ka);
  BOOST_TEST(ka.find("\"data_base64\":\"AAAAAAAAAAA=\"") != std::string::npos, ka);  // the small one, as it is
  // Everything else is to_json's text on one line: with no big constants the two are the same.
  Graph plain;
  const NodeId x = plain.add_input(TensorMeta{DType::f32, Device::cpu(), static_shape(std::vector<int64_t>{4}), {}});
  plain.set_outputs({plain.add(OpId::exp, {x})});
  BOOST_TEST(format::key_json(plain, hash_hex_of) == format::to_json(plain, -1));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(entries)

BOOST_AUTO_TEST_CASE(round_trip) {
  const Entry e = sample_entry();
  const std::string bytes = encode_entry(e);
  BOOST_TEST((decode_entry(bytes, "x") == e));
  BOOST_TEST(encode_entry(decode_entry(bytes, "x")) == bytes);
}

BOOST_AUTO_TEST_CASE(every_damaged_byte_is_refused) {
  const std::string bytes = encode_entry(sample_entry());
  // Flip each byte in turn (every 7th, to keep it quick): never accepted, never a crash.
  for (size_t i = 0; i < bytes.size(); i += 7) {
    std::string bad = bytes;
    bad[i] = static_cast<char>(bad[i] ^ 0x20);
    const std::string msg = error_of([&] { (void)decode_entry(bad, "cache entry /c/k.kce"); });
    BOOST_TEST(msg.rfind("cache entry /c/k.kce: ", 0) == 0, "byte " << i << ": " << msg);
  }
  // Every truncation.
  for (size_t n = 0; n < bytes.size(); n += 5) {
    const std::string msg = error_of([&] { (void)decode_entry(bytes.substr(0, n), "e"); });
    BOOST_TEST(!msg.empty(), "truncated to " << n);
  }
  BOOST_TEST(error_of([&] { (void)decode_entry(bytes + "x", "e"); }).find("truncated or overlong") != std::string::npos);
  // A length field of 2^64 - 1 is said as it is, not as the 35 bytes header + length + checksum wrap to.
  std::string huge_length = bytes;
  for (size_t i = 12; i < 20; ++i) huge_length[i] = '\xff';
  BOOST_TEST(error_of([&] { (void)decode_entry(huge_length, "e"); }).find("the header says 18446744073709551615)") !=
             std::string::npos);
  BOOST_TEST(error_of([&] { (void)decode_entry("hello", "e"); }) ==
             "e: not a Kiln cache entry (5 bytes, shorter than the header)");
  std::string wrong_version = bytes;
  wrong_version[8] = 9;
  BOOST_TEST(error_of([&] { (void)decode_entry(wrong_version, "e"); }) ==
             "e: cache entry format version 9, this build reads version 1");
  std::string flipped = bytes;
  flipped[bytes.size() / 2] ^= 1;
  BOOST_TEST(error_of([&] { (void)decode_entry(flipped, "e"); }) == "e: checksum mismatch (the entry is damaged)");
}

BOOST_AUTO_TEST_CASE(guards_are_checked) {
  const Entry e = sample_entry();
  BOOST_TEST(check_guards(e, guards_for(sample_inputs())) == "");
  KeyInputs other = sample_inputs();
  other.device = "haswell +avx2";
  BOOST_TEST(check_guards(e, guards_for(other)) ==
             "device: entry made for 'znver4 +avx2,+avx512f vector_bits=512 libmvec', this process has 'haswell +avx2'");
  other = sample_inputs();
  other.graph = "another graph";
  BOOST_TEST(check_guards(e, guards_for(other)).rfind("graph: entry made for", 0) == 0);
  BOOST_TEST(check_guards(e, {{"nonsense", "x"}}) == "nonsense: the entry has no such guard");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(stores)

BOOST_AUTO_TEST_CASE(memory_store) {
  MemoryStore m;
  const std::string k = hash_hex("a");
  BOOST_TEST(!m.get(k));
  m.put(k, "bytes");
  BOOST_TEST(*m.get(k) == "bytes");
  BOOST_TEST(m.list().size() == 1u);
  BOOST_TEST(m.remove(k));
  BOOST_TEST(!m.remove(k));
  BOOST_TEST(error_of([&] { m.put("../x", "y"); }) ==
             "cache memory: '../x' is not a cache key (32 lowercase hex digits)");
}

BOOST_AUTO_TEST_CASE(disk_store_put_get_remove_list) {
  TempDir d;
  DiskStore s(d.path.string(), 1 << 20);
  const std::string k1 = hash_hex("1"), k2 = hash_hex("2");
  BOOST_TEST(!s.get(k1));  // no directory yet: a miss, not an error
  BOOST_TEST(s.list().empty());
  s.put(k1, "one");
  s.put(k2, std::string("t\0o", 3));
  BOOST_TEST(*s.get(k1) == "one");
  BOOST_TEST(*s.get(k2) == std::string("t\0o", 3));
  BOOST_TEST(s.list().size() == 2u);
  s.put(k1, "uno");  // replaced whole
  BOOST_TEST(*s.get(k1) == "uno");
  BOOST_TEST(s.remove(k1));
  BOOST_TEST(!s.get(k1));
  // Nothing but entries is left behind by puts.
  size_t files = 0;
  for (const auto& f : fs::directory_iterator(d.path)) files += f.is_regular_file();
  BOOST_TEST(files == 1u);
  BOOST_TEST(s.clear() == 1u);
  BOOST_TEST(s.list().empty());
  // What is not a regular file in an entry's place (a link to /dev/zero, a FIFO) is not read but
  // removed: a miss, which the compile fills again.
  fs::create_symlink("/dev/zero", s.path_of(k1));
  BOOST_TEST(!s.get(k1));
  BOOST_TEST(!fs::exists(fs::symlink_status(s.path_of(k1))));
  BOOST_REQUIRE(mkfifo(s.path_of(k2).c_str(), 0600) == 0);
  BOOST_TEST(!s.get(k2));
  BOOST_TEST(!fs::exists(fs::symlink_status(s.path_of(k2))));
  s.put(k2, "two");
  BOOST_TEST(*s.get(k2) == "two");
}

BOOST_AUTO_TEST_CASE(disk_store_evicts_least_recently_used) {
  TempDir d;
  DiskStore s(d.path.string(), 2500);  // room for two entries of 1000 bytes, not three
  const std::string a = hash_hex("a"), b = hash_hex("b"), c = hash_hex("c");
  const std::string kb(1000, 'x');
  s.put(a, kb);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  s.put(b, kb);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  BOOST_TEST(s.get(a).has_value());  // a is now the most recently used
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  s.put(c, kb);  // over the bound: b goes
  BOOST_TEST(s.get(a).has_value());
  BOOST_TEST(!s.get(b).has_value());
  BOOST_TEST(s.get(c).has_value());
  // An entry larger than the bound is still kept (it is the one just written).
  DiskStore tiny(d.path.string(), 10);
  const std::string big = hash_hex("big");
  tiny.put(big, kb);
  BOOST_TEST(tiny.list().size() == 1u);
  BOOST_TEST(tiny.get(big).has_value());
}

BOOST_AUTO_TEST_CASE(disk_store_write_error_names_the_path) {
  TempDir d;
  fs::create_directories(d.path);
  std::ofstream(d.path / "file") << "x";
  DiskStore s((d.path / "file" / "sub").string(), 1 << 20);
  const std::string msg = error_of([&] { s.put(hash_hex("x"), "y"); });
  BOOST_TEST(msg.find("cache disk store: cannot create the directory " + (d.path / "file" / "sub").string()) == 0, msg);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(layers)

BOOST_AUTO_TEST_CASE(lookup_deletes_bad_entries_and_counts_them) {
  TempDir d;
  config::Patch p({{"cache_dir", d.path.string()}});
  reset_memory_for_testing();
  const Entry e = sample_entry();
  const std::vector<Guard> expected = guards_for(sample_inputs());
  CacheStats s;
  BOOST_TEST(!lookup(e.key, expected, &s));
  BOOST_TEST(s.layers["artifacts"].misses == 1);
  BOOST_TEST(s.layers["disk"].misses == 1);
  store(e, &s);
  BOOST_TEST(s.layers["disk"].puts == 1);
  reset_memory_for_testing();  // as a new process: only the disk has it
  CacheStats s2;
  auto got = lookup(e.key, expected, &s2);
  BOOST_REQUIRE(got.has_value());
  BOOST_TEST((*got == e));
  BOOST_TEST(s2.layers["disk"].hits == 1);
  // Now in the artifacts layer too.
  CacheStats s3;
  BOOST_TEST(lookup(e.key, expected, &s3).has_value());
  BOOST_TEST(s3.layers["artifacts"].hits == 1);

  // A damaged file: a miss, deleted.
  reset_memory_for_testing();
  const fs::path file = DiskStore(d.path.string(), 1 << 20).path_of(e.key);
  {
    std::string bytes = *DiskStore(d.path.string(), 1 << 20).get(e.key);
    bytes[bytes.size() / 3] ^= 0x40;
    std::ofstream(file, std::ios::binary | std::ios::trunc) << bytes;
  }
  CacheStats s4;
  BOOST_TEST(!lookup(e.key, expected, &s4));
  BOOST_TEST(s4.layers["disk"].bad_entries == 1);
  BOOST_TEST(!fs::exists(file));

  // An entry whose guard fails here (made on another device): a miss, deleted.
  Entry foreign = e;
  KeyInputs other = sample_inputs();
  other.device = "another cpu";
  foreign.guards = guards_for(other);
  store(foreign);
  reset_memory_for_testing();
  CacheStats s5;
  BOOST_TEST(!lookup(e.key, expected, &s5));
  BOOST_TEST(s5.layers["disk"].bad_entries == 1);
  BOOST_TEST(!fs::exists(file));

  // An entry stored under another key than its own.
  Entry moved = e;
  moved.key = hash_hex("elsewhere");
  DiskStore(d.path.string(), 1 << 20).put(e.key, encode_entry(moved));
  BOOST_TEST(!lookup(e.key, expected));
  BOOST_TEST(!fs::exists(file));
  reset_memory_for_testing();
}

BOOST_AUTO_TEST_CASE(force_disable_caches_turns_every_layer_off) {
  TempDir d;
  config::Patch p({{"cache_dir", d.path.string()}, {"force_disable_caches", true}});
  reset_memory_for_testing();
  store(sample_entry());
  BOOST_TEST(!fs::exists(d.path));
  CacheStats s;
  BOOST_TEST(!lookup(sample_entry().key, {}, &s));
  BOOST_TEST(s.layers.empty());
  config::Patch q({{"force_disable_caches", false}, {"cache.plan_cache", false}});
  store(sample_entry());
  BOOST_TEST(!fs::exists(d.path));  // memory only
  BOOST_TEST(lookup(sample_entry().key, {}).has_value());
  reset_memory_for_testing();
}

BOOST_AUTO_TEST_CASE(cache_dir_defaults) {
  config::Patch p({{"cache_dir", std::string("/some/where")}});
  BOOST_TEST(cache_dir() == "/some/where");
  config::Patch q({{"cache_dir", std::string("")}});
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  const char* home = std::getenv("HOME");
  if (xdg && *xdg) BOOST_TEST(cache_dir() == std::string(xdg) + "/kiln");
  else if (home && *home) BOOST_TEST(cache_dir() == std::string(home) + "/.cache/kiln");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(bundles)

BOOST_AUTO_TEST_CASE(bundle_round_trip_and_refusals) {
  TempDir d;
  config::Patch p({{"cache_dir", d.path.string()}});
  reset_memory_for_testing();
  const Entry e = sample_entry();
  const std::string device = sample_inputs().device;
  store(e);
  Entry foreign = e;
  KeyInputs other = sample_inputs();
  other.device = "another cpu";
  foreign.key = make_key(other).hex;
  foreign.guards = guards_for(other);
  store(foreign);
  const std::string bundle = save_cache_artifacts(device);  // only this device's entry

  reset_memory_for_testing();
  DiskStore(d.path.string(), 1 << 20).clear();
  LoadResult r = load_cache_artifacts(bundle, device);
  BOOST_TEST(r.loaded == 1u);
  BOOST_TEST(r.reason == "");
  BOOST_TEST(DiskStore(d.path.string(), 1 << 20).get(e.key).has_value());
  BOOST_TEST(!DiskStore(d.path.string(), 1 << 20).get(foreign.key).has_value());

  // Another device: nothing, and why.
  reset_memory_for_testing();
  DiskStore(d.path.string(), 1 << 20).clear();
  r = load_cache_artifacts(bundle, "another cpu");
  BOOST_TEST(r.loaded == 0u);
  BOOST_TEST(r.reason == "the bundle was made for device '" + device + "', this process runs on 'another cpu'");
  BOOST_TEST(DiskStore(d.path.string(), 1 << 20).list().empty());

  // Another bundle format version: nothing, and why.
  std::string newer = bundle;
  newer[8] = 7;
  r = load_cache_artifacts(newer, device);
  BOOST_TEST(r.loaded == 0u);
  BOOST_TEST(r.reason == "the bundle has format version 7, this build reads version 1");

  // Damaged or not a bundle: an error.
  std::string damaged = bundle;
  damaged[damaged.size() / 2] ^= 1;
  BOOST_TEST(error_of([&] { (void)load_cache_artifacts(damaged, device); }) ==
             "cache bundle: checksum mismatch (the bundle is damaged)");
  BOOST_TEST(error_of([&] { (void)load_cache_artifacts("KILN", device); }).find("not a Kiln cache bundle") !=
             std::string::npos);
  BOOST_TEST(DiskStore(d.path.string(), 1 << 20).list().empty());
  reset_memory_for_testing();
}

// A keyed toy MAC (32 bytes): the mechanism under test is the format and who checks it; the
// real one (HMAC-SHA256) is native/cache's, tested with Redis.
Signer test_signer(const std::string& secret) {
  return Signer{"TEST_SECRET", [secret](std::string_view bytes) { return hash_hex(secret + std::string(bytes)); }};
}

struct SignerScope {
  explicit SignerScope(std::optional<Signer> s) { set_signer(std::move(s)); }
  ~SignerScope() { set_signer(std::nullopt); }
};

BOOST_AUTO_TEST_CASE(signatures_format_and_checks) {
  const Signer a = test_signer("a"), b = test_signer("b");
  const std::string signed_bytes = sign("payload", a);
  BOOST_TEST(signed_bytes.rfind("KSIG1", 0) == 0u);
  BOOST_TEST(signed_bytes.size() == 5u + 32u + 7u);
  BOOST_TEST(verify(signed_bytes, a).value() == "payload");
  BOOST_TEST(!verify(signed_bytes, b));
  BOOST_TEST(!verify("payload", a));
  BOOST_TEST(!verify("KSIG1short", a));
  std::string edited = signed_bytes;
  edited.back() ^= 1;
  BOOST_TEST(!verify(edited, a));
  BOOST_TEST(strip_signature(signed_bytes) == "payload");
  BOOST_TEST(strip_signature("payload") == "payload");
}

BOOST_AUTO_TEST_CASE(disk_store_with_a_signer_keeps_only_what_it_signed) {
  TempDir d;
  DiskStore s(d.path.string(), 1 << 20);
  const std::string k1 = hash_hex("1"), k2 = hash_hex("2"), k3 = hash_hex("3");
  s.put(k1, "unsigned");  // before the secret was set
  {
    SignerScope scope(test_signer("a"));
    s.put(k2, "signed by a");
    std::ifstream in(s.path_of(k2), std::ios::binary);
    std::stringstream raw;
    raw << in.rdbuf();
    BOOST_TEST(raw.str().rfind("KSIG1", 0) == 0u);
    BOOST_TEST(*s.get(k2) == "signed by a");
    BOOST_TEST(!s.get(k1));  // unsigned: removed, a miss
    BOOST_TEST(!fs::exists(s.path_of(k1)));
  }
  {
    SignerScope scope(test_signer("b"));
    s.put(k3, "signed by b");
    BOOST_TEST(!s.get(k2));  // another secret's: removed
    BOOST_TEST(!fs::exists(s.path_of(k2)));
    BOOST_TEST(*s.get(k3) == "signed by b");
  }
  BOOST_TEST(*s.get(k3) == "signed by b");  // no secret: the disk is trusted, the payload read
}

BOOST_AUTO_TEST_CASE(bundles_with_a_signer) {
  TempDir d;
  config::Patch p({{"cache_dir", d.path.string()}});
  reset_memory_for_testing();
  const Entry e = sample_entry();
  const std::string device = sample_inputs().device;
  store(e);
  const std::string plain = save_cache_artifacts(device);
  std::string signed_bundle;
  {
    SignerScope scope(test_signer("a"));
    signed_bundle = save_cache_artifacts(device);
    BOOST_TEST(signed_bundle.rfind("KSIG1", 0) == 0u);
    BOOST_TEST(load_cache_artifacts(signed_bundle, device).loaded == 1u);
    BOOST_TEST(error_of([&] { (void)load_cache_artifacts(plain, device); }) ==
               "cache bundle: not signed with TEST_SECRET (it has no signature: made without the secret); nothing "
               "was loaded");
  }
  {
    SignerScope scope(test_signer("b"));
    BOOST_TEST(error_of([&] { (void)load_cache_artifacts(signed_bundle, device); }) ==
               "cache bundle: not signed with TEST_SECRET (signed with another secret, or edited); nothing was loaded");
  }
  BOOST_TEST(load_cache_artifacts(signed_bundle, device).loaded == 1u);  // no secret: read as is
  reset_memory_for_testing();
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(records)

BOOST_AUTO_TEST_CASE(autotune_and_profile_records_round_trip_and_travel_in_bundles) {
  TempDir d;
  config::Patch p({{"cache_dir", d.path.string()}});
  reset_memory_for_testing();
  const std::string device = sample_inputs().device;
  // Absent, then stored, then found again from the disk by a process that has nothing in memory.
  BOOST_TEST(!autotune_lookup("cpu", device, "kernel text", "sizes=64,"));
  autotune_store("cpu", device, "kernel text", "sizes=64,", R"({"function":"k0_tiled","chunk":64})", "k0: k0_tiled");
  reset_memory_for_testing();
  BOOST_TEST(autotune_lookup("cpu", device, "kernel text", "sizes=64,").value() == R"({"function":"k0_tiled","chunk":64})");
  // Every part of the key matters: other code, other sizes, another device, another target.
  BOOST_TEST(!autotune_lookup("cpu", device, "kernel text 2", "sizes=64,"));
  BOOST_TEST(!autotune_lookup("cpu", device, "kernel text", "sizes=128,"));
  BOOST_TEST(!autotune_lookup("cpu", "another cpu", "kernel text", "sizes=64,"));
  BOOST_TEST(!autotune_lookup("cuda", device, "kernel text", "sizes=64,"));
  // A record never answers a plan lookup of the same text, and a replaced value wins.
  const RecordKey profile{"dynamic_profile", "f at a.cpp:3", "job j", "", ""};
  put_record(profile, "0 2 1\n", "profile");
  put_record(profile, "0 2 1\n1 2 0\n", "profile");
  BOOST_TEST(get_record(profile).value() == "0 2 1\n1 2 0\n");
  BOOST_TEST(!get_record(RecordKey{"dynamic_profile", "f at a.cpp:3", "job k", "", ""}));
  // Bundles carry this device's autotune records and the device-independent profiles, not
  // another device's records.
  autotune_store("cpu", "another cpu", "kernel text", "sizes=64,", R"({"function":"k0","chunk":8})", "k0: k0");
  const std::string bundle = save_cache_artifacts(device);
  reset_memory_for_testing();
  DiskStore(d.path.string(), 1 << 20).clear();
  BOOST_TEST(!get_record(profile));
  const LoadResult r = load_cache_artifacts(bundle, device);
  BOOST_TEST(r.loaded == 2u);
  BOOST_TEST(autotune_lookup("cpu", device, "kernel text", "sizes=64,").has_value());
  BOOST_TEST(get_record(profile).value() == "0 2 1\n1 2 0\n");
  BOOST_TEST(!autotune_lookup("cpu", "another cpu", "kernel text", "sizes=64,"));
  // Off with every cache.
  config::Patch off({{"force_disable_caches", true}});
  BOOST_TEST(!get_record(profile));
  reset_memory_for_testing();
}

BOOST_AUTO_TEST_SUITE_END()
