// The caches across processes: each test runs this binary as child processes (child.cpp)
// against a cache directory of its own, as separate programs would.
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/test/unit_test.hpp>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "kiln/cache/cache.h"

extern char** environ;

namespace fs = std::filesystem;
using namespace kiln::cache;

namespace {

std::string self_exe() { return fs::read_symlink("/proc/self/exe").string(); }

struct Run {
  int status = -1;  // exit code
  std::string out;  // stdout and stderr
  // "stats compiles=1 memory=0/1 artifacts=0/1 disk=0/1" -> {"compiles": "1", "disk": "0/1", ...}
  std::map<std::string, std::string> stats() const {
    std::map<std::string, std::string> m;
    std::istringstream in(out);
    std::string line;
    while (std::getline(in, line)) {
      if (line.rfind("stats ", 0) != 0) continue;
      std::istringstream words(line.substr(6));
      std::string w;
      while (words >> w) {
        const size_t eq = w.find('=');
        if (eq != std::string::npos) m[w.substr(0, eq)] = w.substr(eq + 1);
      }
    }
    return m;
  }
  bool ok() const { return status == 0 && out.find("result ok") != std::string::npos; }
};

std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// Starts `test_cache --child args...` with extra environment variables, output to a pipe.
FILE* start(const std::vector<std::string>& args, const std::map<std::string, std::string>& env) {
  std::string cmd = "env";
  for (const auto& [k, v] : env) cmd += " " + k + "=" + shell_quote(v);
  cmd += " " + shell_quote(self_exe()) + " --child";
  for (const std::string& a : args) cmd += " " + shell_quote(a);
  cmd += " 2>&1";
  FILE* f = ::popen(cmd.c_str(), "r");
  BOOST_REQUIRE(f);
  return f;
}

Run finish(FILE* f) {
  Run r;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) r.out.append(buf, n);
  const int st = ::pclose(f);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
  return r;
}

Run child(const std::vector<std::string>& args, const std::map<std::string, std::string>& env) {
  return finish(start(args, env));
}

struct CacheDir {
  fs::path path;
  CacheDir() {
    static int n = 0;
    path = fs::temp_directory_path() / ("kiln-cache-proc-" + std::to_string(::getpid()) + "-" + std::to_string(n++));
    fs::remove_all(path);
  }
  ~CacheDir() { fs::remove_all(path); }
  std::map<std::string, std::string> env(std::map<std::string, std::string> extra = {}) const {
    extra["KILN_CACHE_DIR"] = path.string();
    return extra;
  }
  std::vector<fs::path> entries() const {
    std::vector<fs::path> out;
    if (!fs::exists(path)) return out;
    for (const auto& f : fs::directory_iterator(path))
      if (f.path().extension() == ".kce") out.push_back(f.path());
    return out;
  }
};

// Every entry in the directory decodes (none is torn) and is stored under its own key.
void check_all_entries_whole(const CacheDir& d) {
  for (const fs::path& p : d.entries()) {
    std::ifstream in(p, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    Entry e;
    BOOST_CHECK_NO_THROW(e = decode_entry(s.str(), p.string()));
    BOOST_TEST(e.key + ".kce" == p.filename().string());
  }
}

Entry read_entry_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return decode_entry(s.str(), path.string());
}

// Entries of the directory whose `kiln cache ls` description starts with `prefix`.
size_t count_described(const CacheDir& d, const std::string& prefix) {
  size_t n = 0;
  for (const fs::path& p : d.entries()) {
    std::ifstream in(p, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    if (decode_entry(s.str(), p.string()).description.rfind(prefix, 0) == 0) ++n;
  }
  return n;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(processes)

BOOST_AUTO_TEST_CASE(profile_guided_dynamic_shapes_with_a_job_id) {
  CacheDir d;
  // The first run of the job compiles the static shape, then recompiles with dim 1 dynamic.
  const Run first = child({"pgo"}, d.env({{"KILN_JOB_ID", "job-a"}}));
  BOOST_TEST_REQUIRE(first.ok(), first.out);
  BOOST_TEST(first.stats().at("compiles") == "2", first.out);
  BOOST_TEST(count_described(d, "dynamic-shape profile of ") == 1u);
  // The next run of the same job compiles dim 1 dynamic at once: one compile serves both sizes.
  const Run second = child({"pgo"}, d.env({{"KILN_JOB_ID", "job-a"}, {"KILN_LOGS", "cache"}}));
  BOOST_TEST_REQUIRE(second.ok(), second.out);
  BOOST_TEST(second.stats().at("compiles") == "1", second.out);
  BOOST_TEST(second.out.find("1 dims dynamic from the start") != std::string::npos, second.out);
  // Without a job id nothing is read (two compiles) and nothing is saved.
  const Run none = child({"pgo"}, d.env());
  BOOST_TEST_REQUIRE(none.ok(), none.out);
  BOOST_TEST(none.stats().at("compiles") == "2", none.out);
  BOOST_TEST(count_described(d, "dynamic-shape profile of ") == 1u);
  // Another job does not read job-a's profile, and keeps its own.
  const Run other = child({"pgo"}, d.env({{"KILN_JOB_ID", "job-b"}}));
  BOOST_TEST(other.stats().at("compiles") == "2", other.out);
  BOOST_TEST(count_described(d, "dynamic-shape profile of ") == 2u);
  const Run other2 = child({"pgo"}, d.env({{"KILN_JOB_ID", "job-b"}}));
  BOOST_TEST(other2.stats().at("compiles") == "1", other2.out);
  // force_disable_caches: the profile is not read either.
  const Run off = child({"pgo"}, d.env({{"KILN_JOB_ID", "job-a"}, {"KILN_FORCE_DISABLE_CACHES", "1"}}));
  BOOST_TEST(off.stats().at("compiles") == "2", off.out);
}

BOOST_AUTO_TEST_CASE(autotune_choices_are_cached_across_processes) {
  CacheDir d;
  const auto env = d.env({{"KILN_LOGS", "perf_hints"}});
  // The first process times the candidates (the BLAS call and the generated tiles, chunk
  // sizes) and keeps the winners.
  const Run cold = child({"autotune"}, env);
  BOOST_TEST_REQUIRE(cold.ok(), cold.out);
  BOOST_TEST(cold.out.find("candidates)") != std::string::npos, cold.out);
  BOOST_TEST(cold.out.find("(from the autotune cache)") == std::string::npos, cold.out);
  BOOST_TEST(count_described(d, "autotune cpu ") >= 1u);
  // The second takes them from the cache and times nothing.
  const Run warm = child({"autotune"}, env);
  BOOST_TEST_REQUIRE(warm.ok(), warm.out);
  BOOST_TEST(warm.out.find("(from the autotune cache)") != std::string::npos, warm.out);
  BOOST_TEST(warm.out.find("candidates)") == std::string::npos, warm.out);
  // autotune.cache off (and no remote): the choices are neither read nor kept.
  const Run no_tune_cache = child({"autotune"}, d.env({{"KILN_LOGS", "perf_hints"}, {"KILN_AUTOTUNE_CACHE", "0"}}));
  BOOST_TEST_REQUIRE(no_tune_cache.ok(), no_tune_cache.out);
  BOOST_TEST(no_tune_cache.out.find("candidates)") != std::string::npos, no_tune_cache.out);
  // With every cache off it times again.
  const Run off = child({"autotune"}, d.env({{"KILN_LOGS", "perf_hints"}, {"KILN_FORCE_DISABLE_CACHES", "1"}}));
  BOOST_TEST_REQUIRE(off.ok(), off.out);
  BOOST_TEST(off.out.find("candidates)") != std::string::npos, off.out);
}

BOOST_AUTO_TEST_CASE(cold_then_warm_then_assert_no_compile) {
  CacheDir d;
  const Run cold = child({"compile", "0"}, d.env());
  BOOST_TEST_REQUIRE(cold.ok(), cold.out);
  BOOST_TEST(cold.stats().at("disk") == "0/1", cold.out);
  BOOST_TEST(d.entries().size() == 1u);

  const Run warm = child({"compile", "0"}, d.env({{"KILN_ASSERT_NO_COMPILE", "1"}}));
  BOOST_TEST_REQUIRE(warm.ok(), warm.out);
  BOOST_TEST(warm.stats().at("compiles") == "1");  // the capture stage compiled once: from the cache
  BOOST_TEST(warm.stats().at("disk") == "1/0", warm.out);

  // Another graph is not in the cache: with assert_no_compile that is an error naming it.
  const Run other = child({"compile", "1"}, d.env({{"KILN_ASSERT_NO_COMPILE", "1"}}));
  BOOST_TEST(other.status == 2, other.out);
  BOOST_TEST(other.out.find("assert_no_compile is set, but the graph of ") != std::string::npos, other.out);
  BOOST_TEST(other.out.find("would be compiled: no cache holds it (cache key ") != std::string::npos, other.out);

  // force_disable_caches: the warm directory is not read, so that compile is refused too.
  const Run off = child({"compile", "0"}, d.env({{"KILN_FORCE_DISABLE_CACHES", "1"}, {"KILN_ASSERT_NO_COMPILE", "1"}}));
  BOOST_TEST(off.status == 2, off.out);
  BOOST_TEST(off.out.find("(caches are off)") != std::string::npos, off.out);
  const Run off2 = child({"compile", "0"}, d.env({{"KILN_FORCE_DISABLE_CACHES", "1"}}));
  BOOST_TEST(off2.ok(), off2.out);
  BOOST_TEST(off2.stats().at("disk") == "0/0", off2.out);
  BOOST_TEST(off2.stats().at("memory") == "0/0", off2.out);
}

BOOST_AUTO_TEST_CASE(key_sensitivity_through_the_frontend) {
  CacheDir d;
  BOOST_TEST_REQUIRE(child({"compile", "0"}, d.env()).ok());
  // Options that do not change code, and logging, hit the entry.
  for (const auto& [var, value] : std::vector<std::pair<std::string, std::string>>{
           {"KILN_LOGS", "all"}, {"KILN_VERBOSE", "1"}, {"KILN_RECOMPILE_LIMIT", "3"}, {"KILN_CACHE_SIZE_LIMIT_MB", "512"}}) {
    const Run r = child({"compile", "0"}, d.env({{var, value}}));
    BOOST_TEST(r.ok(), var << ": " << r.out.substr(0, 2000));
    BOOST_TEST(r.stats()["disk"] == "1/0", var);
  }
  BOOST_TEST(d.entries().size() == 1u);
  // Codegen options and the tag miss, and each makes an entry of its own.
  size_t expected_entries = 1;
  for (const auto& [var, value] : std::vector<std::pair<std::string, std::string>>{
           {"KILN_CACHE_KEY_TAG", "experiment"}, {"KILN_FUSION_MAX_FUSION_SIZE", "1"}, {"KILN_CPU_VECTOR_WIDTH", "128"}}) {
    const Run r = child({"compile", "0"}, d.env({{var, value}}));
    BOOST_TEST(r.ok(), var << ": " << r.out);
    BOOST_TEST(r.stats()["disk"] == "0/1", var);
    BOOST_TEST(d.entries().size() == ++expected_entries, var);
  }
}

// A cpu key holds a cheap fingerprint of the host; the entry holds LLVM's own identity of the
// host it was made on, and code made for another CPU never runs: the process compiles its own
// and leaves the entry to the hosts it was made for.
BOOST_AUTO_TEST_CASE(an_entry_made_for_another_cpu_is_compiled_again_and_kept) {
  CacheDir d;
  BOOST_TEST_REQUIRE(child({"compile", "0"}, d.env()).ok());
  BOOST_REQUIRE(d.entries().size() == 1u);
  const fs::path path = d.entries()[0];
  auto read_entry = [&path] { return read_entry_file(path); };
  Entry e = read_entry();
  std::string* identity = nullptr;
  for (auto& [name, bytes] : e.blobs)
    if (name == "host.identity") identity = &bytes;
  BOOST_REQUIRE(identity);
  BOOST_TEST(identity->find("+") != std::string::npos, *identity);  // "cpu-name +feature,... libmvec"
  const std::string here = *identity;
  *identity = "other-cpu +avx512f,+avx512bw libmvec";
  std::ofstream(path, std::ios::binary | std::ios::trunc) << encode_entry(e);

  const Run r = child({"compile", "0"}, d.env({{"KILN_LOGS", "cache"}}));
  BOOST_TEST(r.ok(), r.out);
  BOOST_TEST(r.out.find("made for another CPU (other-cpu +avx512f,+avx512bw libmvec) than this one (" + here + ")") !=
                 std::string::npos,
             r.out);
  BOOST_TEST((read_entry() == e));  // not stored over
  // assert_no_compile refuses that compile.
  const Run strict = child({"compile", "0"}, d.env({{"KILN_ASSERT_NO_COMPILE", "1"}}));
  BOOST_TEST(strict.status == 2, strict.out);
  // An entry of this host's own is used again.
  *identity = here;
  std::ofstream(path, std::ios::binary | std::ios::trunc) << encode_entry(e);
  const Run warm = child({"compile", "0"}, d.env({{"KILN_ASSERT_NO_COMPILE", "1"}}));
  BOOST_TEST(warm.ok(), warm.out);
}

// An entry stripped of some or all of its artifacts (objects, the host it was made for) is
// damaged, not another host's: it is replaced by a fresh compile, not kept beside one.
BOOST_AUTO_TEST_CASE(an_entry_stripped_of_its_artifacts_is_replaced) {
  CacheDir d;
  BOOST_TEST_REQUIRE(child({"compile", "0"}, d.env()).ok());
  BOOST_REQUIRE(d.entries().size() == 1u);
  const fs::path path = d.entries()[0];
  auto read_entry = [&path] { return read_entry_file(path); };
  const Entry whole = read_entry();
  auto has = [](const Entry& e, const std::string& prefix) {
    for (const auto& [name, bytes] : e.blobs)
      if (name.rfind(prefix, 0) == 0) return true;
    return false;
  };
  BOOST_REQUIRE(has(whole, "host.identity"));
  BOOST_REQUIRE(has(whole, "module"));
  for (const std::string strip : {"module", "host.identity", ""}) {
    Entry e = whole;
    std::erase_if(e.blobs, [&](const auto& b) { return b.first.rfind(strip, 0) == 0; });  // "": every blob
    std::ofstream(path, std::ios::binary | std::ios::trunc) << encode_entry(e);
    // Checked as kiln cache ls checks it: its checksum is right, but it would not load as a hit
    // (issue 31: ls showed it as healthy); the check leaves it in place.
    const Run check = child({"check"}, d.env());
    BOOST_TEST(check.status == 0, check.out);
    BOOST_TEST(check.out.find(" removed: ") != std::string::npos, "stripped '" << strip << "': " << check.out);
    BOOST_TEST(fs::exists(path));
    const Run r = child({"compile", "0"}, d.env({{"KILN_LOGS", "cache"}}));
    BOOST_TEST(r.ok(), r.out);
    BOOST_TEST(r.out.find("cannot load it") != std::string::npos, "stripped '" << strip << "': " << r.out);
    const Entry again = read_entry();
    BOOST_TEST(has(again, "host.identity"), "stripped '" << strip << "'");
    BOOST_TEST(has(again, "module"), "stripped '" << strip << "'");
    const Run warm = child({"compile", "0"}, d.env({{"KILN_ASSERT_NO_COMPILE", "1"}}));
    BOOST_TEST(warm.ok(), warm.out);
  }
}

BOOST_AUTO_TEST_CASE(corrupt_and_truncated_entries_are_deleted_and_recompiled) {
  CacheDir d;
  BOOST_TEST_REQUIRE(child({"compile", "0"}, d.env()).ok());
  BOOST_REQUIRE(d.entries().size() == 1u);
  const fs::path entry = d.entries()[0];
  std::string bytes;
  {
    std::ifstream in(entry, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    bytes = s.str();
  }
  // One flipped byte in the object code, then a truncated file, then garbage.
  std::string flipped = bytes;
  flipped[bytes.size() - 100] ^= 0x01;
  for (const std::string& bad : {flipped, bytes.substr(0, bytes.size() / 2), std::string("garbage")}) {
    std::ofstream(entry, std::ios::binary | std::ios::trunc) << bad;
    const Run r = child({"compile", "0"}, d.env({{"KILN_LOGS", "cache"}}));
    BOOST_TEST(r.ok(), r.out);
    BOOST_TEST(r.stats().at("disk") == "0/1", r.out);
    BOOST_TEST(r.out.find("deleted it, compiling again") != std::string::npos, r.out);
    // Recompiled and stored whole again.
    BOOST_REQUIRE(d.entries().size() == 1u);
    check_all_entries_whole(d);
    const Run warm = child({"compile", "0"}, d.env({{"KILN_ASSERT_NO_COMPILE", "1"}}));
    BOOST_TEST(warm.ok(), warm.out);
  }
}

BOOST_AUTO_TEST_CASE(several_processes_share_one_directory) {
  CacheDir d;
  // Six processes at once: three graphs, each compiled by two of them.
  std::vector<FILE*> running;
  for (int i = 0; i < 6; ++i) running.push_back(start({"compile", std::to_string(i % 3)}, d.env()));
  for (FILE* f : running) {
    const Run r = finish(f);
    BOOST_TEST(r.ok(), r.out);
    BOOST_TEST(r.stats().at("compiles") == "1", r.out);  // each graph compiled at most once per process
  }
  BOOST_TEST(d.entries().size() == 3u);
  check_all_entries_whole(d);
  // Then all of them warm, again at once.
  running.clear();
  for (int i = 0; i < 6; ++i) running.push_back(start({"compile", std::to_string(i % 3)}, d.env({{"KILN_ASSERT_NO_COMPILE", "1"}})));
  for (FILE* f : running) {
    const Run r = finish(f);
    BOOST_TEST(r.ok(), r.out);
    BOOST_TEST(r.stats().at("disk") == "1/0", r.out);
  }
}

BOOST_AUTO_TEST_CASE(a_writer_killed_mid_write_leaves_nothing_that_loads) {
  CacheDir d;
  fs::create_directories(d.path);
  const std::string exe = self_exe();
  std::vector<std::string> args = {exe, "--child", "write", d.path.string(), "64"};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  BOOST_REQUIRE(::posix_spawn(&pid, exe.c_str(), nullptr, nullptr, argv.data(), environ) == 0);
  // Wait until its first temporary file is being written, then kill it.
  bool writing = false;
  for (int i = 0; i < 2000 && !writing; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    for (const auto& f : fs::directory_iterator(d.path)) {
      std::error_code ec;
      if (f.path().filename().string().rfind(".tmp-", 0) == 0 && fs::file_size(f.path(), ec) > 0 && !ec) writing = true;
    }
  }
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  BOOST_TEST(WIFSIGNALED(status));
  BOOST_TEST_REQUIRE(writing);
  // Whatever it left: entries renamed into place are whole; the temporary file is no entry.
  DiskStore store(d.path.string(), uint64_t{1} << 40);
  for (const StoredInfo& i : store.list()) BOOST_TEST(*store.get(i.key) == std::string(64u << 20, 'x'));
  const std::string first = hash_hex("0");
  if (auto got = store.get(first)) BOOST_TEST(got->size() == 64u << 20);
  // A real compile against that directory still works, and its entry is whole.
  const Run r = child({"compile", "0"}, d.env());
  BOOST_TEST(r.ok(), r.out);
  check_all_entries_whole(d);
}

BOOST_AUTO_TEST_CASE(bundles_move_a_warm_cache_to_another_process) {
  CacheDir a, b;
  const fs::path file = a.path.string() + ".bundle";
  const Run save = child({"save", file.string(), "2"}, a.env());
  BOOST_TEST_REQUIRE(save.ok(), save.out);
  // An empty cache directory, and no compiling allowed: everything comes from the bundle.
  const Run load = child({"load", file.string(), "2"}, b.env({{"KILN_ASSERT_NO_COMPILE", "1"}}));
  BOOST_TEST(load.ok(), load.out);
  BOOST_TEST(load.out.find("loaded 1\n") != std::string::npos, load.out);
  BOOST_TEST(load.stats().at("artifacts") == "1/0", load.out);
  BOOST_TEST(b.entries().size() == 1u);  // and it is on disk for the next process
  fs::remove(file);
}

BOOST_AUTO_TEST_SUITE_END()
