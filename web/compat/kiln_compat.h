// Force-included into every translation unit of the WebAssembly build (web/CMakeLists.txt).
// Debian's Emscripten 3.1.6 ships a libc++ older than the C++20 the portable code is written
// in; this fills in what it lacks with the standard's own semantics, so the portable sources
// build unchanged. Nothing else belongs here.
#pragma once

#include <version>

#if !defined(__cpp_lib_bit_cast)
#include <type_traits>
namespace std {
// C++20 std::bit_cast (<bit>), through the compiler builtin libc++ itself uses.
template <class To, class From>
  requires(sizeof(To) == sizeof(From) && is_trivially_copyable_v<To> && is_trivially_copyable_v<From>)
constexpr To bit_cast(const From& from) noexcept {
  return __builtin_bit_cast(To, from);
}
}  // namespace std
#endif
