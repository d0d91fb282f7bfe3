// kiln::nn: each module against a direct computation of torch's definition (loops in double),
// the seeded initialisation, torch's state-dict names through a .safetensors file, modules as
// pytrees of a compiled function, and the errors bad shapes give.
#include <algorithm>
#include <cstring>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "helpers.h"
#include "kiln/config/config.h"

using namespace kiln;
using namespace frontend_test;

namespace {

std::vector<double> values(const Tensor& t) { return t.to_vector<double>(); }

// y[r, o] = sum_i x[r, i] * w[o, i] + b[o], x [rows, in]
std::vector<double> linear_by_hand(const std::vector<double>& x, const std::vector<double>& w,
                                   const std::vector<double>& b, int64_t rows, int64_t in, int64_t out) {
  std::vector<double> y(static_cast<size_t>(rows * out));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t o = 0; o < out; ++o) {
      double s = b.empty() ? 0.0 : b[o];
      for (int64_t i = 0; i < in; ++i) s += x[r * in + i] * w[o * in + i];
      y[r * out + o] = s;
    }
  return y;
}

Tensor iota(const Dims& sizes, double scale = 0.1) {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<float>(scale * static_cast<double>((i * 7) % 11) - 0.4);
  Shape shape;
  for (int64_t s : sizes) shape.push_back(SymInt(s));
  return from_vector(v, shape);
}

struct Block {
  nn::LayerNorm norm;
  nn::MultiheadAttention attention;
  nn::Sequential<nn::Linear, nn::GELU, nn::Linear> mlp;
  Tensor operator()(const Tensor& x) const {
    const Tensor h = norm(x);
    AttentionOptions causal;
    causal.is_causal = true;
    const Tensor a = x + attention(h, h, h, causal);
    return a + mlp(norm(a));
  }
};

}  // namespace

KILN_PYTREE(Block, &Block::norm, &Block::attention, &Block::mlp);

BOOST_AUTO_TEST_SUITE(nn_modules)

BOOST_AUTO_TEST_CASE(init_is_seeded_and_follows_torch) {
  nn::Init a(7), b(7), c(8);
  const Tensor wa = a.uniform({64, 32}, 0.25), wb = b.uniform({64, 32}, 0.25), wc = c.uniform({64, 32}, 0.25);
  BOOST_TEST(values(wa) == values(wb));
  BOOST_TEST(values(wa) != values(wc));
  // Draws advance: a second tensor from the same Init differs from the first.
  BOOST_TEST(values(a.uniform({64, 32}, 0.25)) != values(wa));
  double lo = 1, hi = -1;
  for (double v : values(wa)) lo = std::min(lo, v), hi = std::max(hi, v);
  BOOST_TEST(lo >= -0.25);
  BOOST_TEST(hi <= 0.25);
  BOOST_TEST(lo < -0.24);  // 2048 draws reach the ends of the interval
  BOOST_TEST(hi > 0.24);
  const std::vector<double> n = values(a.normal({100, 100}));
  double mean = 0, sq = 0;
  for (double v : n) mean += v, sq += v * v;
  mean /= static_cast<double>(n.size());
  const double var = sq / static_cast<double>(n.size()) - mean * mean;
  BOOST_TEST(std::abs(mean) < 0.03);
  BOOST_TEST(std::abs(var - 1.0) < 0.05);
  nn::Init f64(1, DType::f64);
  BOOST_TEST(nn::Linear::make(3, 2, f64).weight.dtype() == DType::f64);
  // torch's bound for Linear: 1/sqrt(in_features).
  nn::Init i(3);
  for (double v : values(nn::Linear::make(100, 50, i).weight)) BOOST_TEST(std::abs(v) <= 0.1);
}

BOOST_AUTO_TEST_CASE(linear_and_embedding) {
  nn::Init init(1);
  const nn::Linear l = nn::Linear::make(3, 2, init);
  const Tensor x = iota({4, 3});
  const Tensor y = l(x);
  BOOST_TEST(sizes_of(y) == (Sizes{4, 2}));
  check_values(y, linear_by_hand(values(x), values(l.weight), values(*l.bias), 4, 3, 2), 1e-5);
  const nn::Linear nobias = nn::Linear::make(3, 2, init, false);
  BOOST_TEST(!nobias.bias.has_value());
  check_values(nobias(x), linear_by_hand(values(x), values(nobias.weight), {}, 4, 3, 2), 1e-5);

  const nn::Embedding e = nn::Embedding::make(5, 3, init);
  const Tensor ids = from_vector<int64_t>({4, 0, 2, 2, 1, 3}, {2, 3});
  const Tensor rows = e(ids);
  BOOST_TEST(sizes_of(rows) == (Sizes{2, 3, 3}));
  const std::vector<double> w = values(e.weight), got = values(rows);
  const int64_t picked[] = {4, 0, 2, 2, 1, 3};
  for (int64_t r = 0; r < 6; ++r)
    for (int64_t d = 0; d < 3; ++d) BOOST_TEST(got[r * 3 + d] == w[picked[r] * 3 + d]);
}

BOOST_AUTO_TEST_CASE(norms) {
  nn::Init init(2);
  const Tensor x = iota({2, 3, 4});
  const std::vector<double> xv = values(x);
  nn::LayerNorm ln = nn::LayerNorm::make({4}, init, 1e-5);
  ln.weight = from_vector<float>({1, 2, 3, 4});
  ln.bias = from_vector<float>({0.5, 0, -0.5, 1});
  nn::RMSNorm rms = nn::RMSNorm::make({4}, init, 1e-6);
  rms.weight = from_vector<float>({2, 1, 1, 0.5});
  std::vector<double> ln_expected, rms_expected;
  const double g[] = {1, 2, 3, 4}, b[] = {0.5, 0, -0.5, 1}, rg[] = {2, 1, 1, 0.5};
  for (int64_t r = 0; r < 6; ++r) {
    double mean = 0, var = 0, sq = 0;
    for (int64_t i = 0; i < 4; ++i) mean += xv[r * 4 + i] / 4, sq += xv[r * 4 + i] * xv[r * 4 + i] / 4;
    for (int64_t i = 0; i < 4; ++i) var += (xv[r * 4 + i] - mean) * (xv[r * 4 + i] - mean) / 4;
    for (int64_t i = 0; i < 4; ++i) {
      ln_expected.push_back((xv[r * 4 + i] - mean) / std::sqrt(var + 1e-5) * g[i] + b[i]);
      rms_expected.push_back(xv[r * 4 + i] / std::sqrt(sq + 1e-6) * rg[i]);
    }
  }
  check_values(ln(x), ln_expected, 1e-4);
  check_values(rms(x), rms_expected, 1e-4);

  // Batch norm with running statistics: (x - mean) / sqrt(var + eps) * w + b per channel.
  const Tensor img = iota({2, 3, 2, 2});
  const std::vector<double> iv = values(img);
  nn::BatchNorm2d bn = nn::BatchNorm2d::make(3, init);
  bn.running_mean = from_vector<float>({0.1, -0.2, 0.3});
  bn.running_var = from_vector<float>({1, 0.5, 2});
  bn.weight = from_vector<float>({1, -1, 2});
  bn.bias = from_vector<float>({0, 1, -1});
  const double m[] = {0.1, -0.2, 0.3}, v[] = {1, 0.5, 2}, w[] = {1, -1, 2}, c[] = {0, 1, -1};
  std::vector<double> bn_expected;
  for (int64_t k = 0; k < 24; ++k) {
    const int64_t ch = (k / 4) % 3;
    bn_expected.push_back((iv[k] - m[ch]) / std::sqrt(v[ch] + 1e-5) * w[ch] + c[ch]);
  }
  check_values(bn(img), bn_expected, 1e-4);
  // Group norm: the module applies the op with its parameters.
  const nn::GroupNorm gn = nn::GroupNorm::make(1, 3, init);
  check_values(gn(img), values(group_norm(img, 1, *gn.weight, *gn.bias, 1e-5)), 1e-6);
}

BOOST_AUTO_TEST_CASE(convolutions) {
  nn::Init init(4);
  const nn::Conv2d conv = nn::Conv2d::make(4, 6, {3, 3}, init, {.stride = {2}, .padding = {1}, .groups = 2});
  BOOST_TEST(sizes_of(conv.weight) == (Sizes{6, 2, 3, 3}));
  for (double v : values(conv.weight)) BOOST_TEST(std::abs(v) <= 1.0 / std::sqrt(18.0));
  const Tensor x = iota({1, 4, 5, 5});
  const Tensor y = conv(x);
  BOOST_TEST(sizes_of(y) == (Sizes{1, 6, 3, 3}));
  check_values(y, values(conv2d(x, conv.weight, *conv.bias, {2}, {1}, {1}, 2)), 1e-6);
  // One output by hand: channel 4 (group 1: input channels 2, 3), position (1, 1) reads rows and
  // columns 1..3 of the padded input, i.e. 1..3 - 1 of x.
  const std::vector<double> xv = values(x), wv = values(conv.weight);
  double s = values(*conv.bias)[4];
  for (int64_t ci = 0; ci < 2; ++ci)
    for (int64_t r = 0; r < 3; ++r)
      for (int64_t c = 0; c < 3; ++c) s += xv[(2 + ci) * 25 + (1 + r) * 5 + (1 + c)] * wv[((4 * 2 + ci) * 3 + r) * 3 + c];
  BOOST_TEST(std::abs(values(y)[4 * 9 + 4] - s) < 1e-5);
  const nn::Conv1d c1 = nn::Conv1d::make(2, 3, 2, init, {.bias = false});
  const Tensor x1 = iota({2, 2, 5});
  check_values(c1(x1), values(conv1d(x1, c1.weight, {}, {1}, {0}, {1}, 1)), 1e-6);
  BOOST_TEST(contains(error_of([&] { nn::Conv2d::make(3, 4, {3, 3}, init, {.groups = 2}); }), "multiples of groups 2"));
  const nn::ConvTranspose2d up = nn::ConvTranspose2d::make(4, 2, {2, 2}, init, {.stride = {2}});
  BOOST_TEST(sizes_of(up.weight) == (Sizes{4, 2, 2, 2}));
  const Tensor xu = iota({1, 4, 3, 3});
  BOOST_TEST(sizes_of(up(xu)) == (Sizes{1, 2, 6, 6}));
  check_values(up(xu), values(conv_transpose2d(xu, up.weight, *up.bias, {2})), 1e-6);
}

BOOST_AUTO_TEST_CASE(multihead_attention_by_hand) {
  nn::Init init(5);
  nn::MultiheadAttention mha = nn::MultiheadAttention::make(4, 2, init);
  mha.in_proj_bias = iota({12}, 0.05);  // nonzero, so that the bias slices are checked too
  mha.out_proj.bias = from_vector<float>({0.1, -0.1, 0.2, 0});
  const int64_t L = 3, E = 4, H = 2, D = 2;
  const Tensor x = iota({1, L, E});
  const std::vector<double> xv = values(x), w = values(mha.in_proj_weight), b = values(*mha.in_proj_bias);
  const std::vector<double> ow = values(mha.out_proj.weight), ob = values(*mha.out_proj.bias);
  for (bool causal : {false, true}) {
    // q, k, v = x W_part^T + b_part, [L, E] each.
    std::vector<double> qkv[3];
    for (int p = 0; p < 3; ++p)
      qkv[p] = linear_by_hand(xv, std::vector<double>(w.begin() + p * E * E, w.begin() + (p + 1) * E * E),
                              std::vector<double>(b.begin() + p * E, b.begin() + (p + 1) * E), L, E, E);
    std::vector<double> heads(static_cast<size_t>(L * E), 0.0);
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < L; ++i) {
        std::vector<double> score(L);
        double mx = -1e300;
        for (int64_t j = 0; j < L; ++j) {
          double s = 0;
          for (int64_t d = 0; d < D; ++d) s += qkv[0][i * E + h * D + d] * qkv[1][j * E + h * D + d];
          score[j] = (causal && j > i) ? -1e300 : s / std::sqrt(static_cast<double>(D));
          mx = std::max(mx, score[j]);
        }
        double total = 0;
        for (int64_t j = 0; j < L; ++j) total += score[j] <= -1e299 ? 0 : std::exp(score[j] - mx);
        for (int64_t j = 0; j < L; ++j) {
          const double p = score[j] <= -1e299 ? 0 : std::exp(score[j] - mx) / total;
          for (int64_t d = 0; d < D; ++d) heads[i * E + h * D + d] += p * qkv[2][j * E + h * D + d];
        }
      }
    AttentionOptions o;
    o.is_causal = causal;
    BOOST_TEST_CONTEXT("causal " << causal) {
      check_values(mha(x, x, x, o), linear_by_hand(heads, ow, ob, L, E, E), 1e-4);
    }
  }
  BOOST_TEST(contains(error_of([&] { nn::MultiheadAttention::make(6, 4, init); }), "not a multiple of num_heads 4"));
}

BOOST_AUTO_TEST_CASE(state_dicts_use_torch_names_through_a_file) {
  nn::Init init(6);
  const auto mlp = nn::sequential(nn::Linear::make(3, 8, init), nn::ReLU{}, nn::Dropout{0.1}, nn::Linear::make(8, 2, init));
  const StateDict state = nn::state_dict(mlp, "mlp.");
  std::vector<std::string> names;
  for (const auto& [name, t] : state) names.push_back(name);
  BOOST_TEST(names == (std::vector<std::string>{"mlp.0.bias", "mlp.0.weight", "mlp.3.bias", "mlp.3.weight"}));
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("kiln_test_nn_" + std::to_string(::getpid()) + ".safetensors")).string();
  save_state_dict(state, path);
  const StateDict loaded = load_state_dict(path);
  std::filesystem::remove(path);
  const auto back = nn::sequential(nn::Linear::load(loaded, "mlp.0.", 3, 8), nn::ReLU{}, nn::Dropout{0.1},
                                   nn::Linear::load(loaded, "mlp.3.", 8, 2));
  const Tensor x = iota({5, 3});
  check_values(back(x), values(mlp(x)), 0);
  // Shapes are checked by name.
  BOOST_TEST(contains(error_of([&] { nn::Linear::load(loaded, "mlp.0.", 8, 3); }),
                      "tensor 'mlp.0.weight' has shape [8, 3], expected [3, 8]"));
  BOOST_TEST(contains(error_of([&] { nn::LayerNorm::load(loaded, "ln.", {8}); }), "no tensor 'ln.weight'"));
  // Every module writes what its load reads.
  StateDict all;
  const nn::MultiheadAttention mha = nn::MultiheadAttention::make(4, 2, init);
  mha.save(all, "attn.");
  nn::BatchNorm2d::make(3, init).save(all, "bn.");
  nn::Conv2d::make(3, 4, {1, 1}, init).save(all, "conv.");
  nn::ConvTranspose2d::make(3, 4, {2, 2}, init).save(all, "up.");
  BOOST_TEST(all.size() == 12u);
  nn::ConvTranspose2d::load(all, "up.", 3, 4, {2, 2});
  nn::MultiheadAttention::load(all, "attn.", 4, 2);
  nn::BatchNorm2d::load(all, "bn.", 3);
  nn::Conv2d::load(all, "conv.", 3, 4, {1, 1});
}

// State dicts as NumPy writes them: an .npz archive and a folder of NAME.npy files, chosen by the
// path; bf16 comes back as f32 (NumPy has none), everything else as it was saved. Damaged or
// hostile files are errors naming the file and the member.
BOOST_AUTO_TEST_CASE(state_dicts_in_npz_archives_and_npy_folders) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("kiln_test_npz_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  nn::Init init(3);
  StateDict state;
  nn::Linear::make(3, 4, init).save(state, "fc.");
  state["steps"] = from_vector(std::vector<int64_t>{7, 8}, {2});
  state["mask"] = cast(from_vector(std::vector<float>{1, 0, 1}, {3}), DType::bool_);
  state["half"] = from_vector(std::vector<float>{0.5f, -2.0f}, {2}).to(DType::bf16);
  for (const std::string path : {(dir / "w.npz").string(), (dir / "w").string() + "/"}) {
    save_state_dict(state, path);
    const StateDict back = load_state_dict(path);
    BOOST_TEST_REQUIRE(back.size() == state.size(), path);
    for (const auto& [name, t] : state) {
      const Tensor& b = back.at(name);
      BOOST_TEST((b.dtype() == (t.dtype() == DType::bf16 ? DType::f32 : t.dtype())), path << " " << name);
      BOOST_TEST(b.shape() == t.shape(), path << " " << name);
      check_values(b, values(t), 0);
    }
  }
  BOOST_TEST(fs::exists(dir / "w" / "fc.weight.npy"));
  // Names that would leave the folder, metadata that only .safetensors keeps.
  StateDict bad{{"../escape", from_vector(std::vector<float>{1}, {1})}};
  BOOST_TEST(contains(error_of([&] { save_state_dict(bad, (dir / "x").string() + "/"); }),
                      "tensor name '../escape' cannot be a file name"));
  BOOST_TEST(!fs::exists(dir / "escape.npy"));
  BOOST_TEST(contains(error_of([&] { save_state_dict(bad, (dir / "x.npz").string()); }),
                      "tensor name '../escape' cannot be a member name"));
  // An archive keeps names with '/' (ONNX initializers have them), as np.savez does.
  StateDict slash{{"val_1/shape", from_vector(std::vector<int64_t>{2, 3}, {2})}};
  save_state_dict(slash, (dir / "slash.npz").string());
  BOOST_TEST(load_state_dict((dir / "slash.npz").string()).count("val_1/shape") == 1u);
  BOOST_TEST(contains(error_of([&] { save_state_dict(state, (dir / "m.npz").string(), {{"format", "pt"}}); }),
                      "metadata is kept only in .safetensors files"));
  // Not a zip; a zip of other members; a member larger than the memory budget.
  std::ofstream(dir / "junk.npz") << "not a zip archive at all";
  BOOST_TEST(contains(error_of([&] { load_state_dict((dir / "junk.npz").string()); }), "is not a readable zip archive"));
  std::filesystem::copy_file(dir / "w.npz", dir / "renamed.npz");
  {
    std::fstream f(dir / "renamed.npz", std::ios::in | std::ios::out | std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    // Every "fc.bias.npy" name (local header and central directory) becomes "fc.bias.npx".
    for (size_t at = bytes.find("fc.bias.npy"); at != std::string::npos; at = bytes.find("fc.bias.npy", at + 1))
      bytes[at + 10] = 'x';
    f.seekp(0);
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  BOOST_TEST(contains(error_of([&] { load_state_dict((dir / "renamed.npz").string()); }),
                      "member 'fc.bias.npx': not a NAME.npy member"));
  // 0.75 MiB of archive under a 1 MiB budget: the archive is read, its member (held beside it)
  // would pass the budget and is refused before it is decompressed or copied.
  StateDict big{{"big", from_vector(std::vector<float>(3 << 16, 1.0f), {3 << 16})}};
  save_state_dict(big, (dir / "big.npz").string());
  {
    const config::Patch budget({{"memory_budget_mb", int64_t{1}}});
    const std::string e = error_of([&] { load_state_dict((dir / "big.npz").string()); });
    BOOST_TEST(contains(e, "member 'big.npy' would need 768.1 KiB with what is already read"), e);
  }
  BOOST_TEST(contains(error_of([&] { load_state_dict((dir / "empty").string() + "/"); }), "is not a folder of .npy files"));
  fs::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(a_block_of_modules_compiles_with_its_parameters_as_inputs) {
  nn::Init init(9);
  Block block{nn::LayerNorm::make({8}, init), nn::MultiheadAttention::make(8, 2, init),
              nn::sequential(nn::Linear::make(8, 16, init), nn::GELU{}, nn::Linear::make(16, 8, init))};
  auto f = kiln::compile([](const Block& b, const Tensor& x) { return b(x); });
  const Tensor x = iota({2, 5, 8});
  check_values(f(block, x), values(block(x)), 1e-4);
  // Other weights of the same shapes: no recompile, the new values.
  Block other{nn::LayerNorm::make({8}, init), nn::MultiheadAttention::make(8, 2, init),
              nn::sequential(nn::Linear::make(8, 16, init), nn::GELU{}, nn::Linear::make(16, 8, init))};
  check_values(f(other, x), values(other(x)), 1e-4);
  BOOST_TEST(f.stats().compiles == 1);
  // A hyperparameter is guarded: another eps or approximation compiles again.
  other.norm.eps = 1e-3;
  check_values(f(other, x), values(other(x)), 1e-4);
  BOOST_TEST(f.stats().compiles == 2);
  std::get<1>(other.mlp.layers).tanh_approximation = true;
  check_values(f(other, x), values(other(x)), 1e-4);
  BOOST_TEST(f.stats().compiles == 3);
}

// kiln::scope names the ops traced inside it after the scopes (nn::Sequential's layers by index),
// in the graph the debug dump writes; a bad name is an error.
BOOST_AUTO_TEST_CASE(scopes_name_the_traced_ops) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("kiln_nn_scopes_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  nn::Init init(3);
  const auto mlp = nn::sequential(nn::Linear::make(4, 8, init), nn::ReLU{}, nn::Linear::make(8, 2, init));
  auto named = [](const decltype(mlp)& m, const Tensor& x) {
    auto s = kiln::scope("encoder");
    Tensor h;
    {
      auto inner = kiln::scope("mlp");
      h = m(x);
    }
    return exp(h);
  };
  const Tensor x = iota({3, 4});
  {
    config::Patch p({{"debug_dir", dir.string()}});
    auto f = kiln::compile(named);
    check_values(f(mlp, x), values(named(mlp, x)), 1e-5);
  }
  std::string json;
  for (const auto& e : fs::directory_iterator(dir)) json += kiln_test_util::read_file((e.path() / "graph.json").string());
  BOOST_TEST(contains(json, "\"encoder/mlp/0/linear\""), json);
  BOOST_TEST(contains(json, "\"encoder/mlp/1/relu\""), json);
  BOOST_TEST(contains(json, "\"encoder/mlp/2/"), json);
  BOOST_TEST(contains(json, "\"encoder/exp\""), json);
  // compile.json names the lines of this file that traced the nodes: the module's call (not
  // kiln::nn's code inside it) and the exp.
  std::string record;
  for (const auto& e : fs::directory_iterator(dir)) record += kiln_test_util::read_file((e.path() / "compile.json").string());
  // (__FILE__ is relative to the source tree here: -fmacro-prefix-map; the record's path is whole.)
  const size_t end = record.find(std::string("/") + __FILE__ + "\"");
  BOOST_TEST_REQUIRE(end != std::string::npos, record);
  const size_t begin = record.rfind('"', end) + 1;
  const std::string self = kiln_test_util::read_file(record.substr(begin, end + 1 + std::strlen(__FILE__) - begin));
  auto line_of = [&](std::string_view text) {
    const size_t at = self.find(text);
    return at == std::string::npos ? -1 : 1 + static_cast<int>(std::count(self.begin(), self.begin() + static_cast<std::ptrdiff_t>(at), '\n'));
  };
  BOOST_TEST(contains(record, "\"sources_recorded\": true"), record);
  BOOST_TEST(contains(record, "\"line\": " + std::to_string(line_of("h = m(x);")) + ","), record);
  BOOST_TEST(contains(record, "\"line\": " + std::to_string(line_of("return exp(h);")) + ","), record);
  BOOST_TEST(!contains(record, "frontends/cpp/"), record);
  fs::remove_all(dir);
  BOOST_TEST(contains(error_of([] { auto s = kiln::scope("a/b"); }), "a scope name must be non-empty and hold no '/'"));
  BOOST_TEST(contains(error_of([] { auto s = kiln::scope(""); }), "a scope name must be non-empty"));
}

BOOST_AUTO_TEST_SUITE_END()
