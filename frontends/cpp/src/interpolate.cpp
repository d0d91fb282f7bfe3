// interpolate as a composite: per spatial dim, a few taps (index_select with indices computed
// from the static sizes) weighted and summed, as torch.nn.functional.interpolate computes them.
#include <cmath>
#include <string>
#include <vector>

#include "kiln/graph/error.h"
#include "kiln/ops.h"

namespace kiln {

namespace {

// One dim's taps: for each tap, the input index and the weight of every output position.
struct Taps {
  std::vector<std::vector<int64_t>> index;
  std::vector<std::vector<double>> weight;
};

// torch's area_pixel_compute_source_index, then the mode's neighbours and weights.
Taps taps_for(const std::string& mode, bool align_corners, int64_t in, int64_t out, double ratio) {
  const bool cubic = mode == "bicubic";
  const bool linear = mode == "linear" || mode == "bilinear" || mode == "trilinear";
  const size_t n = cubic ? 4 : linear ? 2 : 1;
  Taps t;
  t.index.assign(n, {});
  t.weight.assign(n, {});
  auto clamp = [in](int64_t i) { return std::min(std::max<int64_t>(i, 0), in - 1); };
  for (int64_t o = 0; o < out; ++o) {
    const double dst = static_cast<double>(o);
    if (n == 1) {  // nearest: floor(dst * ratio); nearest-exact: floor((dst + 0.5) * ratio)
      const double src = mode == "nearest-exact" ? (dst + 0.5) * ratio : dst * ratio;
      t.index[0].push_back(std::min(static_cast<int64_t>(std::floor(src)), in - 1));
      t.weight[0].push_back(1.0);
      continue;
    }
    double src = align_corners ? dst * ratio : (dst + 0.5) * ratio - 0.5;
    if (linear && !align_corners && src < 0) src = 0;  // bicubic extrapolates, linear clamps
    const double fl = std::floor(src);
    const double f = src - fl;
    const int64_t i0 = static_cast<int64_t>(fl);
    if (linear) {
      t.index[0].push_back(clamp(i0));
      t.index[1].push_back(clamp(i0 + 1));
      t.weight[0].push_back(1 - f);
      t.weight[1].push_back(f);
    } else {
      const double a = -0.75;  // torch's cubic convolution coefficient
      auto near = [a](double x) { return ((a + 2) * x - (a + 3)) * x * x + 1; };       // |x| <= 1
      auto far = [a](double x) { return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a; };  // 1 < |x| < 2
      const double w[4] = {far(f + 1), near(f), near(1 - f), far(2 - f)};
      for (size_t k = 0; k < 4; ++k) {
        t.index[k].push_back(clamp(i0 - 1 + static_cast<int64_t>(k)));
        t.weight[k].push_back(w[k]);
      }
    }
  }
  return t;
}

}  // namespace

Tensor interpolate(const Tensor& x, const InterpolateOptions& o) {
  const std::string& mode = o.mode;
  const int64_t spatial = x.rank() - 2;
  KILN_CHECK(spatial >= 1 && spatial <= 3, "interpolate: expects x[N, C, *spatial] with 1 to 3 spatial dims, got rank ",
             x.rank());
  const bool nearest = mode == "nearest" || mode == "nearest-exact";
  const int64_t linear_dims = mode == "linear" ? 1 : mode == "bilinear" ? 2 : mode == "trilinear" ? 3 : 0;
  KILN_CHECK(nearest || linear_dims > 0 || mode == "bicubic", "interpolate: mode '", mode,
             "' is not one of nearest, nearest-exact, linear, bilinear, trilinear, bicubic");
  KILN_CHECK(linear_dims == 0 || linear_dims == spatial, "interpolate: mode '", mode, "' needs ", linear_dims,
             " spatial dims, x has ", spatial);
  KILN_CHECK(mode != "bicubic" || spatial == 2, "interpolate: mode 'bicubic' needs 2 spatial dims, x has ", spatial);
  KILN_CHECK(!o.align_corners || !nearest, "interpolate: align_corners is only for the linear and cubic modes");
  KILN_CHECK(o.size.empty() != o.scale_factor.empty(), "interpolate: give exactly one of size and scale_factor");
  KILN_CHECK(is_floating(x.dtype()) || nearest, "interpolate: mode '", mode, "' needs a floating x, got ",
             dtype_name(x.dtype()));
  auto per_dim = [&](const auto& v, const char* what) {
    KILN_CHECK(v.size() == 1 || static_cast<int64_t>(v.size()) == spatial, "interpolate: ", what, " has ", v.size(),
               " values, expected 1 or ", spatial);
    return [&v](int64_t d) { return v.size() == 1 ? v[0] : v[static_cast<size_t>(d)]; };
  };
  Tensor y = x;
  for (int64_t d = 0; d < spatial; ++d) {
    const int64_t dim = 2 + d;
    const SymInt s = x.shape()[static_cast<size_t>(dim)];
    KILN_CHECK(s.is_static(), "interpolate: spatial dim ", dim, " is dynamic (", s.str(), "); its size must be static");
    const int64_t in = s.hint();
    int64_t out = 0;
    double ratio = 0;  // input positions per output position
    if (!o.size.empty()) {
      out = per_dim(o.size, "size")(d);
      KILN_CHECK(out > 0, "interpolate: output size ", out, " at spatial dim ", d, " is not positive");
      ratio = static_cast<double>(in) / static_cast<double>(out);
    } else {
      const double scale = per_dim(o.scale_factor, "scale_factor")(d);
      KILN_CHECK(scale > 0 && std::isfinite(scale), "interpolate: scale_factor ", scale, " is not positive");
      out = static_cast<int64_t>(std::floor(static_cast<double>(in) * scale));
      KILN_CHECK(out > 0, "interpolate: scale_factor ", scale, " gives an empty output from size ", in);
      ratio = 1.0 / scale;  // torch uses the given scale, not in / out, for the coordinates
    }
    if (o.align_corners) ratio = out > 1 ? static_cast<double>(in - 1) / static_cast<double>(out - 1) : 0.0;
    const Taps taps = taps_for(mode, o.align_corners, in, out, ratio);
    Tensor sum_of_taps;
    for (size_t k = 0; k < taps.index.size(); ++k) {
      const Tensor picked = index_select(y, dim, from_vector(taps.index[k], {}, x.device()));
      if (nearest) {
        sum_of_taps = picked;
        break;
      }
      Shape along(static_cast<size_t>(x.rank()), SymInt(1));
      along[static_cast<size_t>(dim)] = SymInt(out);
      const Tensor w = reshape(from_vector(taps.weight[k], {}, x.device()).to(x.dtype()), along);
      sum_of_taps = k == 0 ? picked * w : sum_of_taps + picked * w;
    }
    y = sum_of_taps;
  }
  return y;
}

}  // namespace kiln
