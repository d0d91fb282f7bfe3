// The Redis remote cache against a real redis-server this test starts on a free loopback port
// (and stops): the store, HMAC signing, a server that is down, slow or wants a password, and
// processes sharing compiled code through it.
#include <arpa/inet.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
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

#include "kiln/cache/redis_store.h"
#include "kiln/config/log.h"

extern char** environ;

namespace fs = std::filesystem;
using namespace kiln::cache;

namespace {

int free_port() {
  const int s = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  ::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  ::getsockname(s, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(s);
  return ntohs(a.sin_port);
}

std::string redis_server_path() {
  for (const char* p : {"/usr/bin/redis-server", "/usr/local/bin/redis-server"})
    if (fs::exists(p)) return p;
  return "";
}

// A redis-server of our own; stopped by the destructor.
struct Server {
  int port = 0;
  pid_t pid = 0;
  Server() {
    const std::string exe = redis_server_path();
    BOOST_REQUIRE_MESSAGE(!exe.empty(), "redis-server is not installed (.ci/install-deps installs it)");
    port = free_port();
    std::vector<std::string> args = {exe, "--port", std::to_string(port), "--bind", "127.0.0.1", "--save", "",
                                     "--appendonly", "no", "--enable-debug-command", "yes", "--loglevel", "warning", "--logfile", "/dev/null"};
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    BOOST_REQUIRE(::posix_spawn(&pid, exe.c_str(), nullptr, nullptr, argv.data(), environ) == 0);
    for (int i = 0; i < 500; ++i) {
      if (redisContext* c = redisConnect("127.0.0.1", port); c && !c->err) {
        redisFree(c);
        return;
      } else if (c) {
        redisFree(c);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    BOOST_FAIL("redis-server did not start on port " << port);
  }
  ~Server() { stop(); }
  void stop() {
    if (!pid) return;
    ::kill(pid, SIGTERM);
    int st = 0;
    ::waitpid(pid, &st, 0);
    pid = 0;
  }
  // A raw command on a connection of its own.
  std::string command(const std::vector<std::string>& words) {
    redisContext* c = redisConnect("127.0.0.1", port);
    BOOST_REQUIRE(c && !c->err);
    std::vector<const char*> argv;
    std::vector<size_t> lens;
    for (const std::string& w : words) {
      argv.push_back(w.data());
      lens.push_back(w.size());
    }
    auto* r = static_cast<redisReply*>(redisCommandArgv(c, static_cast<int>(argv.size()), argv.data(), lens.data()));
    std::string out = r && (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS || r->type == REDIS_REPLY_ERROR)
                          ? std::string(r->str, r->len)
                          : "";
    if (r) freeReplyObject(r);
    redisFree(c);
    return out;
  }
};

RedisOptions opts(int port, std::string secret = "") {
  RedisOptions o;
  o.host = "127.0.0.1";
  o.port = port;
  o.timeout_ms = 200;
  o.secret = std::move(secret);
  return o;
}

struct Warnings {
  std::shared_ptr<std::string> text = std::make_shared<std::string>();
  Warnings() {
    auto t = text;
    kiln::logs::set_sink_for_testing([t](std::string_view s) { *t += std::string(s); });
  }
  ~Warnings() { kiln::logs::set_sink_for_testing({}); }
};

// The child processes of test_processes.cpp, here with the remote cache on.
struct Run {
  int status = -1;
  std::string out;
  std::string stat(const std::string& name) const {
    const size_t at = out.find(" " + name + "=");
    if (at == std::string::npos) return "";
    const size_t b = at + name.size() + 2;
    return out.substr(b, out.find_first_of(" \n", b) - b);
  }
};

FILE* start(const std::vector<std::string>& args, const std::map<std::string, std::string>& env) {
  std::string cmd = "env";
  for (const auto& [k, v] : env) cmd += " " + k + "='" + v + "'";
  cmd += " '" + fs::read_symlink("/proc/self/exe").string() + "' --child";
  for (const std::string& a : args) cmd += " '" + a + "'";
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
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128;
  return r;
}

Run child(const std::vector<std::string>& args, const std::map<std::string, std::string>& env) {
  return finish(start(args, env));
}

// The "compiles=N" of every stats line (one per compiled function).
std::vector<std::string> compiles_per_function(const std::string& out) {
  std::vector<std::string> v;
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("stats compiles=", 0) == 0) v.push_back(line.substr(15, line.find(' ', 15) - 15));
  return v;
}

// Every entry decodes whole and is stored under its own key.
void check_whole(Store& store, const std::string& where) {
  for (const StoredInfo& i : store.list()) {
    const std::optional<std::string> bytes = store.get(i.key);
    BOOST_REQUIRE_MESSAGE(bytes, where << ": " << i.key << " listed but not readable");
    Entry e;
    BOOST_CHECK_NO_THROW(e = decode_entry(*bytes, where + " " + i.key));
    BOOST_TEST(e.key == i.key, where);
  }
}

fs::path temp_dir(const std::string& tag) {
  static int n = 0;
  fs::path p = fs::temp_directory_path() / ("kiln-redis-" + tag + "-" + std::to_string(::getpid()) + "-" + std::to_string(n++));
  fs::remove_all(p);
  return p;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(redis)

BOOST_AUTO_TEST_CASE(store_round_trip) {
  Server server;
  RedisStore s(opts(server.port));
  const std::string k = hash_hex("r1");
  BOOST_TEST(!s.get(k));
  s.put(k, std::string("bytes\0with nul", 14));
  BOOST_TEST(*s.get(k) == std::string("bytes\0with nul", 14));
  BOOST_TEST(s.list().size() == 1u);
  BOOST_TEST(s.list()[0].bytes == 14u);
  BOOST_TEST(s.remove(k));
  BOOST_TEST(!s.get(k));
}

BOOST_AUTO_TEST_CASE(signed_entries_and_tampering) {
  Server server;
  const std::string k = hash_hex("signed");
  RedisStore signer(opts(server.port, "s3cret"));
  signer.put(k, "payload");
  BOOST_TEST(*signer.get(k) == "payload");
  BOOST_TEST(server.command({"GET", "kiln:entry:" + k}).rfind("KSIG1", 0) == 0);
  {
    Warnings w;
    // Another secret: refused.
    RedisStore other(opts(server.port, "other"));
    BOOST_TEST(!other.get(k));
    BOOST_TEST(other.refused() == 1);
    // Tampered payload: refused.
    std::string value = server.command({"GET", "kiln:entry:" + k});
    value.back() ^= 1;
    server.command({"SET", "kiln:entry:" + k, value});
    BOOST_TEST(!signer.get(k));
    // Unsigned (written without a secret): refused by a store with one.
    RedisStore plain(opts(server.port));
    plain.put(k, "unsigned payload");
    BOOST_TEST(!signer.get(k));
    BOOST_TEST(signer.refused() == 2);
    BOOST_TEST(w.text->find("signature does not verify with KILN_CACHE_SECRET") != std::string::npos, *w.text);
  }
  BOOST_TEST(unsign_entry(sign_entry("abc", "k"), "k").value() == "abc");
  BOOST_TEST(!unsign_entry(sign_entry("abc", "k"), "K"));
  BOOST_TEST(!unsign_entry("KSIG1short", "k"));
}

BOOST_AUTO_TEST_CASE(down_slow_and_password_protected_servers_are_survived) {
  Warnings w;
  // Nothing listens: one warning, a quick miss, then the store backs off without waiting.
  {
    RedisStore s(opts(free_port()));
    const auto t0 = std::chrono::steady_clock::now();
    BOOST_TEST(!s.get(hash_hex("x")));
    s.put(hash_hex("x"), "y");
    BOOST_TEST(!s.get(hash_hex("x")));
    BOOST_TEST((std::chrono::steady_clock::now() - t0 < std::chrono::seconds(2)));
    BOOST_TEST(w.text->find("cannot connect") != std::string::npos, *w.text);
    BOOST_TEST(w.text->find("going on with the local cache (warned once)") != std::string::npos);
  }
  Server server;
  // Slow: the server sleeps 1 s; our 200 ms command timeout gives up.
  {
    RedisStore s(opts(server.port));
    s.put(hash_hex("slow"), "v");
    std::thread sleeper([&] { server.command({"DEBUG", "SLEEP", "1"}); });
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    const auto t0 = std::chrono::steady_clock::now();
    BOOST_TEST(!s.get(hash_hex("slow")));
    BOOST_TEST((std::chrono::steady_clock::now() - t0 < std::chrono::milliseconds(900)));
    sleeper.join();
  }
  // A password: the wrong one is refused with a warning; the right one works.
  server.command({"CONFIG", "SET", "requirepass", "pw"});
  {
    RedisOptions o = opts(server.port);
    o.password = "wrong";
    RedisStore s(o);
    w.text->clear();
    BOOST_TEST(!s.get(hash_hex("p")));
    BOOST_TEST(w.text->find("AUTH refused") != std::string::npos, *w.text);
    o.password = "pw";
    RedisStore good(o);
    good.put(hash_hex("p"), "ok");
    BOOST_TEST(good.get(hash_hex("p")).value() == "ok");
  }
}

BOOST_AUTO_TEST_CASE(processes_share_code_through_redis) {
  Server server;
  const fs::path a = temp_dir("a"), b = temp_dir("b"), c = temp_dir("c");
  const std::map<std::string, std::string> remote = {{"KILN_REMOTE_CACHE", "1"},
                                                     {"KILN_REDIS_HOST", "127.0.0.1"},
                                                     {"KILN_REDIS_PORT", std::to_string(server.port)},
                                                     {"KILN_CACHE_SECRET", "cluster-secret"}};
  auto with = [&](const fs::path& dir, std::map<std::string, std::string> extra = {}) {
    extra.insert(remote.begin(), remote.end());
    extra["KILN_CACHE_DIR"] = dir.string();
    return extra;
  };
  const Run cold = child({"compile", "3"}, with(a));
  BOOST_TEST_REQUIRE(cold.status == 0, cold.out);
  BOOST_TEST(cold.stat("remote") == "0/1", cold.out);
  // Another machine (an empty local directory) compiles nothing: the remote has it, and the hit
  // is kept locally.
  const Run warm = child({"compile", "3"}, with(b, {{"KILN_ASSERT_NO_COMPILE", "1"}}));
  BOOST_TEST(warm.status == 0, warm.out);
  BOOST_TEST(warm.stat("remote") == "1/0", warm.out);
  BOOST_TEST(warm.stat("disk") == "0/1", warm.out);
  const Run local = child({"compile", "3"}, with(b, {{"KILN_ASSERT_NO_COMPILE", "1"}}));
  BOOST_TEST(local.stat("disk") == "1/0", local.out);
  // A process with another secret refuses the shared entry and compiles.
  const Run foreign = child({"compile", "3"}, with(c, {{"KILN_CACHE_SECRET", "not-the-secret"}}));
  BOOST_TEST(foreign.status == 0, foreign.out);
  BOOST_TEST(foreign.out.find("signature does not verify") != std::string::npos, foreign.out);
  // Redis stopped: the program runs on its local cache, with one warning.
  server.stop();
  fs::remove_all(c);
  const Run down = child({"compile", "3"}, with(c));
  BOOST_TEST(down.status == 0, down.out);
  BOOST_TEST(down.out.find("result ok") != std::string::npos, down.out);
  BOOST_TEST(down.out.find("going on with the local cache (warned once)") != std::string::npos, down.out);
  for (const fs::path& p : {a, b, c}) fs::remove_all(p);
}

// With KILN_CACHE_SECRET (no Redis needed) the disk keeps only what the secret signed: entries
// written before the secret was set, under another secret, or edited are removed and compiled
// again; bundles are signed and only the secret's load.
BOOST_AUTO_TEST_CASE(the_disk_and_bundles_keep_only_what_the_secret_signed) {
  const fs::path dir = temp_dir("signed");
  auto env = [&](const std::string& secret, std::map<std::string, std::string> extra = {}) {
    extra["KILN_CACHE_DIR"] = dir.string();
    if (!secret.empty()) extra["KILN_CACHE_SECRET"] = secret;
    return extra;
  };
  auto entry_files = [&] {
    std::vector<fs::path> v;
    for (const auto& f : fs::directory_iterator(dir))
      if (f.path().extension() == ".kce") v.push_back(f.path());
    return v;
  };
  auto read = [](const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  };
  // Unsigned, written without a secret; with the secret it is removed and compiled again, signed.
  BOOST_TEST_REQUIRE(child({"compile", "4"}, env("")).status == 0);
  BOOST_REQUIRE(entry_files().size() == 1u);
  BOOST_TEST(read(entry_files()[0]).rfind("KILNENTR", 0) == 0u);
  const Run signed_run = child({"compile", "4"}, env("disk-secret"));
  BOOST_TEST(signed_run.status == 0, signed_run.out);
  BOOST_TEST(signed_run.out.find("it is not signed with KILN_CACHE_SECRET") != std::string::npos, signed_run.out);
  BOOST_TEST(signed_run.stat("disk") == "0/1", signed_run.out);
  BOOST_REQUIRE(entry_files().size() == 1u);
  const fs::path entry = entry_files()[0];
  const std::string good = read(entry);
  BOOST_TEST(good.rfind("KSIG1", 0) == 0u);
  // The same secret uses it; a process without a secret reads it too (it trusts its disk).
  const Run warm = child({"compile", "4"}, env("disk-secret", {{"KILN_ASSERT_NO_COMPILE", "1"}}));
  BOOST_TEST(warm.status == 0, warm.out);
  BOOST_TEST(warm.stat("disk") == "1/0", warm.out);
  const Run plain = child({"compile", "4"}, env("", {{"KILN_ASSERT_NO_COMPILE", "1"}}));
  BOOST_TEST(plain.status == 0, plain.out);
  // Another secret, and an edit with a valid entry checksum but no valid signature, are refused.
  const Run other = child({"compile", "4"}, env("other-secret"));
  BOOST_TEST(other.status == 0, other.out);
  BOOST_TEST(other.out.find("it is not signed with KILN_CACHE_SECRET") != std::string::npos, other.out);
  Entry e = decode_entry(good.substr(5 + 32), "test");
  e.description += " (edited)";
  std::ofstream(entry, std::ios::binary | std::ios::trunc) << good.substr(0, 5 + 32) << encode_entry(e);
  const Run edited = child({"compile", "4"}, env("disk-secret", {{"KILN_ASSERT_NO_COMPILE", "1"}}));
  BOOST_TEST(edited.status == 2, edited.out);  // refused, so it would compile: assert_no_compile
  BOOST_TEST(edited.out.find("it is not signed with KILN_CACHE_SECRET") != std::string::npos, edited.out);
  // Bundles: signed under the secret; another secret's or an unsigned one loads nothing.
  const fs::path bundle = dir / "bundle.kcb", unsigned_bundle = dir / "unsigned.kcb";
  BOOST_TEST_REQUIRE(child({"save", bundle.string(), "4"}, env("disk-secret")).status == 0);
  BOOST_TEST(read(bundle).rfind("KSIG1", 0) == 0u);
  BOOST_TEST_REQUIRE(child({"save", unsigned_bundle.string(), "4"}, env("")).status == 0);
  const Run load_ok = child({"load", bundle.string(), "4"}, env("disk-secret"));
  BOOST_TEST(load_ok.status == 0, load_ok.out);
  BOOST_TEST((load_ok.out.find("loaded ") != std::string::npos && load_ok.out.find("loaded 0") == std::string::npos),
             load_ok.out);
  const Run load_other = child({"load", bundle.string(), "4"}, env("other-secret"));
  BOOST_TEST(load_other.status == 2, load_other.out);
  BOOST_TEST(load_other.out.find("cache bundle: not signed with KILN_CACHE_SECRET (signed with another secret, or edited)") !=
                 std::string::npos,
             load_other.out);
  const Run load_unsigned = child({"load", unsigned_bundle.string(), "4"}, env("disk-secret"));
  BOOST_TEST(load_unsigned.status == 2, load_unsigned.out);
  BOOST_TEST(load_unsigned.out.find("it has no signature") != std::string::npos, load_unsigned.out);
  fs::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(eight_processes_share_one_directory_and_one_redis) {
  Server server;
  const fs::path shared = temp_dir("shared");
  const std::map<std::string, std::string> remote = {{"KILN_REMOTE_CACHE", "1"},
                                                     {"KILN_REDIS_HOST", "127.0.0.1"},
                                                     {"KILN_REDIS_PORT", std::to_string(server.port)},
                                                     {"KILN_CACHE_SECRET", "cluster-secret"},
                                                     {"KILN_CACHE_DIR", shared.string()}};
  // Eight processes at once against one directory and one server: each compiles the graph they
  // all share (variant 20) and one of four others (so pairs compile the same graph too).
  std::vector<FILE*> running;
  for (int i = 0; i < 8; ++i) running.push_back(start({"compile", "20", std::to_string(30 + i % 4)}, remote));
  for (FILE* f : running) {
    const Run r = finish(f);
    BOOST_TEST(r.status == 0, r.out);
    BOOST_TEST(r.out.find("result ok") != std::string::npos, r.out);
    // Each graph compiled at most once per process.
    BOOST_TEST((compiles_per_function(r.out) == std::vector<std::string>{"1", "1"}), r.out);
  }
  // No torn entry in the directory or in Redis, and every graph is in both.
  DiskStore disk(shared.string(), uint64_t{1} << 40);
  check_whole(disk, "disk");
  BOOST_TEST(disk.list().size() == 5u);
  RedisOptions o = opts(server.port, "cluster-secret");
  RedisStore store(o);
  check_whole(store, "redis");
  BOOST_TEST(store.list().size() == 5u);
  // Eight more at once, each with an empty directory of its own (other machines) and no
  // compiling allowed: everything comes from Redis, correct.
  std::vector<fs::path> dirs;
  running.clear();
  for (int i = 0; i < 8; ++i) {
    dirs.push_back(temp_dir("machine"));
    auto env = remote;
    env["KILN_CACHE_DIR"] = dirs.back().string();
    env["KILN_ASSERT_NO_COMPILE"] = "1";
    running.push_back(start({"compile", "20", std::to_string(30 + i % 4)}, env));
  }
  for (FILE* f : running) {
    const Run r = finish(f);
    BOOST_TEST(r.status == 0, r.out);
    BOOST_TEST(r.stat("remote") == "1/0", r.out);
  }
  for (const fs::path& p : dirs) fs::remove_all(p);
  fs::remove_all(shared);
}

BOOST_AUTO_TEST_CASE(autotune_choices_and_profiles_travel_through_redis) {
  Server server;
  const fs::path a = temp_dir("tune-a"), b = temp_dir("tune-b");
  auto env = [&](const fs::path& dir) {
    return std::map<std::string, std::string>{{"KILN_REMOTE_CACHE", "1"},
                                              {"KILN_REDIS_HOST", "127.0.0.1"},
                                              {"KILN_REDIS_PORT", std::to_string(server.port)},
                                              {"KILN_CACHE_DIR", dir.string()},
                                              {"KILN_JOB_ID", "redis-job"},
                                              {"KILN_LOGS", "perf_hints"}};
  };
  const Run cold = child({"autotune"}, env(a));
  BOOST_TEST_REQUIRE(cold.status == 0, cold.out);
  BOOST_TEST(cold.out.find("candidates)") != std::string::npos, cold.out);
  // Another machine: the winners come from Redis, nothing is timed.
  const Run warm = child({"autotune"}, env(b));
  BOOST_TEST(warm.status == 0, warm.out);
  BOOST_TEST(warm.out.find("(from the autotune cache)") != std::string::npos, warm.out);
  BOOST_TEST(warm.out.find("candidates)") == std::string::npos, warm.out);
  // The dynamic-shape profile of a job too.
  fs::remove_all(a);
  fs::remove_all(b);
  const Run first = child({"pgo"}, env(a));
  BOOST_TEST(first.stat("compiles") == "2", first.out);
  const Run second = child({"pgo"}, env(b));
  BOOST_TEST(second.stat("compiles") == "1", second.out);
  fs::remove_all(a);
  fs::remove_all(b);
}

BOOST_AUTO_TEST_SUITE_END()
