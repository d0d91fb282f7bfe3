// Attribute values: kind names, kind of a value, typed access and equality.
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

// NaN equals NaN here, so a graph holding one still equals itself.
bool same_double(double x, double y) { return x == y || (std::isnan(x) && std::isnan(y)); }

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

bool Attrs::operator==(const Attrs& o) const {
  if (values.size() != o.values.size()) return false;
  for (size_t k = 0; k < values.size(); ++k)
    if (!same_value(values[k], o.values[k])) return false;
  return true;
}

}  // namespace kiln
