#include "base64.h"

#include <array>
#include <cstdint>

namespace kiln::json_values {

namespace {
constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

constexpr std::array<int8_t, 256> make_reverse() {
  std::array<int8_t, 256> r{};
  for (auto& v : r) v = -1;
  for (int i = 0; i < 64; ++i) r[static_cast<unsigned char>(kAlphabet[i])] = static_cast<int8_t>(i);
  return r;
}
constexpr std::array<int8_t, 256> kReverse = make_reverse();
}  // namespace

std::string base64_encode(std::span<const std::byte> bytes) {
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 3 <= bytes.size(); i += 3) {
    uint32_t v = (std::to_integer<uint32_t>(bytes[i]) << 16) |
                 (std::to_integer<uint32_t>(bytes[i + 1]) << 8) | std::to_integer<uint32_t>(bytes[i + 2]);
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += kAlphabet[(v >> 6) & 63];
    out += kAlphabet[v & 63];
  }
  size_t rest = bytes.size() - i;
  if (rest == 1) {
    uint32_t v = std::to_integer<uint32_t>(bytes[i]) << 16;
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += "==";
  } else if (rest == 2) {
    uint32_t v = (std::to_integer<uint32_t>(bytes[i]) << 16) | (std::to_integer<uint32_t>(bytes[i + 1]) << 8);
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += kAlphabet[(v >> 6) & 63];
    out += '=';
  }
  return out;
}

size_t base64_decoded_size(std::string_view text) {
  if (text.size() % 4 != 0) return 0;
  size_t n = text.size() / 4 * 3;
  if (!text.empty() && text.back() == '=') --n;
  if (text.size() >= 2 && text[text.size() - 2] == '=') --n;
  return n;
}

std::optional<std::vector<std::byte>> base64_decode(std::string_view text) {
  if (text.size() % 4 != 0) return std::nullopt;
  std::vector<std::byte> out;
  out.reserve(base64_decoded_size(text));
  for (size_t i = 0; i < text.size(); i += 4) {
    bool last = i + 4 == text.size();
    int pad = 0;
    if (last && text[i + 3] == '=') pad = (text[i + 2] == '=') ? 2 : 1;
    uint32_t v = 0;
    for (int k = 0; k < 4; ++k) {
      int digit = 0;
      if (k >= 4 - pad) {
        if (text[i + k] != '=') return std::nullopt;
      } else {
        digit = kReverse[static_cast<unsigned char>(text[i + k])];
        if (digit < 0) return std::nullopt;
      }
      v = (v << 6) | static_cast<uint32_t>(digit);
    }
    // Canonical form: the bits under the padding must be zero.
    if (pad == 1 && (v & 0xFF) != 0) return std::nullopt;
    if (pad == 2 && (v & 0xFFFF) != 0) return std::nullopt;
    out.push_back(static_cast<std::byte>((v >> 16) & 0xFF));
    if (pad < 2) out.push_back(static_cast<std::byte>((v >> 8) & 0xFF));
    if (pad < 1) out.push_back(static_cast<std::byte>(v & 0xFF));
  }
  return out;
}

}  // namespace kiln::json_values
