// Writing, signing and checking plan files (plan_files.h).
#include "plan_files.h"

#include <fstream>
#include <optional>

#include "kiln/cache/cache.h"
#include "kiln/caches.h"
#include "kiln/format/graph_json.h"
#include "kiln/graph/error.h"
#include "kiln/plan/plan_json.h"
#include "kiln/target/target.h"

namespace kiln::cli {

namespace {

// The signer of KILN_CACHE_SECRET, as compiles set it up (null without a secret, or in a build
// without native/cache's HMAC, which warns).
std::optional<cache::Signer> plan_signer() {
  (void)kiln::remote_cache_store();
  return cache::signer();
}

std::string hex(const std::string& bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out += digits[c >> 4];
    out += digits[c & 15];
  }
  return out;
}

}  // namespace

void write_plan_file(const std::string& path, plan::KernelPlan p, const std::string& who) {
  p.signature.clear();
  if (const std::optional<cache::Signer> s = plan_signer()) p.signature = hex(s->mac(plan::plan_signed_text(p)));
  std::ofstream f(path, std::ios::binary);
  f << plan::plan_to_json(p);
  f.close();
  KILN_CHECK(f.good(), who, ": cannot write ", path);
}

void check_plan_may_run(const plan::KernelPlan& p, const std::string& file) {
  const std::string escape =
      " A plan is native code: Kiln runs a plan file only when it makes the same plan from the plan's origin, or "
      "when it is signed with KILN_CACHE_SECRET; run it with --trust-plan if you trust whoever made or edited it.";
  // Signed by the user's secret: trusted as the secret's holders are, whatever it holds.
  std::string signature_note;
  if (!p.signature.empty()) {
    if (const std::optional<cache::Signer> s = plan_signer()) {
      if (cache::equal_in_constant_time(hex(s->mac(plan::plan_signed_text(p))), p.signature)) return;
      signature_note = " Its signature does not verify with KILN_CACHE_SECRET (signed with another secret, or edited "
                       "after it was signed).";
    } else {
      signature_note = " It is signed, but KILN_CACHE_SECRET is not set here to check the signature.";
    }
  }
  KILN_CHECK(!p.origin.empty(), "kiln run: ", file,
             " does not say what made it (it has no 'origin': it was written by a Kiln before plans carried one, or "
             "edited).",
             signature_note, escape);
  const Graph scheduled = format::from_json(p.origin.graph, file + ": origin.graph");
  const plan::KernelPlan made = target::regenerate(target::codegen(p.target), scheduled, p.origin);
  const std::string difference = plan::plan_difference(p, made);
  if (difference.empty()) return;
  const std::string version = cache::kiln_version();
  fail("kiln run: ", file, " is not the plan Kiln makes from its origin: ", difference, " differs",
       p.origin.kiln_version == version ? std::string(" (it was edited after it was made)")
                                        : " (it was made by Kiln " + p.origin.kiln_version + ", this is " + version + ")",
       ".", signature_note, escape);
}

}  // namespace kiln::cli
