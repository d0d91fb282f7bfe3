// native/cache: the Redis remote store of the compile caches (hiredis), and HMAC-SHA256 signing
// (OpenSSL) of what every layer outside the process keeps when a secret is set. docs/cache.md,
// "The remote cache" and "A shared secret".
//
// Takes: where the server is and how long to wait (RedisOptions, or the config options
//   cache.redis_host, cache.redis_port, cache.redis_password, cache.redis_timeout_ms and the
//   environment variable KILN_CACHE_SECRET).
// Gives: a cache::Store named "remote" whose entries are the Redis strings kiln:entry:<key>.
//   get/put/remove never throw for a server that is down, slow, full or refuses the password:
//   the first such failure is one warning (then the store stays quiet, and skips the server for
//   10 seconds after each failure); an entry whose signature does not verify is refused, logged
//   and counted as a miss.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "kiln/cache/cache.h"

struct redisContext;

namespace kiln::cache {

struct RedisOptions {
  std::string host = "localhost";
  int port = 6379;
  std::string password;         // AUTH when not empty
  int timeout_ms = 200;         // connect and each command
  std::string secret;           // HMAC-SHA256 key; empty: entries unsigned (trust the server)
  uint64_t max_entry_bytes = uint64_t{256} << 20;  // larger entries are not written
};

class RedisStore : public Store {
 public:
  explicit RedisStore(RedisOptions options);
  ~RedisStore() override;
  std::string name() const override { return "remote"; }
  std::optional<std::string> get(const std::string& key) override;
  void put(const std::string& key, std::string_view bytes) override;
  bool remove(const std::string& key) override;
  std::vector<StoredInfo> list() override;
  int64_t refused() const { return refused_; }  // entries whose signature failed

 private:
  bool connect_locked();                      // mu_ held; false: unavailable
  void failed_locked(const std::string& why);  // drop the connection, warn once, back off
  RedisOptions o_;
  std::mutex mu_;
  redisContext* c_ = nullptr;
  std::chrono::steady_clock::time_point retry_after_{};
  bool warned_ = false;
  int64_t refused_ = 0;
};

// The signer of a secret: HMAC-SHA256 keyed by it, in sdk/cache's signature format ("KSIG1" +
// MAC + bytes). sign_entry/unsign_entry sign and check with it (nullopt when the signature is
// missing or wrong).
Signer hmac_signer(const std::string& secret);
std::string sign_entry(std::string_view bytes, const std::string& secret);
std::optional<std::string> unsign_entry(std::string_view signed_bytes, const std::string& secret);
// Sets the process's signer (cache::set_signer) from KILN_CACHE_SECRET, or clears it when that
// is unset or empty: then the disk layer and bundles keep only what the secret signed.
void install_secret_signer();

// Makes the layered cache use a RedisStore built from the configuration (one per distinct
// configuration, kept for the process).
void install_redis_remote();

}  // namespace kiln::cache
