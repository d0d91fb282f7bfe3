// Guards: every kind fires with its sentence, the counters and recompile reasons of
// kiln::compile, and GuardSet used directly on a hand-built Graph.
#include <limits>

#include "helpers.h"

using namespace kiln;
using namespace capture_test;

BOOST_FIXTURE_TEST_SUITE(guards, Clean)

// The exact sentence the issue asks for, kept in recompile_reasons.
BOOST_AUTO_TEST_CASE(size_guard_message_is_exact) {
  auto f = kiln::compile([](const Tensor& x) { return x * 2; }, CompileOptions{.arg_names = {"x"}});
  const Tensor a = ones({1024});
  const Tensor b = ones({2048});
  check_values(sum(f(a)), {2048});
  check_values(sum(f(b)), {4096});
  const CompileStats s = f.stats();
  BOOST_REQUIRE_EQUAL(s.recompile_reasons.size(), 1u);
  BOOST_TEST(s.recompile_reasons[0] == "input 0 (x): size mismatch at dim 0: expected 1024, got 2048");
  BOOST_TEST(s.compiles == 2);
  BOOST_TEST(s.recompiles == 1);
  BOOST_TEST(s.cache_hits == 0);
  BOOST_TEST(s.guard_failures == 1);
}

// Without arg_names the label is just "input N".
BOOST_AUTO_TEST_CASE(size_guard_without_names) {
  auto f = kiln::compile([](const Tensor& x, const Tensor& y) { return x + y; },
                         CompileOptions{.dynamic = false});
  f(ones({4}), ones({4}));
  f(ones({4}), ones({1}));
  const CompileStats s = f.stats();
  BOOST_REQUIRE_EQUAL(s.recompile_reasons.size(), 1u);
  BOOST_TEST(s.recompile_reasons[0] == "input 1: size mismatch at dim 0: expected 4, got 1");
}

// Counters, exactly: hits, misses, recompiles, and an older entry still serving its shapes.
BOOST_AUTO_TEST_CASE(counters_are_exact) {
  auto f = kiln::compile([](const Tensor& x) { return x + 1; }, CompileOptions{.dynamic = false});
  const Tensor a = iota_f32(4);
  const Tensor b = iota_f32(8);
  check_values(f(a), {2, 3, 4, 5});
  CompileStats s = f.stats();
  BOOST_TEST(s.compiles == 1);
  BOOST_TEST(s.recompiles == 0);
  BOOST_TEST(s.cache_hits == 0);
  BOOST_TEST(s.guard_failures == 0);
  BOOST_TEST(s.eager_calls == 0);
  BOOST_TEST(s.recompile_reasons.empty());

  check_values(f(a), {2, 3, 4, 5});
  s = f.stats();
  BOOST_TEST(s.compiles == 1);
  BOOST_TEST(s.cache_hits == 1);

  check_values(f(b), mapped(8, [](double v) { return v + 1; }));
  s = f.stats();
  BOOST_TEST(s.compiles == 2);
  BOOST_TEST(s.recompiles == 1);
  BOOST_TEST(s.guard_failures == 1);
  BOOST_TEST(s.cache_hits == 1);

  // Both shapes are now served: the older entry behind the newer one.
  check_values(f(a), {2, 3, 4, 5});
  check_values(f(b), mapped(8, [](double v) { return v + 1; }));
  s = f.stats();
  BOOST_TEST(s.compiles == 2);
  BOOST_TEST(s.recompiles == 1);
  BOOST_TEST(s.guard_failures == 1);
  BOOST_TEST(s.cache_hits == 3);
  BOOST_TEST(s.eager_calls == 0);
  BOOST_TEST(s.graph_breaks == 0);
  BOOST_TEST(accumulated_compiles() == 2);
}

BOOST_AUTO_TEST_CASE(dtype_guard) {
  auto f = kiln::compile([](const Tensor& x) { return x * 2; }, CompileOptions{.arg_names = {"x"}});
  check_values(f(from_vector<float>({1, 2})), {2, 4});
  const Tensor y = f(from_vector<int32_t>({1, 2}));
  BOOST_TEST(y.dtype() == DType::i32);
  check_values(y, {2, 4});
  const CompileStats s = f.stats();
  BOOST_REQUIRE_EQUAL(s.recompile_reasons.size(), 1u);
  BOOST_TEST(s.recompile_reasons[0] == "input 0 (x): dtype mismatch: expected f32, got i32");
  BOOST_TEST(s.compiles == 2);
}

BOOST_AUTO_TEST_CASE(rank_guard) {
  auto f = kiln::compile([](const Tensor& x) { return x * 2; }, CompileOptions{.arg_names = {"x"}});
  f(ones({4}));
  const Tensor y = f(ones({4, 2}));
  BOOST_TEST(sizes_of(y) == (std::vector<int64_t>{4, 2}));
  const CompileStats s = f.stats();
  BOOST_REQUIRE_EQUAL(s.recompile_reasons.size(), 1u);
  BOOST_TEST(s.recompile_reasons[0] == "input 0 (x): rank mismatch: expected 1, got 2");
}

// A traced graph assumed a contiguous input; a transposed view of the same sizes fails that.
BOOST_AUTO_TEST_CASE(contiguity_guard) {
  auto f = kiln::compile([](const Tensor& x) { return x + 0; }, CompileOptions{.arg_names = {"x"}});
  const Tensor c = reshape(iota_f32(6), {2, 3});
  const Tensor t = transpose(reshape(iota_f32(6), {3, 2}), 0, 1);  // [2, 3], strides [1, 2]
  BOOST_REQUIRE(!t.data().is_contiguous());
  check_values(f(c), {1, 2, 3, 4, 5, 6});
  check_values(f(t), {1, 3, 5, 2, 4, 6});
  const CompileStats s = f.stats();
  BOOST_REQUIRE_EQUAL(s.recompile_reasons.size(), 1u);
  BOOST_TEST(s.recompile_reasons[0] == "input 0 (x): expected a contiguous tensor, got strides [1, 2]");
  BOOST_TEST(s.compiles == 2);
  // Each layout now has its entry.
  check_values(f(c), {1, 2, 3, 4, 5, 6});
  check_values(f(t), {1, 3, 5, 2, 4, 6});
  BOOST_TEST(f.stats().compiles == 2);
  BOOST_TEST(f.stats().cache_hits == 2);
}

// Non-contiguous inputs are specialised on their strides.
BOOST_AUTO_TEST_CASE(stride_guard) {
  auto f = kiln::compile([](const Tensor& x) { return x * 1; }, CompileOptions{.arg_names = {"x"}});
  const Tensor t = transpose(reshape(iota_f32(8), {4, 2}), 0, 1);  // [2, 4], strides [1, 2]
  const Tensor s2 = slice(reshape(iota_f32(16), {2, 8}), 1, 0, 8, 2);  // [2, 4], strides [8, 2]
  check_values(f(t), {1, 3, 5, 7, 2, 4, 6, 8});
  check_values(f(s2), {1, 3, 5, 7, 9, 11, 13, 15});
  const CompileStats s = f.stats();
  BOOST_REQUIRE_EQUAL(s.recompile_reasons.size(), 1u);
  BOOST_TEST(s.recompile_reasons[0] == "input 0 (x): stride mismatch at dim 0: expected 1, got 8");
}

BOOST_AUTO_TEST_CASE(scalar_int_guard) {
  auto f = kiln::compile([](const Tensor& x, int64_t k) { return x * static_cast<double>(k); },
                         CompileOptions{.arg_names = {"x", "k"}});
  const Tensor x = iota_f32(3);
  check_values(f(x, int64_t{2}), {2, 4, 6});
  check_values(f(x, int64_t{2}), {2, 4, 6});
  check_values(f(x, int64_t{3}), {3, 6, 9});
  const CompileStats s = f.stats();
  BOOST_REQUIRE_EQUAL(s.recompile_reasons.size(), 1u);
  BOOST_TEST(s.recompile_reasons[0] == "input 1 (k): value mismatch: expected 2, got 3");
  BOOST_TEST(s.compiles == 2);
  BOOST_TEST(s.cache_hits == 1);
}

BOOST_AUTO_TEST_CASE(scalar_double_guard) {
  auto f = kiln::compile([](const Tensor& x, double k) { return x * k; });
  const Tensor x = iota_f32(3);
  check_values(f(x, 0.5), {0.5, 1, 1.5});
  check_values(f(x, 0.5), {0.5, 1, 1.5});  // same value: a hit
  check_values(f(x, 0.25), {0.25, 0.5, 0.75});
  const CompileStats s = f.stats();
  BOOST_REQUIRE_EQUAL(s.recompile_reasons.size(), 1u);
  BOOST_TEST(s.recompile_reasons[0] == "input 1: value mismatch: expected 0.5, got 0.25");
  BOOST_TEST(s.compiles == 2);
  BOOST_TEST(s.cache_hits == 1);
  // NaN is guarded bitwise, so a NaN argument hits its own entry.
  const double nan = std::numeric_limits<double>::quiet_NaN();
  f(x, nan);
  f(x, nan);
  BOOST_TEST(f.stats().compiles == 3);
  BOOST_TEST(f.stats().cache_hits == 2);
}

BOOST_AUTO_TEST_CASE(scalar_bool_guard) {
  auto f = kiln::compile([](const Tensor& x, bool negate) { return negate ? -x : x + 0; });
  const Tensor x = iota_f32(2);
  check_values(f(x, true), {-1, -2});
  check_values(f(x, false), {1, 2});
  check_values(f(x, true), {-1, -2});
  const CompileStats s = f.stats();
  BOOST_REQUIRE_EQUAL(s.recompile_reasons.size(), 1u);
  BOOST_TEST(s.recompile_reasons[0] == "input 1: value mismatch: expected true, got false");
  BOOST_TEST(s.compiles == 2);
  BOOST_TEST(s.cache_hits == 1);
}

// A generic function called with an int, then a double, in the same argument slot.
BOOST_AUTO_TEST_CASE(arg_kind_guard) {
  auto f = kiln::compile([](const Tensor& x, auto k) { return x * static_cast<double>(k); });
  const Tensor x = iota_f32(2);
  check_values(f(x, int64_t{2}), {2, 4});
  check_values(f(x, 1.5), {1.5, 3});
  const CompileStats s = f.stats();
  BOOST_REQUIRE_EQUAL(s.recompile_reasons.size(), 1u);
  BOOST_TEST(s.recompile_reasons[0] == "input 1: expected an integer, got a double");
}

// Only CPU tensors can be made by the API, so the device guard is driven with a tensor whose
// storage claims to be on cuda:0 (its bytes are never read: fail_on_recompile throws before
// anything would run on it).
BOOST_AUTO_TEST_CASE(device_guard) {
  auto f = kiln::compile([](const Tensor& x) { return x * 2; }, CompileOptions{.arg_names = {"x"}});
  f(ones({4}));
  std::vector<float> host(4, 1.0f);
  TensorData fake;
  fake.storage = std::make_shared<Storage>(Device::cuda(0), host.data(), host.size() * sizeof(float),
                                           [](void*) {});
  fake.dtype = DType::f32;
  fake.sizes = {4};
  fake.strides = {1};
  const Tensor on_gpu = Tensor::from_data(fake);
  BOOST_REQUIRE(on_gpu.device() == Device::cuda(0));
  ScopedStance stance(Stance::fail_on_recompile);
  const std::string msg = error_of([&] { f(on_gpu); });
  BOOST_TEST(contains(msg, "input 0 (x): device mismatch: expected cpu, got cuda:0"), msg);
}

// Two dynamic inputs whose sizes were equated by broadcasting: the graph relies on s0 == s1.
BOOST_AUTO_TEST_CASE(shape_fact_guard) {
  auto f = kiln::compile([](const Tensor& x, const Tensor& y) { return x + y; },
                         CompileOptions{.dynamic = true, .arg_names = {"x", "y"}});
  check_values(f(iota_f32(4), iota_f32(4)), {2, 4, 6, 8});
  check_values(f(iota_f32(6), iota_f32(6)), {2, 4, 6, 8, 10, 12});
  BOOST_TEST(f.stats().compiles == 1);
  BOOST_TEST(f.stats().cache_hits == 1);
  // Unequal sizes pass each size guard but not the relation; retracing then finds that they
  // do not broadcast, which is the user's error.
  const std::string msg = error_of([&] { f(iota_f32(6), iota_f32(5)); });
  BOOST_TEST(contains(msg, "add"), msg);
  const CompileStats s = f.stats();
  BOOST_REQUIRE_EQUAL(s.recompile_reasons.size(), 1u);
  BOOST_TEST(s.recompile_reasons[0] == "shape relation s0 == s1 no longer holds (6 vs 5; needed by add)");
  BOOST_TEST(s.guard_failures == 1);
  // The failed call left the cache usable.
  check_values(f(iota_f32(3), iota_f32(3)), {2, 4, 6});
  BOOST_TEST(f.stats().compiles == 1);
}

// An option that affects code generation is part of the guards; other options are not.
BOOST_AUTO_TEST_CASE(config_guard) {
  auto f = kiln::compile([](const Tensor& x) { return x * 3; });
  const Tensor x = iota_f32(3);
  check_values(f(x), {3, 6, 9});
  config::set("recompile_limit", 5);
  check_values(f(x), {3, 6, 9});
  BOOST_TEST(f.stats().compiles == 1);
  BOOST_TEST(f.stats().cache_hits == 1);

  config::set("fusion.max_fusion_size", 32);
  check_values(f(x), {3, 6, 9});
  CompileStats s = f.stats();
  BOOST_TEST(s.compiles == 2);
  BOOST_TEST(s.recompiles == 1);
  BOOST_REQUIRE_EQUAL(s.recompile_reasons.size(), 1u);
  BOOST_TEST(s.recompile_reasons[0] ==
             "config options that affect code generation changed since this graph was compiled");
  check_values(f(x), {3, 6, 9});
  BOOST_TEST(f.stats().compiles == 2);

  // Back to the first value: the first entry matches again.
  config::set("fusion.max_fusion_size", 64);
  check_values(f(x), {3, 6, 9});
  BOOST_TEST(f.stats().compiles == 2);
  BOOST_TEST(f.stats().cache_hits == 3);

  // A scoped Patch counts as well.
  {
    config::Patch p({{"fusion.epilogue_fusion", false}});
    check_values(f(x), {3, 6, 9});
    BOOST_TEST(f.stats().compiles == 3);
  }
  check_values(f(x), {3, 6, 9});
  BOOST_TEST(f.stats().compiles == 3);
}

// ---- GuardSet on its own ---------------------------------------------------------------

namespace {
TensorData host(DType dtype, std::vector<int64_t> sizes) { return TensorData::empty_host(dtype, std::move(sizes)); }
ArgView tensor_arg(const TensorData& t) { return ArgView{.kind = ArgView::Kind::tensor, .tensor = &t}; }
}  // namespace

BOOST_AUTO_TEST_CASE(guard_set_direct) {
  Graph g;
  TensorMeta mx;
  mx.sizes = {g.shapes().create_symbol(8, 2, 100, "input 0 (x) dim 0", false), 4};
  TensorMeta my;
  my.sizes = {g.shapes().create_symbol(8, 2, std::numeric_limits<int64_t>::max(), "input 1 (y) dim 0", false), 4};
  const NodeId x = g.add_input(mx, "x");
  const NodeId y = g.add_input(my, "y");
  g.set_outputs({g.add(OpId::add, {x, y})});
  BOOST_REQUIRE_EQUAL(g.shapes().facts().size(), 1u);

  const TensorData a = host(DType::f32, {8, 4});
  const TensorData b = host(DType::f32, {8, 4});
  std::vector<ArgView> args{tensor_arg(a), tensor_arg(b), ArgView{.kind = ArgView::Kind::int_, .i = 5}};
  const std::vector<int32_t> tensor_args{0, 1};
  const GuardSet gs = GuardSet::build(g, args, tensor_args, {"x", "y"}, config::codegen_hash());
  BOOST_TEST(gs.num_symbols() == 2u);

  std::vector<int64_t> symbols(gs.num_symbols(), -1);
  BOOST_TEST(gs.check(args, symbols.data()));
  BOOST_TEST(symbols == (std::vector<int64_t>{8, 8}));
  BOOST_TEST(!gs.failure(args).has_value());
  BOOST_TEST(gs.first_failure(args) == -1);

  // Other sizes within the ranges bind the symbols.
  const TensorData a20 = host(DType::f32, {20, 4});
  const TensorData b20 = host(DType::f32, {20, 4});
  std::vector<ArgView> ok{tensor_arg(a20), tensor_arg(b20), args[2]};
  BOOST_TEST(gs.check(ok, symbols.data()));
  BOOST_TEST(symbols == (std::vector<int64_t>{20, 20}));

  auto failure_with = [&](std::vector<ArgView> v) {
    BOOST_TEST(!gs.check(v, symbols.data()));
    BOOST_TEST(gs.first_failure(v) >= 0);
    return gs.failure(v).value_or("<passed>");
  };
  const TensorData big = host(DType::f32, {200, 4});
  BOOST_TEST(failure_with({tensor_arg(big), tensor_arg(b), args[2]}) ==
             "input 0 (x): size at dim 0 is 200, outside the range [2, 100] of its dynamic size s0");
  const TensorData b16 = host(DType::f32, {16, 4});
  BOOST_TEST(failure_with({tensor_arg(a), tensor_arg(b16), args[2]}) ==
             "shape relation s0 == s1 no longer holds (8 vs 16; needed by add)");
  const TensorData a5 = host(DType::f32, {8, 5});
  BOOST_TEST(failure_with({tensor_arg(a5), tensor_arg(b), args[2]}) ==
             "input 0 (x): size mismatch at dim 1: expected 4, got 5");
  const TensorData ai = host(DType::i32, {8, 4});
  BOOST_TEST(failure_with({tensor_arg(ai), tensor_arg(b), args[2]}) ==
             "input 0 (x): dtype mismatch: expected f32, got i32");
  const TensorData r3 = host(DType::f32, {8, 4, 1});
  BOOST_TEST(failure_with({tensor_arg(a), tensor_arg(r3), args[2]}) == "input 1 (y): rank mismatch: expected 2, got 3");
  BOOST_TEST(failure_with({tensor_arg(a), tensor_arg(b), ArgView{.kind = ArgView::Kind::int_, .i = 6}}) ==
             "input 2: value mismatch: expected 5, got 6");
  BOOST_TEST(failure_with({tensor_arg(a), tensor_arg(b), ArgView{.kind = ArgView::Kind::bool_, .b = true}}) ==
             "input 2: expected an integer, got a bool");
  BOOST_TEST(failure_with({ArgView{.kind = ArgView::Kind::double_, .d = 1.0}, tensor_arg(b), args[2]}) ==
             "input 0 (x): expected a tensor, got a double");
  TensorData strided = host(DType::f32, {4, 8});
  strided.sizes = {8, 4};
  strided.strides = {1, 8};
  BOOST_TEST(failure_with({tensor_arg(strided), tensor_arg(b), args[2]}) ==
             "input 0 (x): expected a contiguous tensor, got strides [1, 8]");
  {
    config::Patch p({{"fusion.max_fusion_size", 7}});
    BOOST_TEST(failure_with(args) == "config options that affect code generation changed since this graph was compiled");
  }
  BOOST_TEST(gs.check(args, symbols.data()));

  // One guard a line, readable.
  const std::string text = gs.str();
  BOOST_TEST_MESSAGE(text);
  for (const char* line : {"input 0 (x) is a tensor", "input 0 (x) dtype == f32", "input 0 (x) device == cpu",
                           "input 0 (x) rank == 2", "input 0 (x) size[0] == s0 in [2, 100]", "input 0 (x) size[1] == 4",
                           "input 0 (x) is contiguous", "input 2 is an integer", "input 2 == 5", "s0 == s1",
                           "codegen config hash =="})
    BOOST_TEST(contains(text, line), "missing guard line: " << line);
  BOOST_TEST(count_of(text, "\n") == gs.guards().size());
  BOOST_TEST(gs.arg_label(1) == "input 1 (y)");
  BOOST_TEST(gs.arg_label(2) == "input 2");
}

// A non-contiguous input's strides are guarded one dim at a time.
BOOST_AUTO_TEST_CASE(guard_set_strides) {
  Graph g;
  TensorMeta m;
  m.sizes = {2, 3};
  m.strides = {1, 2};
  g.set_outputs({g.add_input(m, "t")});
  TensorData t = host(DType::f32, {3, 2});
  t.sizes = {2, 3};
  t.strides = {1, 2};
  std::vector<ArgView> args{tensor_arg(t)};
  const std::vector<int32_t> tensor_args{0};
  const GuardSet gs = GuardSet::build(g, args, tensor_args, {}, config::codegen_hash());
  std::vector<int64_t> symbols(1);
  BOOST_TEST(gs.check(args, symbols.data()));
  BOOST_TEST(contains(gs.str(), "input 0 stride[0] == 1"));
  BOOST_TEST(contains(gs.str(), "input 0 stride[1] == 2"));
  TensorData u = t;
  u.strides = {3, 1};
  std::vector<ArgView> other{tensor_arg(u)};
  BOOST_TEST(!gs.check(other, symbols.data()));
  BOOST_TEST(gs.failure(other).value_or("") == "input 0: stride mismatch at dim 0: expected 1, got 3");
}

// A device guard on its own (the fake device storage is never read).
BOOST_AUTO_TEST_CASE(guard_set_device) {
  Graph g;
  TensorMeta m;
  m.sizes = {4};
  g.set_outputs({g.add_input(m, "x")});
  const TensorData cpu = host(DType::f32, {4});
  std::vector<ArgView> args{tensor_arg(cpu)};
  const std::vector<int32_t> tensor_args{0};
  const GuardSet gs = GuardSet::build(g, args, tensor_args, {"x"}, config::codegen_hash());
  TensorData gpu = cpu;
  gpu.storage = std::make_shared<Storage>(Device::cuda(1), cpu.storage->data(), 16, [](void*) {});
  std::vector<ArgView> other{tensor_arg(gpu)};
  std::vector<int64_t> symbols(1);
  BOOST_TEST(!gs.check(other, symbols.data()));
  BOOST_TEST(gs.failure(other).value_or("") == "input 0 (x): device mismatch: expected cpu, got cuda:1");
}

BOOST_AUTO_TEST_SUITE_END()
