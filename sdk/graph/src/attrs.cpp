// Attribute values: kind names, kind of a value, typed access and equality.
#include <string_view>
#include <functional>
#include <bit>
#include <cmath>

#include "kiln/graph/error.h"
#include "kiln/graph/ops.h"

namespace kiln {

// The variant's alternatives are declared in AttrKind order.
static_assert(std::variant_size_v<AttrValue> == static_cast<size_t>(AttrKind::tensor) + 1);
static_assert(std::is_same_v<std::variant_alternative_t<static_cast<size_t>(AttrKind::symints), AttrValue>,
                             std::vector<SymInt>>);
static_assert(std::is_same_v<std::variant_alternative_t<static_cast<size_t>(AttrKind::string), AttrValue>,
                             std::string>);

std::string_view attr_kind_name(AttrKind k) {
  switch (k) {
    case AttrKind::int_: return "int";
    case AttrKind::float_: return "float";
    case AttrKind::bool_: return "bool";
    case AttrKind::ints: return "ints";
    case AttrKind::symints: return "symints";
    case AttrKind::dtype: return "dtype";
    case AttrKind::string: return "string";
    case AttrKind::tensor: return "tensor";
  }
  return "unknown";
}

AttrKind attr_kind_of(const AttrValue& v) { return static_cast<AttrKind>(v.index()); }

namespace {

template <class T>
const T& get(const Attrs& a, size_t k, AttrKind want) {
  KILN_CHECK(k < a.values.size(), "attribute ", k, " is missing (", a.values.size(), " given)");
  const T* v = std::get_if<T>(&a.values[k]);
  KILN_CHECK(v != nullptr, "attribute ", k, " is ", attr_kind_name(attr_kind_of(a.values[k])), ", expected ",
             attr_kind_name(want));
  return *v;
}

bool same_double(double x, double y) {
  return std::bit_cast<uint64_t>(x) == std::bit_cast<uint64_t>(y) || (std::isnan(x) && std::isnan(y));
}

uint64_t mix(uint64_t h, uint64_t v) { return h ^ (v + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2)); }

// FNV-1a over bytes: the same value on every platform (std::hash differs between standard
// libraries and between 32- and 64-bit builds, and graph hashes are cache keys).
uint64_t fnv1a(const void* data, size_t n) {
  uint64_t h = 0xcbf29ce484222325ull;
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

uint64_t hash_value(const AttrValue& v) {
  uint64_t h = v.index();
  std::visit(
      [&](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, int64_t> || std::is_same_v<T, bool> || std::is_same_v<T, DType>) {
          h = mix(h, static_cast<uint64_t>(x));
        } else if constexpr (std::is_same_v<T, double>) {
          h = mix(h, std::isnan(x) ? 1 : std::bit_cast<uint64_t>(x));  // every NaN alike
        } else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
          for (int64_t i : x) h = mix(h, static_cast<uint64_t>(i));
        } else if constexpr (std::is_same_v<T, std::vector<SymInt>>) {
          for (const SymInt& i : x) h = mix(h, i.hash());
        } else if constexpr (std::is_same_v<T, std::string>) {
          h = mix(h, fnv1a(x.data(), x.size()));
        } else if (x) {  // constant tensor
          h = mix(h, static_cast<uint64_t>(x->dtype));
          for (int64_t s : x->sizes) h = mix(h, static_cast<uint64_t>(s));
          h = mix(h, fnv1a(x->bytes.data(), x->bytes.size()));
        }
      },
      v);
  return h;
}

bool same_value(const AttrValue& x, const AttrValue& y) {
  if (x.index() != y.index()) return false;
  if (const auto* d = std::get_if<double>(&x)) return same_double(*d, std::get<double>(y));
  if (const auto* t = std::get_if<std::shared_ptr<const ConstantData>>(&x)) {
    const auto& u = std::get<std::shared_ptr<const ConstantData>>(y);
    return *t == u || (*t && u && **t == *u);
  }
  return x == y;
}

}  // namespace

int64_t Attrs::i(size_t k) const { return get<int64_t>(*this, k, AttrKind::int_); }
double Attrs::f(size_t k) const { return get<double>(*this, k, AttrKind::float_); }
bool Attrs::b(size_t k) const { return get<bool>(*this, k, AttrKind::bool_); }
const std::vector<int64_t>& Attrs::ints(size_t k) const { return get<std::vector<int64_t>>(*this, k, AttrKind::ints); }
const std::vector<SymInt>& Attrs::symints(size_t k) const {
  return get<std::vector<SymInt>>(*this, k, AttrKind::symints);
}
DType Attrs::dtype(size_t k) const { return get<DType>(*this, k, AttrKind::dtype); }
const std::string& Attrs::s(size_t k) const { return get<std::string>(*this, k, AttrKind::string); }
const ConstantData& Attrs::tensor(size_t k) const {
  const auto& p = get<std::shared_ptr<const ConstantData>>(*this, k, AttrKind::tensor);
  KILN_CHECK(p != nullptr, "attribute ", k, " is an empty tensor reference");
  return *p;
}

uint64_t Attrs::hash() const {
  uint64_t h = values.size();
  for (const AttrValue& v : values) h = mix(h, hash_value(v));
  return h;
}

bool Attrs::operator==(const Attrs& o) const {
  if (values.size() != o.values.size()) return false;
  for (size_t k = 0; k < values.size(); ++k)
    if (!same_value(values[k], o.values[k])) return false;
  return true;
}

}  // namespace kiln
