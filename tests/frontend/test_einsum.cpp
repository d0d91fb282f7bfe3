// einsum against a brute-force evaluation of each equation (every assignment of its letters,
// in double): products and sums, transposes, traces and diagonals, implicit outputs,
// ellipses that broadcast, three operands, compiled against eager, and the errors.
#include <map>
#include <numeric>

#include "helpers.h"

using namespace kiln;
using namespace frontend_test;

namespace {


// out[o...] = sum over the other letters of prod_i x_i[its letters], every letter spelled out
// (no ellipsis; a size-1 dim broadcasts by reading index 0).
std::vector<double> brute_force(const std::string& lhs_terms, const std::string& out, const std::vector<Tensor>& xs) {
  std::vector<std::string> terms;
  std::string cur;
  for (char c : lhs_terms) {
    if (c == ',') terms.push_back(cur), cur.clear();
    else cur += c;
  }
  terms.push_back(cur);
  std::map<char, int64_t> size;
  for (size_t i = 0; i < xs.size(); ++i)
    for (size_t d = 0; d < terms[i].size(); ++d) size[terms[i][d]] = std::max(size[terms[i][d]], xs[i].size(d));
  std::vector<char> letters;
  for (const auto& [c, s] : size) letters.push_back(c);
  std::vector<std::vector<double>> vals;
  for (const Tensor& x : xs) vals.push_back(x.to_vector<double>());
  int64_t out_n = 1;
  for (char c : out) out_n *= size[c];
  std::vector<double> result(static_cast<size_t>(out_n), 0.0);
  std::map<char, int64_t> at;
  for (char c : letters) at[c] = 0;
  for (;;) {
    double p = 1;
    for (size_t i = 0; i < xs.size(); ++i) {
      int64_t flat = 0;
      for (size_t d = 0; d < terms[i].size(); ++d) flat = flat * xs[i].size(d) + (xs[i].size(d) == 1 ? 0 : at[terms[i][d]]);
      p *= vals[i][flat];
    }
    int64_t o = 0;
    for (char c : out) o = o * size[c] + at[c];
    result[o] += p;
    size_t k = letters.size();
    while (k > 0 && ++at[letters[k - 1]] == size[letters[k - 1]]) at[letters[--k]] = 0;
    if (k == 0) break;
  }
  return result;
}

void check(const std::string& equation, const std::vector<Tensor>& xs, const std::string& brute_lhs,
           const std::string& brute_out, const Sizes& want_sizes) {
  BOOST_TEST_CONTEXT(equation) {
    const Tensor y = einsum(equation, xs);
    BOOST_TEST(sizes_of(y) == want_sizes);
    check_values(y, brute_force(brute_lhs, brute_out, xs), 1e-5);
  }
}

}  // namespace

BOOST_AUTO_TEST_SUITE(einsum_op)

BOOST_AUTO_TEST_CASE(equations_against_brute_force) {
  const Tensor a = pattern_tensor({3, 4}, 1), b = pattern_tensor({4, 5}, 2), c = pattern_tensor({5, 2}, 3);
  const Tensor sq = pattern_tensor({4, 4}, 4), v = pattern_tensor({4}, 5), w = pattern_tensor({3}, 6);
  const Tensor bat1 = pattern_tensor({2, 3, 4}, 7), bat2 = pattern_tensor({2, 4, 5}, 8);
  check("ij,jk->ik", {a, b}, "ij,jk", "ik", {3, 5});
  check("ij,jk", {a, b}, "ij,jk", "ik", {3, 5});  // implicit output
  check("ij->ji", {a}, "ij", "ji", {4, 3});
  check("ij->", {a}, "ij", "", {});
  check("ij->j", {a}, "ij", "j", {4});
  check("ii->", {sq}, "ii", "", {});   // trace
  check("ii->i", {sq}, "ii", "i", {4});  // diagonal
  check("i,j->ij", {w, v}, "i,j", "ij", {3, 4});  // outer product
  check("ij,j->i", {a, v}, "ij,j", "i", {3});
  check("i,i->", {v, v}, "i,i", "", {});
  check("bij,bjk->bik", {bat1, bat2}, "bij,bjk", "bik", {2, 3, 5});
  check("bij,bjk->bki", {bat1, bat2}, "bij,bjk", "bki", {2, 5, 3});
  check("ij,jk,kl->il", {a, b, c}, "ij,jk,kl", "il", {3, 2});
  check("ij,jk,kl->li", {a, b, c}, "ij,jk,kl", "li", {2, 3});
  // Attention's scores and a bilinear form.
  const Tensor q = pattern_tensor({2, 2, 3, 4}, 9), k = pattern_tensor({2, 2, 5, 4}, 10);
  check("bhqd,bhkd->bhqk", {q, k}, "bhqd,bhkd", "bhqk", {2, 2, 3, 5});
  const Tensor x1 = pattern_tensor({2, 3}, 11), wb = pattern_tensor({4, 3, 5}, 12), x2 = pattern_tensor({2, 5}, 13);
  check("bn,anm,bm->ba", {x1, wb, x2}, "bn,anm,bm", "ba", {2, 4});
  // A letter of one operand summed before the product; spaces are ignored.
  check("ijk, jl -> il", {pattern_tensor({3, 4, 2}, 14), pattern_tensor({4, 6}, 15)}, "ijk,jl", "il", {3, 6});
}

BOOST_AUTO_TEST_CASE(ellipses_broadcast) {
  const Tensor x = pattern_tensor({3, 2, 4}, 1), y = pattern_tensor({1, 4, 5}, 2), z = pattern_tensor({4, 5}, 3);
  check("...ij,...jk->...ik", {x, y}, "bij,bjk", "bik", {3, 2, 5});
  check("...ij,jk->...ik", {x, z}, "bij,jk", "bik", {3, 2, 5});
  check("...ij,...jk", {x, y}, "bij,bjk", "bik", {3, 2, 5});  // implicit: the ellipsis first
  check("b...->...b", {x}, "bij", "ijb", {2, 4, 3});
  check("...i->", {x}, "bji", "", {});
}

BOOST_AUTO_TEST_CASE(compiled_like_eager) {
  auto f = kiln::compile([](const Tensor& q, const Tensor& k, const Tensor& v) {
    const Tensor s = softmax(einsum("bqd,bkd->bqk", {q, k}) * 0.5, -1);
    return einsum("bqk,bkd->bqd", {s, v});
  });
  const Tensor q = pattern_tensor({2, 3, 4}, 1), k = pattern_tensor({2, 5, 4}, 2), v = pattern_tensor({2, 5, 4}, 3);
  const Tensor eager = einsum("bqk,bkd->bqd", {softmax(einsum("bqd,bkd->bqk", {q, k}) * 0.5, -1), v});
  check_values(f(q, k, v), eager.to_vector<double>(), 1e-5);
}

BOOST_AUTO_TEST_CASE(errors_say_what) {
  const Tensor a = pattern_tensor({3, 4}, 1), b = pattern_tensor({5, 2}, 2);
  BOOST_TEST(contains(error_of([&] { einsum("ij,jk->ik", {a, b}); }), "'j' has size 4 in operand 0 but 5 in operand 1"));
  BOOST_TEST(contains(error_of([&] { einsum("ijk->i", {a}); }), "operand 0 has 2 dims but its term names 3"));
  BOOST_TEST(contains(error_of([&] { einsum("ij,jk->ik", {a}); }), "has 2 terms but 1 operands"));
  BOOST_TEST(contains(error_of([&] { einsum("ij->iz", {a}); }), "the output's 'z' is in no operand"));
  BOOST_TEST(contains(error_of([&] { einsum("ij->ii", {a}); }), "names 'i' twice"));
  BOOST_TEST(contains(error_of([&] { einsum("i1->i", {a}); }), "'1' is not a letter"));
  BOOST_TEST(contains(error_of([&] { einsum("i..j->i", {a}); }), "one '...' per term"));
}

BOOST_AUTO_TEST_SUITE_END()
