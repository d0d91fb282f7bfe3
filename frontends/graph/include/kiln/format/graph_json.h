// frontends/graph: Kiln's versioned JSON graph format ("kiln.graph", version 1).
// Takes: a kiln::Graph (to_json / save_graph), or JSON text or a file (from_json / load_graph).
// Gives: deterministic text (the same graph always gives the same bytes; from_json of it gives
//   a Graph equal to the original, and to_json of that gives the same bytes again), or a Graph
//   rebuilt through Graph::add_input / Graph::add, so shape inference re-checks every node
//   against the type the file states.
// Bad input never crashes: every problem is a kiln::Error naming the source, the node (id and
//   op) and the field, e.g. "graph.json: node 3 (matmul): field 'inputs': expected 2 inputs,
//   got 1". The format is documented in docs/graph-format.md.
#pragma once

#include <cstddef>
#include <functional>
#include <span>
#include <string>
#include <string_view>

#include "kiln/graph/error.h"
#include "kiln/graph/graph.h"

namespace kiln::format {

// The only version this build reads and writes.
inline constexpr int kGraphFormatVersion = 1;

// Serialises a graph. indent >= 0: one symbol, fact and node per line, the top level indented
// by `indent` spaces; indent < 0: everything on one line. No trailing newline.
std::string to_json(const Graph& g, int indent = 2);
// What compile-cache keys hash: to_json(g, -1), except that each constant of more than
// json_values::kDigestAbove bytes is written as `digest` of its bytes (a model's weights are
// hashed once, not encoded as base64 text first; it cannot be read back).
std::string key_json(const Graph& g, const std::function<std::string(std::span<const std::byte>)>& digest);

// Parses a graph; `source_name` starts every error message. Throws kiln::Error.
Graph from_json(std::string_view text, std::string_view source_name = "<graph>");

// File versions: load_graph names the file in its errors; save_graph writes to_json(g) and a
// newline. Both throw kiln::Error when the file cannot be read or written.
Graph load_graph(const std::string& path);
void save_graph(const Graph& g, const std::string& path);

}  // namespace kiln::format
