// Eigen's Tensor module versions of the workloads it expresses, evaluated on a thread pool
// of all cores: the library baseline Kiln's compiled kernels must beat.
#define EIGEN_USE_THREADS
#include <unsupported/Eigen/CXX11/Tensor>

#include <memory>
#include <thread>

#include "suite.h"

namespace kiln::bench {

namespace {

using Vec = Eigen::TensorMap<Eigen::Tensor<float, 1, Eigen::RowMajor>>;
using CVec = Eigen::TensorMap<const Eigen::Tensor<float, 1, Eigen::RowMajor>>;
using Mat = Eigen::TensorMap<Eigen::Tensor<float, 2, Eigen::RowMajor>>;
using CMat = Eigen::TensorMap<const Eigen::Tensor<float, 2, Eigen::RowMajor>>;
using Dims1 = Eigen::array<Eigen::Index, 1>;
using Dims2 = Eigen::array<Eigen::Index, 2>;

Eigen::ThreadPoolDevice& device() {
  static Eigen::ThreadPool pool(static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
  static Eigen::ThreadPoolDevice dev(&pool, pool.NumThreads());
  return dev;
}

struct Sin {
  float operator()(float v) const { return std::sin(v); }
};
struct Cos {
  float operator()(float v) const { return std::cos(v); }
};
struct GeluTanh {
  float operator()(float v) const {
    return 0.5f * v * (1.0f + std::tanh(0.7978845608028654f * (v + 0.044715f * v * v * v)));
  }
};

}  // namespace

HostImpl eigen_impl(const std::string& name, const std::vector<std::vector<int64_t>>& shapes) {
  const Eigen::Index rows = shapes[0].size() == 2 ? shapes[0][0] : 1;
  const Eigen::Index n = shapes[0].back();
  const Dims2 tile_rows{rows, 1}, col_vec{rows, 1}, tile_cols{1, n};
  const Dims1 last{1};
  if (name == "sincos")
    return [n](const auto& in, const auto& out) {
      CVec x(in[0], n);
      Vec(out[0], n).device(device()) = x.unaryExpr(Sin()) + x.unaryExpr(Cos());
    };
  if (name == "gelu_bias")
    return [=](const auto& in, const auto& out) {
      CMat x(in[0], rows, n);
      CMat b(in[1], 1, n);
      Mat(out[0], rows, n).device(device()) = (x + b.broadcast(tile_rows)).unaryExpr(GeluTanh());
    };
  // Reductions go to temporaries first: inside a broadcast expression Eigen would recompute
  // them for every element, and reading the output while writing it aliases.
  using Rows = Eigen::Tensor<float, 1, Eigen::RowMajor>;
  if (name == "softmax")
    return [=](const auto& in, const auto& out) {
      CMat x(in[0], rows, n);
      Mat y(out[0], rows, n);
      Rows m(rows), s(rows);
      m.device(device()) = x.maximum(last);
      y.device(device()) = (x - m.reshape(col_vec).broadcast(tile_cols)).exp();
      s.device(device()) = y.sum(last);
      y.device(device()) = y / s.reshape(col_vec).broadcast(tile_cols);
    };
  if (name == "rmsnorm")
    return [=](const auto& in, const auto& out) {
      CMat x(in[0], rows, n);
      CMat g(in[1], 1, n);
      Rows r(rows);
      r.device(device()) = ((x * x).mean(last) + 1e-6f).rsqrt();
      Mat(out[0], rows, n).device(device()) = x * r.reshape(col_vec).broadcast(tile_cols) * g.broadcast(tile_rows);
    };
  if (name == "layernorm")
    return [=](const auto& in, const auto& out) {
      CMat x(in[0], rows, n);
      CMat g(in[1], 1, n), b(in[2], 1, n);
      Mat y(out[0], rows, n);
      Rows mean(rows), rstd(rows);
      mean.device(device()) = x.mean(last);
      y.device(device()) = x - mean.reshape(col_vec).broadcast(tile_cols);  // centred
      rstd.device(device()) = ((y * y).mean(last) + 1e-5f).rsqrt();
      y.device(device()) =
          y * rstd.reshape(col_vec).broadcast(tile_cols) * g.broadcast(tile_rows) + b.broadcast(tile_rows);
    };
  if (name == "sum_all")
    return [n](const auto& in, const auto& out) {
      Eigen::TensorMap<Eigen::Tensor<float, 0, Eigen::RowMajor>> total(out[0]);
      total.device(device()) = CVec(in[0], n).sum();
    };
  if (name == "col_sum")
    return [=](const auto& in, const auto& out) {
      Vec(out[0], n).device(device()) = CMat(in[0], rows, n).sum(Dims1{0});
    };
  return {};
}

}  // namespace kiln::bench
