// kiln cache ls|verify|stats|clear|export FILE|import FILE|bench: the on-disk compile cache
// (docs/cache.md).
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <map>
#include <sstream>

#include "../bench/suite.h"
#include "commands.h"
#include "kiln/graph/files.h"
#include "kiln/cache/cache.h"
#include "kiln/caches.h"
#include "kiln/config/config.h"
#include "kiln/graph/error.h"

namespace kiln::cli {

namespace {

const char* kDetails =
    "subcommands:\n"
    "  ls             every entry: key, size, last use, what it holds; entries that would not load as\n"
    "                 a hit (damaged, stripped of their objects) say why, as verify would, and stay;\n"
    "                 --remote: those of the remote cache (Redis) instead of the disk\n"
    "  verify         checks every entry as a cache hit would use it: signature (KILN_CACHE_SECRET),\n"
    "                 checksum, plan and artifacts loaded by its target (nothing runs); removes those\n"
    "                 that fail (the next compile writes them again), says why it skips any (another\n"
    "                 Kiln version, device, or a target missing here); exit status 1 when it removed any\n"
    "  stats          the directory, entry count, bytes against the size bound\n"
    "  clear          removes every entry\n"
    "  export FILE    writes this host's entries as one bundle (kiln::load_cache_artifacts reads it)\n"
    "  import FILE    fills the cache from a bundle; one of another Kiln version or device loads\n"
    "                 nothing and says why (exit status 1)\n"
    "  bench          time to the first result of each suite workload in a fresh process, with an\n"
    "                 empty cache directory (cold) and then the one the cold run filled (warm); the\n"
    "                 warm run is also checked to compile nothing (assert_no_compile); with\n"
    "                 redis-server installed, also from Redis alone (an empty directory, the\n"
    "                 bench's own server holding what the cold run wrote); --device cuda or vulkan\n"
    "                 puts the inputs there (the cuda and vulkan plan caches)\n"
    "The directory is cache_dir (KILN_CACHE_DIR), else $XDG_CACHE_HOME/kiln, else ~/.cache/kiln.";

std::string read_file(const std::string& path) {
  return read_regular_file(path, "cache bundle");
}

std::string when(int64_t unix_seconds) {
  const std::time_t t = static_cast<std::time_t>(unix_seconds);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm);
  return buf;
}

// Runs `argv` with extra environment variables; returns its exit status and stdout.
int run_child(const std::vector<std::string>& argv, const std::vector<std::string>& env, std::string& out) {
  int fds[2];
  KILN_CHECK(::pipe(fds) == 0, "cache bench: cannot make a pipe");
  const pid_t pid = ::fork();
  KILN_CHECK(pid >= 0, "cache bench: cannot fork");
  if (pid == 0) {
    ::dup2(fds[1], 1);
    ::dup2(fds[1], 2);
    ::close(fds[0]);
    ::close(fds[1]);
    for (const std::string& e : env) ::putenv(const_cast<char*>(e.c_str()));
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  ::close(fds[1]);
  char buf[4096];
  ssize_t n;
  while ((n = ::read(fds[0], buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

// Whether `line` is a "<target> plan KEY: <what> in X ms" line of KILN_LOGS=cache (cpu, cuda
// and vulkan plans); `at` is where ": <what> in " starts.
bool plan_line(const std::string& line, const std::string& what, size_t& at) {
  at = line.find(": " + what + " in ");
  if (at == std::string::npos) return false;
  for (const char* target : {"cpu", "cuda", "vulkan"})
    if (line.rfind(std::string("[kiln:cache] ") + target + " plan ", 0) == 0) return true;
  return false;
}

// Adds up the "<target> plan KEY: <what> in X ms" lines of KILN_LOGS=cache in `out`.
double logged_ms(const std::string& out, const std::string& what) {
  double total = 0;
  std::istringstream in(out);
  std::string line;
  size_t at = 0;
  while (std::getline(in, line))
    if (plan_line(line, what, at)) total += std::atof(line.c_str() + at + what.size() + 6);
  return total;
}

// A redis-server of the bench's own on a free loopback port, for the warm-remote column; stopped
// by the destructor. port == 0: none (redis-server is not installed or did not start).
struct OwnRedis {
  pid_t pid = 0;
  int port = 0;
  OwnRedis() {
    // The first redis-server on PATH (a machine without the package may carry one), else the
    // package's.
    std::string exe;
    std::vector<std::string> dirs = split_list(std::getenv("PATH") ? std::getenv("PATH") : "", ':');
    dirs.insert(dirs.end(), {"/usr/bin", "/usr/local/bin"});
    for (const std::string& d : dirs)
      if (!d.empty() && exe.empty() && ::access((d + "/redis-server").c_str(), X_OK) == 0) exe = d + "/redis-server";
    if (exe.empty()) return;
    const int s = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
        ::getsockname(s, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
      ::close(s);
      return;
    }
    ::close(s);
    const int p = ntohs(a.sin_port);
    pid = ::fork();
    KILN_CHECK(pid >= 0, "cache bench: cannot fork");
    if (pid == 0) {
      const int null = ::open("/dev/null", O_WRONLY);
      ::dup2(null, 1);
      ::dup2(null, 2);
      const std::string port = std::to_string(p);
      ::execl(exe.c_str(), exe.c_str(), "--port", port.c_str(), "--bind", "127.0.0.1", "--save", "", "--appendonly",
              "no", static_cast<char*>(nullptr));
      ::_exit(127);
    }
    for (int i = 0; i < 300 && !port; ++i) {  // up to 3 s for it to listen
      const int c = ::socket(AF_INET, SOCK_STREAM, 0);
      a.sin_port = htons(static_cast<uint16_t>(p));
      if (::connect(c, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) port = p;
      ::close(c);
      if (!port) ::usleep(10000);
    }
  }
  // FLUSHALL, spoken directly (redis-cli need not be installed beside the server); throws when
  // the server does not answer +OK, since a cold run against a filled Redis would be a hit.
  void flush() const {
    const int c = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(static_cast<uint16_t>(port));
    const char command[] = "*1\r\n$8\r\nFLUSHALL\r\n";
    char reply[16] = {};
    const bool ok = ::connect(c, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
                    ::write(c, command, sizeof command - 1) == static_cast<ssize_t>(sizeof command - 1) &&
                    ::read(c, reply, sizeof reply - 1) > 0 && std::string(reply).rfind("+OK", 0) == 0;
    ::close(c);
    KILN_CHECK(ok, "cache bench: the bench's redis-server on port ", port, " did not flush (reply '", reply, "')");
  }
  ~OwnRedis() {
    if (!pid) return;
    ::kill(pid, SIGTERM);
    int st = 0;
    ::waitpid(pid, &st, 0);
  }
};

// How many "<target> plan KEY: <what> in" lines of KILN_LOGS=cache `out` holds (graphs and eager kernels).
int logged_count(const std::string& out, const std::string& what) {
  int n = 0;
  std::istringstream in(out);
  std::string line;
  size_t at = 0;
  while (std::getline(in, line)) n += plan_line(line, what, at) ? 1 : 0;
  return n;
}

// The device a --device name means; a target this build or host lacks is a kiln::Error.
Device bench_device(const std::string& name) {
  if (name == "cpu") return Device::cpu();
  if (name == "cuda") return Device::cuda(0);
  if (name == "vulkan") return Device::vulkan(0);
  fail("kiln cache bench: --device must be cpu, cuda or vulkan, not '", name, "'");
}

// The child of `kiln cache bench`: one workload's first call, timed from before the compiled
// function exists to its result; prints "first_ms <ms> output <hash> run_ms <ms>".
int bench_one(const std::string& name, bool small, const std::string& device_name) {
  const Device device = bench_device(device_name);
  for (const bench::Workload& w : bench::suite()) {
    if (w.name != name) continue;
    bench::Tensors inputs = w.make_inputs(small);
    for (Tensor& t : inputs) t = t.to(device);
    // CPU time of the whole process (every thread) over the same span: on a loaded machine the
    // wall time also holds the time other processes had the cores.
    auto cpu_ms = [] {
      rusage u{};
      ::getrusage(RUSAGE_SELF, &u);
      return (u.ru_utime.tv_sec + u.ru_stime.tv_sec) * 1e3 + (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e3;
    };
    const double c0 = cpu_ms();
    const auto t0 = std::chrono::steady_clock::now();
    auto fn = w.compiled(CompileOptions{});
    bench::Tensors got = fn(inputs);
    for (Tensor& t : got) t = t.to(Device::cpu());  // on a GPU: until the result is there
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    const double cpu = cpu_ms() - c0;
    // What a call costs once compiled (the fastest of 3 more), so that first - run is the
    // compile (cold) or the cache lookup and link (warm).
    double run_ms = 1e300;
    for (int i = 0; i < 3; ++i) {
      const auto t1 = std::chrono::steady_clock::now();
      for (const Tensor& t : fn(inputs)) t.to(Device::cpu());
      run_ms = std::min(run_ms, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t1).count());
    }
    std::string bytes;
    for (const Tensor& t : got) {
      const std::vector<float> v = t.contiguous().to(DType::f32).to_vector<float>();
      bytes.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
    }
    std::cout << "first_ms " << ms << " output " << cache::hash_hex(bytes) << " run_ms " << run_ms << " cpu_ms " << cpu
              << "\n";
    return 0;
  }
  fail("cache bench: no workload '", name, "'");
}

int bench(const ParsedArgs& a) {
  const bool small = a.has("--small");
  const int repeat = a.has("--repeat") ? std::stoi(a.get("--repeat")) : 3;
  KILN_CHECK(repeat >= 1, "kiln cache bench: --repeat must be at least 1, but got ", repeat);
  const auto only = a.has("--only") ? split_list(a.get("--only")) : std::vector<std::string>{};
  const std::string device = a.has("--device") ? a.get("--device") : "cpu";
  bench_device(device);
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  const std::filesystem::path root =
      std::filesystem::temp_directory_path() / ("kiln-cache-bench-" + std::to_string(::getpid()));
  // The warm-remote column: a Redis server of our own (flushed per workload, so each remote
  // run finds only what that workload's cold run wrote).
  OwnRedis redis;
  std::cout << "ms; cold/warm/remote: time to the first result in a fresh process (trace, passes, compile or\n"
               "cache hit, one run on fresh memory) with an empty cache, the cache directory the cold run\n"
               "filled, and an empty directory with Redis holding what the cold run wrote (remote only);\n"
               "graphs: graphs and eager kernels the warm process took from the cache; cpu c/w/r: CPU time of\n"
               "the process (all threads) over the cold/warm/remote first result; run: a later call;\n"
               "compile: the cold process's compiles; hit/rhit: the cache hits (key, read,\n"
               "decode, check, link) of the warm and the remote process, all graphs; ratio: compile / hit;\n"
               "each the fastest of " << repeat << " fresh processes\n";
  std::cout << "device: " << device << "\n";
  if (!redis.port) std::cout << "(no redis-server installed: no remote column)\n";
  std::cout << std::left << std::setw(18) << "workload" << std::right << std::setw(7) << "graphs" << std::setw(9) << "cold" << std::setw(8)
            << "warm" << std::setw(8) << "remote" << std::setw(14) << "cpu c/w/r" << std::setw(8) << "run" << std::setw(9) << "compile"
            << std::setw(7) << "hit" << std::setw(7) << "rhit" << std::setw(8) << "ratio"
            << "  warm runs compile nothing\n";
  int status = 0;
  for (const bench::Workload& w : bench::suite()) {
    if (!only.empty() && std::find(only.begin(), only.end(), w.name) == only.end()) continue;
    const std::filesystem::path dir = root / w.name, remote_dir = root / (w.name + ".remote");
    std::filesystem::remove_all(dir);
    std::filesystem::remove_all(remote_dir);
    std::vector<std::string> argv = {self, "cache", "bench-one", w.name};
    if (small) argv.push_back("--small");
    argv.insert(argv.end(), {"--device", device});
    std::vector<std::string> remote_env;
    if (redis.port)
      remote_env = {"KILN_REMOTE_CACHE=1", "KILN_REDIS_HOST=127.0.0.1", "KILN_REDIS_PORT=" + std::to_string(redis.port)};
    std::vector<std::string> cold_env = {"KILN_CACHE_DIR=" + dir.string(), "KILN_LOGS=cache", "KILN_LOG_FILE="};
    cold_env.insert(cold_env.end(), remote_env.begin(), remote_env.end());
    const std::vector<std::string> warm_env = {"KILN_CACHE_DIR=" + dir.string(), "KILN_ASSERT_NO_COMPILE=1", "KILN_LOGS=cache",
                                               "KILN_LOG_FILE="};
    std::vector<std::string> rwarm_env = {"KILN_CACHE_DIR=" + remote_dir.string(), "KILN_ASSERT_NO_COMPILE=1",
                                          "KILN_LOGS=cache", "KILN_LOG_FILE="};
    rwarm_env.insert(rwarm_env.end(), remote_env.begin(), remote_env.end());
    // Each column is the fastest of `repeat` fresh processes (a loaded machine preempts some
    // runs for a scheduler slice or more); every run is checked. A cold run starts from an empty
    // directory and an empty Redis; the last one leaves them filled for the warm runs.
    struct Col {
      int rc = 0;
      double ms = 1e300, run = 1e300, logged = 1e300, cpu = 1e300;
      int count = 0;  // graphs (and eager kernels) compiled or hit
      std::string hash;
      bool same = true;
    };
    auto measure = [&](const std::vector<std::string>& env, const std::string& logged_what, bool cold) {
      Col c;
      for (int i = 0; i < repeat; ++i) {
        if (cold) {
          std::filesystem::remove_all(dir);
          if (redis.port) redis.flush();
        }
        std::string out, word, hash;
        const int rc = run_child(argv, env, out);
        double ms = 0, run = 0, cpu = 0;
        const size_t at = out.find("first_ms ");
        if (at != std::string::npos)
          std::istringstream(out.substr(at)) >> word >> ms >> word >> hash >> word >> run >> word >> cpu;
        if (rc != 0 || hash.empty()) {
          c.rc = rc != 0 ? rc : 1;
          break;
        }
        if (!c.hash.empty() && hash != c.hash) c.same = false;
        c.hash = hash;
        c.ms = std::min(c.ms, ms);
        c.run = std::min(c.run, run);
        c.cpu = std::min(c.cpu, cpu);
        // Measured inside the process (KILN_LOGS=cache): the compiles of a cold run, the cache
        // hits (key, read, decode, check, link) of a warm one, all its graphs together.
        c.logged = std::min(c.logged, logged_ms(out, logged_what));
        c.count = logged_count(out, logged_what);
      }
      return c;
    };
    const Col cold = measure(cold_env, "compiled", true);
    const Col warm = cold.rc == 0 ? measure(warm_env, "cache hit", false) : Col{};
    const Col rwarm = cold.rc == 0 && redis.port ? measure(rwarm_env, "cache hit", false) : Col{};
    const int cold_rc = cold.rc, warm_rc = warm.rc, rwarm_rc = rwarm.rc;
    const std::string &cold_hash = cold.hash, &warm_hash = warm.hash, &rwarm_hash = rwarm.hash;
    const double cold_ms = cold.ms, warm_ms = warm.ms, rwarm_ms = rwarm.ms;
    const double run = std::min(cold.run, warm.run);
    const double compile = cold.logged, hit = warm.logged, rhit = rwarm.logged;
    std::cout << std::left << std::setw(18) << w.name << std::right << std::fixed << std::setprecision(1)
              << std::setw(7) << warm.count << std::setw(9) << cold_ms << std::setw(8) << warm_ms << std::setw(8);
    if (redis.port) std::cout << rwarm_ms;
    else std::cout << "-";
    {
      std::ostringstream c;
      c << std::fixed << std::setprecision(0) << cold.cpu << "/" << warm.cpu << "/";
      if (redis.port) c << rwarm.cpu;
      else c << "-";
      std::cout << std::setw(14) << c.str();
    }
    std::cout << std::setw(8) << run << std::setw(9) << compile << std::setw(7) << hit << std::setw(7);
    if (redis.port) std::cout << rhit;
    else std::cout << "-";
    std::cout << std::setw(7) << (hit > 0 ? compile / hit : 0) << "x  ";
    if (cold_rc != 0 || cold_hash.empty()) {
      std::cout << "cold run failed (status " << cold_rc << ")\n";
      status = 1;
    } else if (warm_rc != 0 || warm_hash.empty()) {
      std::cout << "NO: the warm run failed (status " << warm_rc << "; it compiled, or broke)\n";
      status = 1;
    } else if (redis.port && (rwarm_rc != 0 || rwarm_hash.empty())) {
      std::cout << "NO: the remote-only run failed (status " << rwarm_rc << "; it compiled, or broke)\n";
      status = 1;
    } else if (warm_hash != cold_hash || (redis.port && rwarm_hash != cold_hash) || !cold.same || !warm.same ||
               !rwarm.same) {
      std::cout << "NO: warm and cold results differ\n";
      status = 1;
    } else {
      std::cout << "yes, same result\n";
    }
    std::cout.flush();  // a row per workload as it finishes
  }
  std::filesystem::remove_all(root);
  return status;
}

}  // namespace

const CommandSpec& cache_spec() {
  static const CommandSpec spec{
      "cache", "SUBCOMMAND [FILE]",
      "Lists, measures, clears, exports and imports the on-disk compile cache.",
      kDetails,
      {{"--small", "", "bench: the suite's small sizes"},
       {"--only", "A,B", "bench: only these workloads"},
       {"--repeat", "N", "bench: fresh processes per column, the fastest kept (default 3)"},
       {"--device", "DEVICE", "bench: where the inputs live: cpu (default), cuda or vulkan"},
       {"--remote", "", "ls: the remote cache (Redis, KILN_REMOTE_CACHE=1) instead of the disk"}}};
  return spec;
}

int cmd_cache(std::span<char* const> args) {
  const CommandSpec& spec = cache_spec();
  if (args.empty()) throw UsageError("kiln cache: give a subcommand (ls, verify, stats, clear, export FILE, import FILE, bench)\n" + command_help(spec));
  const std::string sub = args[0];
  if (sub == "--help" || sub == "-h") {
    std::cout << command_help(spec);
    return 0;
  }
  // The subcommand's own arguments: at most one positional (FILE) and the flags.
  std::vector<std::string> positional;
  std::vector<char*> flags;
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string s = args[i];
    if (s.rfind("--", 0) == 0) {
      flags.push_back(args[i]);
      if ((s == "--only" || s == "--repeat" || s == "--device") && i + 1 < args.size()) flags.push_back(args[++i]);
    } else {
      positional.push_back(s);
    }
  }
  CommandSpec flag_spec = spec;
  flag_spec.positional.clear();
  const ParsedArgs a = parse_args(flag_spec, std::span<char* const>(flags.data(), flags.size()));
  if (a.help) {
    std::cout << command_help(spec);
    return 0;
  }
  const bool takes_file = sub == "export" || sub == "import";
  const bool takes_name = sub == "bench-one";
  if ((takes_file || takes_name) != (positional.size() == 1) || positional.size() > 1)
    throw UsageError("kiln cache " + sub + (takes_file ? ": give one FILE" : ": takes no FILE"));

  if (sub == "bench-one") return bench_one(positional[0], a.has("--small"), a.has("--device") ? a.get("--device") : "cpu");
  if (sub == "bench") return bench(a);

  // The layers as a compile sets them up: the signer of KILN_CACHE_SECRET, the remote store.
  (void)kiln::remote_cache_store();
  cache::DiskStore disk = cache::disk_store();
  if (sub == "verify") {
    size_t counts[3] = {0, 0, 0};
    for (const kiln::CacheEntryCheck& c : kiln::verify_disk_cache()) {
      ++counts[c.verdict];
      const char* verdict = c.verdict == kiln::CacheEntryCheck::ok ? "ok" : c.verdict == kiln::CacheEntryCheck::removed ? "REMOVED" : "skipped";
      std::cout << c.key << "  " << verdict << ": " << c.detail;
      if (!c.description.empty()) std::cout << "  (" << c.description << ")";
      std::cout << "\n";
    }
    std::cout << counts[0] << " ok, " << counts[1] << " removed, " << counts[2] << " skipped in " << disk.dir() << "\n";
    return counts[1] ? 1 : 0;
  }
  if (sub == "ls") {
    // The disk, or with --remote the remote cache (Redis keeps no last-use time: "-").
    std::shared_ptr<cache::Store> remote;
    if (a.has("--remote")) {
      remote = kiln::remote_cache_store();
      KILN_CHECK(remote, "kiln cache ls --remote: the remote cache is off (set KILN_REMOTE_CACHE=1, and "
                         "KILN_REDIS_HOST / KILN_REDIS_PORT; a build without Redis has none)");
    }
    cache::Store& store = remote ? *remote : static_cast<cache::Store&>(disk);
    // Disk entries are loaded as a hit would load them (verify's check, removing nothing): a
    // checksum alone does not show an entry stripped of its objects, nor one its target refuses.
    std::map<std::string, kiln::CacheEntryCheck> checks;
    if (!remote)
      for (kiln::CacheEntryCheck& c : kiln::verify_disk_cache(/*remove_failed=*/false)) checks[c.key] = std::move(c);
    for (const cache::StoredInfo& i : store.list()) {
      std::string what;
      if (auto c = checks.find(i.key); c != checks.end()) {
        what = c->second.verdict == kiln::CacheEntryCheck::removed
                   ? "damaged: " + c->second.detail + " (kiln cache verify removes it)"
                   : c->second.description.empty() ? c->second.detail : c->second.description;
      } else try {
        const std::optional<std::string> bytes = store.get(i.key);
        const std::string where = remote ? "remote entry " + i.key : disk.path_of(i.key);
        what = bytes ? cache::decode_entry(*bytes, where).description : "(removed meanwhile, or refused)";
      } catch (const Error& e) {
        what = std::string("damaged: ") + e.what();
      }
      const std::string used = remote ? "-" : when(i.last_used_unix);
      std::cout << i.key << "  " << std::setw(9) << i.bytes << "  " << std::left << std::setw(19) << used << std::right
                << "  " << what << "\n";
    }
    return 0;
  }
  if (sub == "stats") {
    const auto entries = disk.list();
    uint64_t total = 0;
    for (const auto& i : entries) total += i.bytes;
    std::cout << "directory: " << disk.dir() << "\n"
              << "entries: " << entries.size() << "\n"
              << "bytes: " << total << " of " << (config::get<int64_t>("cache.size_limit_mb") << 20)
              << " (cache.size_limit_mb = " << config::get<int64_t>("cache.size_limit_mb") << ")\n";
    if (!entries.empty())
      std::cout << "last used: " << when(entries.front().last_used_unix) << " (newest), "
                << when(entries.back().last_used_unix) << " (oldest)\n";
    std::cout << "device: " << kiln::cache_device() << "\n";
    return 0;
  }
  if (sub == "clear") {
    const size_t n = disk.clear();
    std::cout << "removed " << n << " entr" << (n == 1 ? "y" : "ies") << " from " << disk.dir() << "\n";
    return 0;
  }
  if (sub == "export") {
    // Every readable entry into this process's artifacts (damaged ones are deleted), then the bundle.
    size_t n = 0;
    for (const cache::StoredInfo& i : disk.list())
      if (cache::lookup(i.key, {})) ++n;
    const std::string bundle = kiln::save_cache_artifacts();
    std::ofstream out(positional[0], std::ios::binary);
    out << bundle;
    out.close();
    KILN_CHECK(out.good(), "cache export: cannot write ", positional[0]);
    std::cout << "exported " << n << " entries (those of this device: " << kiln::cache_device().substr(0, 40)
              << "...) to " << positional[0] << ", " << bundle.size() << " bytes\n";
    return 0;
  }
  if (sub == "import") {
    const kiln::CacheLoadResult r = kiln::load_cache_artifacts(read_file(positional[0]));
    std::cout << "imported " << r.loaded << " entries into " << disk.dir();
    if (!r.reason.empty()) std::cout << "; " << r.reason;
    std::cout << "\n";
    return r.loaded == 0 && !r.reason.empty() ? 1 : 0;
  }
  throw UsageError("kiln cache: unknown subcommand '" + sub + "' (ls, verify, stats, clear, export FILE, import FILE, bench)");
}

}  // namespace kiln::cli
