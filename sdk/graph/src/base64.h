// Standard base64 (RFC 4648 alphabet, '=' padding), for constant tensor bytes in graph files.
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::json_values {

std::string base64_encode(std::span<const std::byte> bytes);
// nullopt when `text` is not canonical padded base64 (bad character, bad length, bad padding).
std::optional<std::vector<std::byte>> base64_decode(std::string_view text);
// The decoded size of a well-formed text, without decoding it.
size_t base64_decoded_size(std::string_view text);

}  // namespace kiln::json_values
