// Shared by the graph tests: building small graphs and checking error messages.
#pragma once

#include "kiln_test_util.h"

#include <kiln/graph/error.h>
#include <kiln/graph/graph.h>

#include <boost/test/unit_test.hpp>

#include <initializer_list>
#include <string>
#include <vector>

namespace kiln_test {

inline kiln::TensorMeta meta(kiln::DType t, kiln::SymShape sizes, kiln::Device d = kiln::Device::cpu()) {
  return kiln::TensorMeta{t, d, std::move(sizes), {}};
}

inline std::vector<int64_t> dims(std::initializer_list<int64_t> v) { return v; }

// A graph with short ways to add inputs and ops and to read a node's meta as text
// ("f32[s0, 4]", "i64[] @cuda:0").
struct G {
  kiln::Graph g;

  kiln::NodeId in(kiln::DType t, kiln::SymShape s, kiln::Device d = kiln::Device::cpu()) {
    return g.add_input(meta(t, std::move(s), d));
  }
  kiln::NodeId op(kiln::OpId op, std::vector<kiln::NodeId> inputs, kiln::Attrs attrs = {}) {
    return g.add(op, std::move(inputs), std::move(attrs));
  }
  // The meta of a new node as text.
  std::string out(kiln::OpId o, std::vector<kiln::NodeId> inputs, kiln::Attrs attrs = {}) {
    return g.node(op(o, std::move(inputs), std::move(attrs))).meta.str();
  }
  kiln::SymInt sym(int64_t example, bool user_dynamic = false) {
    const auto n = g.shapes().symbols().size();
    return g.shapes().create_symbol(example, 2, int64_t{1} << 40, "input dim " + std::to_string(n), user_dynamic);
  }
};

using kiln_test_util::contains;
using kiln_test_util::error_of;

// A BOOST_CHECK_EXCEPTION predicate: the message contains every part.
struct Says {
  std::vector<std::string> parts;
  bool operator()(const kiln::Error& e) const {
    const std::string what = e.what();
    for (const auto& p : parts) {
      if (!contains(what, p)) {
        BOOST_TEST_MESSAGE("error message \"" << what << "\" lacks \"" << p << "\"");
        return false;
      }
    }
    return true;
  }
};

}  // namespace kiln_test

// The statement throws kiln::Error whose message contains each of the given strings.
#define CHECK_KILN_ERROR(stmt, ...) \
  BOOST_CHECK_EXCEPTION(stmt, kiln::Error, (kiln_test::Says{{__VA_ARGS__}}))
