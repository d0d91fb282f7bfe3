// What a graph requires of its inputs, as `kiln show` prints it and `kiln run` checks it: per
// input its dtype, device, rank and each size (a number, or a symbol bound on first sight and
// checked against its range, or an expression of bound symbols), then the shape facts.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "kiln/graph/graph.h"
#include "kiln/graph/tensor_data.h"

namespace kiln::cli {

// "input 0 (x)"
std::string input_label(const Graph& g, size_t k);

// "[2, 9223372036854775807]" with the top written as "inf" when unbounded.
std::string range_str(int64_t min, int64_t max);

// One line per check.
std::vector<std::string> guard_lines(const Graph& g);

// Checks concrete inputs against the graph; `origins[k]` says where input k came from (a
// file name) for the message. Returns the symbol values. Throws kiln::Error.
std::vector<int64_t> check_inputs(const Graph& g, std::span<const TensorData> inputs,
                                  std::span<const std::string> origins);

}  // namespace kiln::cli
