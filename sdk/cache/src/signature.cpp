// Signatures of what the caches keep outside the process (cache.h, "signatures"): the format,
// the process's signer and a constant-time check. The MAC itself comes from native/cache
// (HMAC-SHA256 through OpenSSL), so this stage stays portable.
#include <mutex>

#include "kiln/cache/cache.h"
#include "kiln/graph/error.h"

namespace kiln::cache {

namespace {
constexpr std::string_view kMagic = "KSIG1";
constexpr size_t kMacBytes = 32;

std::mutex g_signer_mu;
std::optional<Signer> g_signer;

std::string mac_of(std::string_view payload, const Signer& s) {
  std::string mac = s.mac(payload);
  KILN_CHECK(mac.size() == kMacBytes, "cache signatures: ", s.name, "'s MAC gave ", mac.size(), " bytes, not ", kMacBytes);
  return mac;
}
}  // namespace

void set_signer(std::optional<Signer> s) {
  std::lock_guard lock(g_signer_mu);
  g_signer = std::move(s);
}

std::optional<Signer> signer() {
  std::lock_guard lock(g_signer_mu);
  return g_signer;
}

std::string sign(std::string_view payload, const Signer& s) {
  std::string out(kMagic);
  out += mac_of(payload, s);
  out.append(payload.data(), payload.size());
  return out;
}

std::optional<std::string> verify(std::string_view bytes, const Signer& s) {
  if (bytes.size() < kMagic.size() + kMacBytes || bytes.substr(0, kMagic.size()) != kMagic) return std::nullopt;
  const std::string_view mac = bytes.substr(kMagic.size(), kMacBytes);
  const std::string_view payload = bytes.substr(kMagic.size() + kMacBytes);
  const std::string want = mac_of(payload, s);
  if (!equal_in_constant_time(want, mac)) return std::nullopt;
  return std::string(payload);
}

bool equal_in_constant_time(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

std::string_view strip_signature(std::string_view bytes) {
  if (bytes.size() >= kMagic.size() + kMacBytes && bytes.substr(0, kMagic.size()) == kMagic)
    return bytes.substr(kMagic.size() + kMacBytes);
  return bytes;
}

}  // namespace kiln::cache
