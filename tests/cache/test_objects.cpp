// The cpu runtime's object export and import (what the plan cache stores): JitModule::object()
// and load_object(), PlanExecutable::objects() and load_compiled(), on the sample graphs.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "kiln/cpu/codegen.h"
#include "kiln/cpu/executable.h"
#include "kiln/cpu/jit.h"
#include "kiln/format/graph_json.h"
#include "kiln/graph/error.h"
#include "kiln/passes/passes.h"
#include "kiln/eval/random.h"
#include "kiln/schedule/schedule.h"

using namespace kiln;

namespace {

const char* kScaleKernel = R"(
define void @scale(ptr %out, ptr %a, i64 %n) {
entry:
  %nonempty = icmp sgt i64 %n, 0
  br i1 %nonempty, label %loop, label %exit
loop:
  %i = phi i64 [ 0, %entry ], [ %next, %loop ]
  %pa = getelementptr inbounds float, ptr %a, i64 %i
  %va = load float, ptr %pa, align 4
  %e = call float @expf(float %va)
  %r = fmul float %e, 3.0
  %po = getelementptr inbounds float, ptr %out, i64 %i
  store float %r, ptr %po, align 4
  %next = add nuw nsw i64 %i, 1
  %done = icmp eq i64 %next, %n
  br i1 %done, label %exit, label %loop
exit:
  ret void
}
declare float @expf(float)
@table = global [4 x i32] [i32 1, i32 2, i32 3, i32 4]
)";

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TensorData random_input(const TensorMeta& m, uint64_t seed) {
  std::vector<int64_t> sizes;
  for (const SymInt& s : m.sizes) sizes.push_back(s.hint());
  TensorData t = TensorData::empty_host(m.dtype, sizes);
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (m.dtype == DType::f32) t.data_as<float>()[i] = eval::randn_at(seed, static_cast<uint64_t>(i));
    else if (m.dtype == DType::i64) t.data_as<int64_t>()[i] = i % 4;  // other dtypes: zeros
  }
  return t;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(objects)

BOOST_AUTO_TEST_CASE(jit_module_object_round_trip) {
  using Fn = void(float*, const float*, int64_t);
  auto m = cpu::JitModule::compile(kScaleKernel, "scale");
  const std::string& object = m->object();
  BOOST_REQUIRE(object.size() > 64);
  BOOST_TEST(object.compare(0, 4, "\x7f" "ELF") == 0);
  auto loaded = cpu::JitModule::load_object(object, "scale_again");
  BOOST_TEST(loaded->object() == object);
  std::vector<float> a(1000), x(1000), y(1000);
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(i % 13) * 0.1f - 0.5f;
  m->function<Fn>("scale")(x.data(), a.data(), 1000);
  loaded->function<Fn>("scale")(y.data(), a.data(), 1000);
  BOOST_TEST(std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0);
  BOOST_TEST(x[7] == std::exp(a[7]) * 3.0f);
  // Globals are defined too, and the loaded module is independent of the first.
  BOOST_TEST(static_cast<int*>(loaded->lookup("table"))[2] == 3);
  BOOST_TEST(loaded->lookup("table") != m->lookup("table"));
  m.reset();
  loaded->function<Fn>("scale")(y.data(), a.data(), 1000);
  BOOST_TEST(std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0);
  BOOST_TEST(loaded->find("nothing") == nullptr);
}

BOOST_AUTO_TEST_CASE(load_object_refuses_what_is_not_an_object) {
  const std::string msg = error_of([] { (void)cpu::JitModule::load_object("certainly not ELF", "junk"); });
  BOOST_TEST(msg.rfind("cpu JIT: module 'junk': not an object file: ", 0) == 0, msg);
  BOOST_TEST(!error_of([] { (void)cpu::JitModule::load_object("", "empty"); }).empty());
}

BOOST_AUTO_TEST_CASE(plan_executables_round_trip_through_objects) {
  for (const char* name : {"softmax", "layernorm", "mlp", "transformer_block", "dynamic_softmax"}) {
    BOOST_TEST_CONTEXT("graph " << name) {
      const Graph g = format::load_graph(std::string(KILN_SOURCE_DIR) + "/samples/graphs/" + name + ".json");
      const Graph opt = passes::run_default_pipeline(g);
      const plan::KernelPlan p = cpu::generate(schedule::schedule_graph(opt));
      auto fresh = cpu::PlanExecutable::load(p);
      const std::vector<std::string> objects = fresh->objects();
      BOOST_TEST(!objects.empty());
      auto linked = cpu::PlanExecutable::load_compiled(p, objects);
      BOOST_TEST(linked->objects() == objects);
      std::vector<TensorData> inputs;
      uint64_t seed = 1;
      for (NodeId i : opt.inputs()) inputs.push_back(random_input(opt.node(i).meta, seed++));
      const std::vector<TensorData> a = fresh->run(inputs), b = linked->run(inputs);
      BOOST_REQUIRE(a.size() == b.size());
      for (size_t k = 0; k < a.size(); ++k) {
        BOOST_REQUIRE(a[k].sizes == b[k].sizes);
        BOOST_REQUIRE(a[k].is_contiguous());
        BOOST_REQUIRE(b[k].is_contiguous());
        const size_t bytes = static_cast<size_t>(a[k].numel()) * dtype_size(a[k].dtype);
        BOOST_TEST(std::memcmp(a[k].data_as<char>(), b[k].data_as<char>(), bytes) == 0);
      }
      BOOST_TEST_MESSAGE(name << ": compile " << fresh->compile_seconds() * 1e3 << " ms, link from objects "
                              << linked->compile_seconds() * 1e3 << " ms");
      BOOST_TEST(linked->compile_seconds() < fresh->compile_seconds());
      // Objects of another plan do not define this plan's kernels.
      if (std::string(name) == "mlp") {
        const Graph other = passes::run_default_pipeline(
            format::load_graph(std::string(KILN_SOURCE_DIR) + "/samples/graphs/softmax.json"));
        const plan::KernelPlan q = cpu::generate(schedule::schedule_graph(other));
        const std::vector<std::string> wrong = cpu::PlanExecutable::load(q)->objects();
        const std::string msg = error_of([&] { (void)cpu::PlanExecutable::load_compiled(p, wrong); });
        BOOST_TEST(msg.find("no module defines") != std::string::npos, msg);
      }
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()
