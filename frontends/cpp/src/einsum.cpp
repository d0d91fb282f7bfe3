// einsum as a composite of the op API: diagonals, sums, permutes, reshapes and one matmul per
// pair of operands (folded left to right, as torch.einsum does without opt_einsum), so eager
// calls and traces are the same code and the compiler sees ordinary ops it can fuse.
#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "kiln/graph/error.h"
#include "kiln/ops.h"

namespace kiln {

namespace {

// A dim's label: a letter, or for the dims an ellipsis covers 1..E (right-aligned across the
// operands, so that they broadcast as numpy's do).
using Label = int;
using Labels = std::vector<Label>;

bool is_letter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

std::string label_text(Label l) { return is_letter(static_cast<char>(l)) ? std::string(1, static_cast<char>(l)) : "..."; }

// One term of the equation: its letters, and where its ellipsis stands (-1: none).
struct Term {
  std::vector<char> letters;
  int ellipsis_at = -1;
};

Term parse_term(const std::string& text, const std::string& equation) {
  Term t;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == ' ') continue;
    if (c == '.') {
      KILN_CHECK(text.compare(i, 3, "...") == 0 && t.ellipsis_at < 0, "einsum: '", equation,
                 "': '.' must come as one '...' per term");
      t.ellipsis_at = static_cast<int>(t.letters.size());
      i += 2;
      continue;
    }
    KILN_CHECK(is_letter(c), "einsum: '", equation, "': '", std::string(1, c), "' is not a letter, ',', '->' or '...'");
    t.letters.push_back(c);
  }
  return t;
}

// The labels of a term over `dims` dims with an ellipsis of E dims in all.
Labels expand_term(const Term& t, int64_t ellipsis_dims, int64_t total_ellipsis) {
  Labels out;
  for (size_t i = 0; i <= t.letters.size(); ++i) {
    if (static_cast<int>(i) == t.ellipsis_at)
      for (int64_t k = total_ellipsis - ellipsis_dims; k < total_ellipsis; ++k) out.push_back(static_cast<Label>(k + 1));
    if (i < t.letters.size()) out.push_back(t.letters[i]);
  }
  return out;
}

bool has(const Labels& ls, Label l) { return std::find(ls.begin(), ls.end(), l) != ls.end(); }

int64_t position(const Labels& ls, Label l) { return std::find(ls.begin(), ls.end(), l) - ls.begin(); }

// One operand while it is contracted: the tensor and a label per dim.
struct Operand {
  Tensor x;
  Labels labels;
};

// Takes repeated labels' diagonals and sums out the labels nothing later needs.
Operand reduce(Operand a, const std::set<Label>& keep) {
  for (bool again = true; again;) {
    again = false;
    for (size_t i = 0; i < a.labels.size() && !again; ++i)
      for (size_t j = i + 1; j < a.labels.size() && !again; ++j) {
        if (a.labels[i] != a.labels[j]) continue;
        const Shape shape = a.x.shape();
        const Tensor on_diagonal = eq(iota(shape, static_cast<int64_t>(i), DType::i64, a.x.device()),
                                      iota(shape, static_cast<int64_t>(j), DType::i64, a.x.device()));
        a.x = sum(where(on_diagonal, a.x, 0), {static_cast<int64_t>(j)});
        a.labels.erase(a.labels.begin() + static_cast<int64_t>(j));
        again = true;
      }
  }
  Dims gone;
  Labels kept;
  for (size_t i = 0; i < a.labels.size(); ++i) {
    if (keep.count(a.labels[i])) kept.push_back(a.labels[i]);
    else gone.push_back(static_cast<int64_t>(i));
  }
  if (!gone.empty()) a.x = sum(a.x, gone);
  a.labels = kept;
  return a;
}

SymInt product(const std::vector<SymInt>& sizes) {
  SymInt p(1);
  for (const SymInt& s : sizes) p = p * s;
  return p;
}

// a and b contracted over their shared labels that `keep` lacks, by one matmul: the result has
// the shared labels kept (batch), then a's own, then b's own.
Operand contract(Operand a, Operand b, const std::set<Label>& keep) {
  Labels batch, summed, left, right;
  for (Label l : a.labels) {
    if (has(b.labels, l)) (keep.count(l) ? batch : summed).push_back(l);
    else left.push_back(l);
  }
  for (Label l : b.labels)
    if (!has(a.labels, l)) right.push_back(l);
  // A size-1 dim meets the other operand's size (broadcast), so that both reshape alike.
  for (Label l : a.labels) {
    if (!has(b.labels, l)) continue;
    const int64_t i = position(a.labels, l), j = position(b.labels, l);
    const SymInt sa = a.x.shape()[i], sb = b.x.shape()[j];
    if (sa.is_static() && sa.hint() == 1 && !(sb.is_static() && sb.hint() == 1)) {
      Shape s = a.x.shape();
      s[i] = sb;
      a.x = expand(a.x, s);
    } else if (sb.is_static() && sb.hint() == 1 && !(sa.is_static() && sa.hint() == 1)) {
      Shape s = b.x.shape();
      s[j] = sa;
      b.x = expand(b.x, s);
    }
  }
  auto arrange = [](const Operand& o, const std::vector<const Labels*>& groups, std::vector<std::vector<SymInt>>& sizes) {
    Dims order;
    for (const Labels* g : groups) {
      sizes.emplace_back();
      for (Label l : *g) {
        const int64_t p = position(o.labels, l);
        order.push_back(p);
        sizes.back().push_back(o.x.shape()[p]);
      }
    }
    return permute(o.x, order);
  };
  std::vector<std::vector<SymInt>> as, bs;
  const Tensor at = arrange(a, {&batch, &left, &summed}, as);
  const Tensor bt = arrange(b, {&batch, &summed, &right}, bs);
  Shape a2(as[0].begin(), as[0].end()), b2(as[0].begin(), as[0].end());
  a2.push_back(product(as[1]));
  a2.push_back(product(as[2]));
  b2.push_back(product(bs[1]));
  b2.push_back(product(bs[2]));
  const Tensor m = matmul(reshape(at, a2), reshape(bt, b2));
  Shape out(as[0].begin(), as[0].end());
  out.insert(out.end(), as[1].begin(), as[1].end());
  out.insert(out.end(), bs[2].begin(), bs[2].end());
  Operand r{reshape(m, out), batch};
  r.labels.insert(r.labels.end(), left.begin(), left.end());
  r.labels.insert(r.labels.end(), right.begin(), right.end());
  return r;
}

}  // namespace

Tensor einsum(const std::string& equation, const std::vector<Tensor>& operands) {
  KILN_CHECK(!operands.empty(), "einsum: '", equation, "' has no operands");
  const size_t arrow = equation.find("->");
  const std::string lhs = equation.substr(0, arrow);
  std::vector<Term> terms;
  for (size_t start = 0;;) {
    const size_t comma = lhs.find(',', start);
    terms.push_back(parse_term(lhs.substr(start, comma == std::string::npos ? std::string::npos : comma - start), equation));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  KILN_CHECK(terms.size() == operands.size(), "einsum: '", equation, "' has ", terms.size(), " terms but ",
             operands.size(), " operands were given");
  // The ellipsis' dims per operand, and in all.
  std::vector<int64_t> ellipsis(operands.size(), 0);
  int64_t total_ellipsis = 0;
  for (size_t i = 0; i < operands.size(); ++i) {
    KILN_CHECK(operands[i].defined(), "einsum: operand ", i, " is undefined");
    const int64_t rank = operands[i].rank(), named = static_cast<int64_t>(terms[i].letters.size());
    KILN_CHECK(terms[i].ellipsis_at >= 0 ? rank >= named : rank == named, "einsum: '", equation, "': operand ", i,
               " has ", rank, " dims but its term names ", named, terms[i].ellipsis_at >= 0 ? " and '...'" : "");
    ellipsis[i] = rank - named;
    total_ellipsis = std::max(total_ellipsis, ellipsis[i]);
  }
  std::vector<Operand> ops;
  std::map<Label, int> count;
  std::map<Label, std::pair<SymInt, size_t>> sizes;  // a size of each label (not 1 where one is), and whose
  for (size_t i = 0; i < operands.size(); ++i) {
    Operand o{operands[i], expand_term(terms[i], ellipsis[i], total_ellipsis)};
    for (size_t d = 0; d < o.labels.size(); ++d) {
      ++count[o.labels[d]];
      const SymInt s = o.x.shape()[d];
      auto [it, fresh] = sizes.emplace(o.labels[d], std::make_pair(s, i));
      const SymInt& seen = it->second.first;
      if (fresh || !s.is_static() || !seen.is_static() || s.hint() == seen.hint() || s.hint() == 1) continue;
      KILN_CHECK(seen.hint() == 1, "einsum: '", equation, "': '", label_text(o.labels[d]), "' has size ", seen.hint(),
                 " in operand ", it->second.second, " but ", s.hint(), " in operand ", i);
      it->second = {s, i};
    }
    ops.push_back(std::move(o));
  }
  // The output's labels: as written, or numpy's implicit form (the ellipsis, then the letters
  // used once, in alphabetical order).
  Labels output;
  if (arrow != std::string::npos) {
    const Term out = parse_term(equation.substr(arrow + 2), equation);
    output = expand_term(out, out.ellipsis_at >= 0 ? total_ellipsis : 0, total_ellipsis);
    for (size_t k = 0; k < out.letters.size(); ++k) {
      KILN_CHECK(count.count(out.letters[k]), "einsum: '", equation, "': the output's '", std::string(1, out.letters[k]),
                 "' is in no operand");
      KILN_CHECK(std::count(out.letters.begin(), out.letters.end(), out.letters[k]) == 1, "einsum: '", equation,
                 "': the output names '", std::string(1, out.letters[k]), "' twice");
    }
  } else {
    for (int64_t k = 1; k <= total_ellipsis; ++k) output.push_back(static_cast<Label>(k));
    for (const auto& [l, n] : count)
      if (n == 1 && is_letter(static_cast<char>(l))) output.push_back(l);
  }
  // Left to right: each step keeps what the output or a later operand needs.
  auto needed_after = [&](size_t next) {
    std::set<Label> keep(output.begin(), output.end());
    for (size_t k = next; k < ops.size(); ++k) keep.insert(ops[k].labels.begin(), ops[k].labels.end());
    return keep;
  };
  Operand acc = reduce(ops[0], needed_after(1));
  for (size_t i = 1; i < ops.size(); ++i) {
    std::set<Label> keep = needed_after(i + 1);
    std::set<Label> keep_b = keep;
    keep_b.insert(acc.labels.begin(), acc.labels.end());
    Operand b = reduce(ops[i], keep_b);
    acc = contract(std::move(acc), std::move(b), keep);
  }
  acc = reduce(std::move(acc), std::set<Label>(output.begin(), output.end()));
  Dims order;
  for (Label l : output) order.push_back(position(acc.labels, l));
  return permute(acc.x, order);
}

}  // namespace kiln
