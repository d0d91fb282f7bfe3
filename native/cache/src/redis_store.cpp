// The Redis remote store (hiredis, synchronous, one connection per store guarded by a mutex).
#include "kiln/cache/redis_store.h"

#include <hiredis/hiredis.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <cstdlib>
#include <cstring>
#include <map>

#include "kiln/config/config.h"
#include "kiln/config/log.h"
#include "kiln/graph/error.h"

namespace kiln::cache {

namespace {

constexpr std::chrono::seconds kBackoff{10};

std::string redis_key(const std::string& key) { return "kiln:entry:" + key; }

struct Reply {
  redisReply* r = nullptr;
  ~Reply() {
    if (r) freeReplyObject(r);
  }
};

}  // namespace

Signer hmac_signer(const std::string& secret) {
  return Signer{"KILN_CACHE_SECRET", [secret](std::string_view bytes) {
                  unsigned char mac[EVP_MAX_MD_SIZE];
                  unsigned int len = 0;
                  if (!HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
                            reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(), mac, &len))
                    fail("cache signatures: HMAC-SHA256 failed");
                  return std::string(reinterpret_cast<const char*>(mac), len);
                }};
}

std::string sign_entry(std::string_view bytes, const std::string& secret) { return sign(bytes, hmac_signer(secret)); }

std::optional<std::string> unsign_entry(std::string_view s, const std::string& secret) {
  return verify(s, hmac_signer(secret));
}

void install_secret_signer() {
  const char* secret = std::getenv("KILN_CACHE_SECRET");
  if (secret && *secret) set_signer(hmac_signer(secret));
  else set_signer(std::nullopt);
}

RedisStore::RedisStore(RedisOptions options) : o_(std::move(options)) {
  // OpenSSL initialises itself on first use. Do that here, on the caller's thread: puts run on
  // the background writer, and a first HMAC there while the process exits raced OpenSSL's own
  // exit-time cleanup (a crash seen in the tests). Initialised now, its cleanup is also
  // registered before the writer's flush at exit, so it runs after it.
  if (!o_.secret.empty()) (void)sign_entry("", o_.secret);
}

RedisStore::~RedisStore() {
  if (c_) redisFree(c_);
}

void RedisStore::failed_locked(const std::string& why) {
  if (c_) {
    redisFree(c_);
    c_ = nullptr;
  }
  retry_after_ = std::chrono::steady_clock::now() + kBackoff;
  const std::string msg = "remote cache: Redis at " + o_.host + ":" + std::to_string(o_.port) + ": " + why +
                          "; going on with the local cache";
  if (!warned_) {
    warned_ = true;
    logs::warn(msg + " (warned once)");
  } else {
    KILN_LOG(cache, msg);
  }
}

bool RedisStore::connect_locked() {
  if (c_) return true;
  if (std::chrono::steady_clock::now() < retry_after_) return false;
  const timeval tv{o_.timeout_ms / 1000, (o_.timeout_ms % 1000) * 1000};
  c_ = redisConnectWithTimeout(o_.host.c_str(), o_.port, tv);
  if (!c_) {
    failed_locked("cannot allocate a connection");
    return false;
  }
  if (c_->err) {
    failed_locked(std::string("cannot connect: ") + c_->errstr);
    return false;
  }
  redisSetTimeout(c_, tv);
  if (!o_.password.empty()) {
    Reply auth{static_cast<redisReply*>(redisCommand(c_, "AUTH %b", o_.password.data(), o_.password.size()))};
    if (!auth.r) {
      failed_locked(std::string("AUTH failed: ") + c_->errstr);
      return false;
    }
    if (auth.r->type == REDIS_REPLY_ERROR) {
      failed_locked(std::string("AUTH refused: ") + auth.r->str);
      return false;
    }
  }
  return true;
}

std::optional<std::string> RedisStore::get(const std::string& key) {
  KILN_CHECK(is_valid_key(key), "remote cache: '", key, "' is not a cache key");
  std::lock_guard lock(mu_);
  if (!connect_locked()) return std::nullopt;
  const std::string k = redis_key(key);
  Reply r{static_cast<redisReply*>(redisCommand(c_, "GET %b", k.data(), k.size()))};
  if (!r.r) {
    failed_locked(std::string("GET failed: ") + c_->errstr);
    return std::nullopt;
  }
  if (r.r->type == REDIS_REPLY_NIL) return std::nullopt;
  if (r.r->type == REDIS_REPLY_ERROR) {
    failed_locked(std::string("GET refused: ") + r.r->str);
    return std::nullopt;
  }
  if (r.r->type != REDIS_REPLY_STRING) return std::nullopt;
  const std::string_view value(r.r->str, r.r->len);
  // Without a secret the server is trusted like the code itself; a signed entry is read as is.
  if (o_.secret.empty()) return std::string(strip_signature(value));
  std::optional<std::string> payload = unsign_entry(value, o_.secret);
  if (!payload) {
    ++refused_;
    const std::string msg = "remote cache: refused entry " + key +
                            ": its HMAC-SHA256 signature does not verify with KILN_CACHE_SECRET (unsigned, "
                            "signed with another secret, or tampered with)";
    logs::warn(msg);
    return std::nullopt;
  }
  return payload;
}

void RedisStore::put(const std::string& key, std::string_view bytes) {
  KILN_CHECK(is_valid_key(key), "remote cache: '", key, "' is not a cache key");
  if (bytes.size() > o_.max_entry_bytes) {
    KILN_LOG(cache, "remote cache: not writing ", key, ": ", bytes.size(), " bytes is over the bound of ",
             o_.max_entry_bytes);
    return;
  }
  const std::string value = o_.secret.empty() ? std::string(bytes) : sign_entry(bytes, o_.secret);
  std::lock_guard lock(mu_);
  if (!connect_locked()) return;
  const std::string k = redis_key(key);
  Reply r{static_cast<redisReply*>(redisCommand(c_, "SET %b %b", k.data(), k.size(), value.data(), value.size()))};
  if (!r.r) failed_locked(std::string("SET failed: ") + c_->errstr);
  else if (r.r->type == REDIS_REPLY_ERROR) failed_locked(std::string("SET refused: ") + r.r->str);
}

bool RedisStore::remove(const std::string& key) {
  KILN_CHECK(is_valid_key(key), "remote cache: '", key, "' is not a cache key");
  std::lock_guard lock(mu_);
  if (!connect_locked()) return false;
  const std::string k = redis_key(key);
  Reply r{static_cast<redisReply*>(redisCommand(c_, "DEL %b", k.data(), k.size()))};
  if (!r.r) {
    failed_locked(std::string("DEL failed: ") + c_->errstr);
    return false;
  }
  return r.r->type == REDIS_REPLY_INTEGER && r.r->integer > 0;
}

std::vector<StoredInfo> RedisStore::list() {
  std::vector<StoredInfo> out;
  std::lock_guard lock(mu_);
  if (!connect_locked()) return out;
  std::string cursor = "0";
  do {
    Reply r{static_cast<redisReply*>(redisCommand(c_, "SCAN %s MATCH kiln:entry:* COUNT 1000", cursor.c_str()))};
    if (!r.r || r.r->type != REDIS_REPLY_ARRAY || r.r->elements != 2) {
      failed_locked("SCAN failed");
      return out;
    }
    cursor.assign(r.r->element[0]->str, r.r->element[0]->len);
    const redisReply* keys = r.r->element[1];
    for (size_t i = 0; i < keys->elements; ++i) {
      const std::string k(keys->element[i]->str, keys->element[i]->len);
      const std::string key = k.substr(std::strlen("kiln:entry:"));
      if (!is_valid_key(key)) continue;
      Reply len{static_cast<redisReply*>(redisCommand(c_, "STRLEN %b", k.data(), k.size()))};
      out.push_back(StoredInfo{key, len.r && len.r->type == REDIS_REPLY_INTEGER ? static_cast<uint64_t>(len.r->integer) : 0, 0});
    }
  } while (cursor != "0");
  return out;
}

void install_redis_remote() {
  set_remote_factory([]() -> std::shared_ptr<Store> {
    RedisOptions o;
    o.host = config::get<std::string>("cache.redis_host");
    o.port = static_cast<int>(config::get<int64_t>("cache.redis_port"));
    o.password = config::get<std::string>("cache.redis_password");
    o.timeout_ms = static_cast<int>(config::get<int64_t>("cache.redis_timeout_ms"));
    if (const char* s = std::getenv("KILN_CACHE_SECRET")) o.secret = s;
    const std::string id = o.host + "\n" + std::to_string(o.port) + "\n" + o.password + "\n" +
                           std::to_string(o.timeout_ms) + "\n" + o.secret;
    static std::mutex mu;
    static auto* stores = new std::map<std::string, std::shared_ptr<RedisStore>>;  // never destroyed
    std::lock_guard lock(mu);
    auto& s = (*stores)[id];
    if (!s) s = std::make_shared<RedisStore>(o);
    return s;
  });
}

}  // namespace kiln::cache
