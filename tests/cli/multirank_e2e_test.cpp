// End-to-end: 2-rank runs through `dreamddp launch` end with identical parameters on every rank for each policy,
// DDP over 2 ranks equals one process with the double batch, and ranks that disagree on the configuration are
// refused (exit 2) instead of hanging.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <tuple>

#include "tests/cli/cli_run.h"

namespace dd::cli::test {
namespace {

std::vector<float> read_floats(const std::string& path) {
  const std::string b = read_file(path);
  std::vector<float> v(b.size() / sizeof(float));
  std::memcpy(v.data(), b.data(), v.size() * sizeof(float));
  return v;
}

struct PolicyCase {
  std::string name, model, policy;
  int64_t bn_buffers;  // BatchNorm running mean+var floats (docs/cli.md: saved after each BN layer's params)
};
void PrintTo(const PolicyCase& c, std::ostream* os) { *os << c.model << " " << c.policy; }

class SaveParams : public ::testing::TestWithParam<PolicyCase> {};

// Whatever a policy lets diverge during training, the run ends with every rank holding the same model.
TEST_P(SaveParams, RanksEndByteIdentical) {
  const auto& c = GetParam();
  TmpDir tmp;
  const std::string out = tmp / "run";
  auto r = run_dreamddp({"launch", "-n", "2", "--", "train", "--model", c.model, "--policy", c.policy, "--steps",
                         "20", "--batch", c.model == "mlp" ? "64" : "16", "--threads", "1", "--eval-samples",
                         "500", "--out", out, "--save-params", out + "/p%r.bin"},
                        120);
  ASSERT_EQ(r.status, 0) << r.describe();
  auto s = read_json(out + "/summary.json");
  EXPECT_EQ(s.at("world"), 2);
  EXPECT_EQ(s.at("policy"), c.policy);
  EXPECT_GT(s.at("comm_bytes").get<int64_t>(), 0);
  const int64_t params = s.at("params");
  const std::string p0 = read_file(out + "/p0.bin"), p1 = read_file(out + "/p1.bin");
  EXPECT_EQ(int64_t(p0.size()), 4 * (params + c.bn_buffers)) << "float32 parameters plus BatchNorm buffers";
  EXPECT_EQ(p0.size(), p1.size());
  EXPECT_TRUE(p0 == p1) << "rank 0 and rank 1 parameters differ at the end of " << c.policy;
  auto f = read_floats(out + "/p0.bin");
  size_t nonzero = 0;
  for (float x : f) {
    ASSERT_TRUE(std::isfinite(x));
    nonzero += x != 0;
  }
  EXPECT_GT(nonzero, f.size() / 2) << "parameters look unset";
}

INSTANTIATE_TEST_SUITE_P(Cli, SaveParams,
                         ::testing::Values(PolicyCase{"mlp_ddp", "mlp", "ddp", 0},
                                           PolicyCase{"mlp_localsgd", "mlp", "localsgd:k=3", 0},
                                           PolicyCase{"mlp_plsgd", "mlp", "plsgd:h=3", 0},
                                           PolicyCase{"mlp_dreamddp", "mlp", "dreamddp:h=3", 0},
                                           // 3 BN layers of 32, 64, 128 channels: (32+64+128)*2 floats
                                           PolicyCase{"cnn_localsgd", "cnn", "localsgd:k=3", 448}),
                         [](const auto& info) { return info.param.name; });

// docs/cli.md data sharding: DDP on 2 ranks with batch b sees the samples of one process with batch 2b, so the two
// runs compute the same mathematical trajectory and differ only by float32 rounding (two half-batch gradients
// averaged instead of one sum, in whatever order this machine's GEMMs accumulate).
//
// The tolerance is derived from the computation, not tuned to one CPU: a step's gradient is the end of a chain of
// float32 accumulations of length at most n = sum over layers of (fan-in + fan-out) + batch (forward dot products,
// backward dot products, the batch sum of the weight gradient), so its relative error is at most about n*u
// (u = 2^-24, the standard forward error bound gamma_n). Each of the T steps moves a parameter by at most the total
// movement M = max |theta_T - theta_0|, so T steps add at most T * n * u * M. (For the mlp, n = 6978 and T = 20:
// 8.3e-3 * M; measured M = 0.045 gives 3.8e-4, against 8.4e-5 of rounding seen on AVX2 and AVX-512 machines and
// 2e-2 for a wrong sharding.) The negative control shows the bound still catches a sharding bug: with
// DREAMDDP_FAULT_SHARDS=rank0 every rank reads rank 0's slice, and the same comparison must fail.
namespace {
struct DdpRuns {
  std::vector<float> init, one;
  std::vector<float> two(const TmpDir& tmp, const std::string& name, const std::string& env) const;
};
const std::vector<std::string> kDdpCommon = {"--model", "mlp", "--steps", "20", "--threads", "1",
                                             "--eval-samples", "100"};
constexpr double kFloatUnit = 1.0 / (1 << 24);
constexpr int kSteps = 20;
// mlp 784-1024-1024-1024-10, global batch 64: the longest accumulation chain of one step.
constexpr double kChain = (784 + 1024) + (1024 + 1024) + (1024 + 1024) + (1024 + 10) + 64;

std::vector<float> DdpRuns::two(const TmpDir& tmp, const std::string& name, const std::string& env) const {
  const std::string out = tmp / name;
  std::vector<std::string> args = {"launch", "-n", "2", "--", "train", "--batch", "32", "--out", out,
                                   "--save-params", out + "/p.bin"};
  args.insert(args.end(), kDdpCommon.begin(), kDdpCommon.end());
  auto r = run_dreamddp(args, 120, env.empty() ? std::vector<std::string>{} : std::vector<std::string>{env});
  EXPECT_EQ(r.status, 0) << r.describe();
  return read_floats(out + "/p.bin");
}

DdpRuns reference_runs(const TmpDir& tmp) {
  DdpRuns d;
  std::vector<std::string> one = {"train", "--batch", "64", "--out", tmp / "one", "--save-params", tmp / "one/p.bin"};
  one.insert(one.end(), kDdpCommon.begin(), kDdpCommon.end());
  auto b = run_dreamddp(one, 120);
  EXPECT_EQ(b.status, 0) << b.describe();
  // theta_0: one step with a learning rate far below float32 resolution leaves the initial parameters as they are.
  auto i = run_dreamddp({"train", "--model", "mlp", "--steps", "1", "--lr", "1e-30", "--threads", "1", "--batch",
                         "64", "--eval-samples", "10", "--out", tmp / "init", "--save-params", tmp / "init/p.bin"},
                        120);
  EXPECT_EQ(i.status, 0) << i.describe();
  d.one = read_floats(tmp / "one/p.bin");
  d.init = read_floats(tmp / "init/p.bin");
  return d;
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, double(std::fabs(a[i] - b[i])));
  return worst;
}
}  // namespace

TEST(MultiRankE2E, DdpEqualsOneProcessWithTheGlobalBatch) {
  TmpDir tmp;
  const DdpRuns ref = reference_runs(tmp);
  ASSERT_EQ(ref.one.size(), 2913290u);
  ASSERT_EQ(ref.init.size(), ref.one.size());
  const double moved = max_abs_diff(ref.one, ref.init);
  ASSERT_GT(moved, 1e-3) << "the reference run did not train";
  const double tol = kSteps * kChain * kFloatUnit * moved;

  const auto pa = ref.two(tmp, "two", "");
  ASSERT_EQ(pa.size(), ref.one.size());
  EXPECT_LT(max_abs_diff(pa, ref.one), tol) << "largest parameter difference (bound T*n*u*M, M = " << moved << ")";

  // Negative control: the same comparison fails when the shards are wrong.
  const auto bad = ref.two(tmp, "fault", "DREAMDDP_FAULT_SHARDS=rank0");
  ASSERT_EQ(bad.size(), ref.one.size());
  EXPECT_GT(max_abs_diff(bad, ref.one), 10 * tol) << "a sharding bug went unnoticed by the bound";
}

// A 2-rank mlp run with --check-collectives and each rank's final parameters saved: (rank 0's, rank 1's, summary).
struct TwoRankRun {
  std::string p0, p1, err;
  nlohmann::json summary;
};
TwoRankRun run_two_ranks(const TmpDir& tmp, const std::string& name, const std::string& policy) {
  const std::string out = tmp / name;
  auto r = run_dreamddp({"launch", "-n", "2", "--", "train", "--model", "mlp", "--policy", policy, "--steps", "24",
                         "--batch", "32", "--threads", "1", "--eval-samples", "100", "--check-collectives", "--out",
                         out, "--save-params", out + "/p%r.bin"},
                        120);
  EXPECT_EQ(r.status, 0) << r.describe();
  TwoRankRun t{read_file(out + "/p0.bin"), read_file(out + "/p1.bin"), r.err, {}};
  if (r.status == 0) t.summary = read_json(out + "/summary.json");
  return t;
}

// delay=T (averages merged T steps later as corrections): delay=0 is today's run bit for bit; with a delay the
// ranks launch identical collectives (--check-collectives), end with the same model, and train a different
// trajectory (the delay really happened).
TEST(MultiRankE2E, DelayedMergeZeroIsTodayAndDelayedRanksAgree) {
  TmpDir tmp;
  auto run = [&](const std::string& name, const std::string& policy) {
    auto t = run_two_ranks(tmp, name, policy);
    return std::make_pair(t.p0, t.p1);
  };
  const auto today = run("today", "plsgd:h=3");
  const auto zero = run("zero", "plsgd:h=3,delay=0");
  const auto two = run("two", "plsgd:h=3,delay=2");
  const auto dd = run("dd", "dreamddp:h=4,delay=1");
  ASSERT_FALSE(today.first.empty());
  EXPECT_TRUE(zero.first == today.first) << "delay=0 changed the run";
  EXPECT_TRUE(two.first == two.second) << "ranks differ at the end of plsgd:h=3,delay=2";
  EXPECT_TRUE(dd.first == dd.second) << "ranks differ at the end of dreamddp:h=4,delay=1";
  EXPECT_FALSE(two.first == today.first) << "delay=2 trained exactly as delay=0: was anything delayed?";
}

// Transformed merges end to end (--check-collectives on): compress=int8 sends at most 30% of the plain run's bytes
// and compress=topk:p=1 at most 3%
// (summary comm_bytes is what the ranks contributed), the ranks end with the same model, and each transform changes
// the trajectory; localsgd with a delay, an outer optimizer and bf16 together too.
TEST(MultiRankE2E, CompressedAndOuterMergesAgreeAcrossRanksAndShrinkBytes) {
  TmpDir tmp;
  std::string last_err;
  auto run = [&](const std::string& name, const std::string& policy) {
    auto t = run_two_ranks(tmp, name, policy);
    last_err = t.err;
    return std::make_tuple(t.p0, t.p1, t.summary.value("comm_bytes", 0.0));
  };
  const auto [plain0, plain1, plain_bytes] = run("plain", "plsgd:h=3");
  const auto [int8_0, int8_1, int8_bytes] = run("int8", "plsgd:h=3,compress=int8");
  const auto [dl0, dl1, dl_bytes] = run("diloco", "localsgd:k=3,delay=1,outer=nesterov,compress=bf16");
  const auto [tk0, tk1, tk_bytes] = run("topk", "plsgd:h=3,compress=topk:p=1");
  const auto [au0, au1, au_bytes] = run("auto", "plsgd:h=3,compress=auto");
  EXPECT_TRUE(au0 == au1) << "ranks differ at the end of compress=auto";
  // bf16 for the first 10 steps, then int8 for the stale-tolerant layers: between int8's and bf16's bytes.
  EXPECT_LT(au_bytes, 0.5 * plain_bytes);
  EXPECT_GT(au_bytes, int8_bytes);
  EXPECT_NE(last_err.find("compress=auto after 10 steps"), std::string::npos) << last_err;
  ASSERT_FALSE(plain0.empty());
  EXPECT_TRUE(int8_0 == int8_1) << "ranks differ at the end of compress=int8";
  EXPECT_TRUE(dl0 == dl1) << "ranks differ at the end of localsgd:k=3,delay=1,outer=nesterov,compress=bf16";
  EXPECT_FALSE(int8_0 == plain0) << "compress=int8 trained exactly as the plain average: was anything compressed?";
  EXPECT_GT(plain_bytes, 0);
  EXPECT_LE(int8_bytes, 0.30 * plain_bytes) << "int8 bytes " << int8_bytes << " vs plain " << plain_bytes;
  EXPECT_GT(int8_bytes, 0.2 * plain_bytes) << "int8 payloads are about a quarter of float32";
  // topk:p=1 at 2 ranks: one payload of about 5.07 bytes per kept entry, 1% of each layer kept (at least one entry
  // of a small layer): above 1.27% and at most 3% of float32's bytes.
  EXPECT_TRUE(tk0 == tk1) << "ranks differ at the end of compress=topk:p=1";
  EXPECT_FALSE(tk0 == plain0) << "compress=topk trained exactly as the plain average: was anything sparsified?";
  EXPECT_LE(tk_bytes, 0.03 * plain_bytes) << "topk bytes " << tk_bytes << " vs plain " << plain_bytes;
  EXPECT_GT(tk_bytes, 0.0125 * plain_bytes) << "topk bytes " << tk_bytes << " vs plain " << plain_bytes;
}

// Without --rendezvous, Gloo ranks meet in OUT/.rendezvous/JOB: a rerun into the same --out under the same job id
// meets the earlier job's keys and is refused (exit 2, never a hang); a new job id gets a fresh store.
TEST(MultiRankE2E, DefaultStoreIsPerJobAndAStaleOneIsRefused) {
  TmpDir tmp;
  auto train_as = [&](const std::string& job) {
    const std::string cmd = "unset DREAMDDP_RENDEZVOUS; DREAMDDP_JOB=" + job + " exec '" + kBin +
                            "' train --data synthetic --steps 3 --batch 8 --threads 1 --timeout 10 --overwrite --out '" +
                            tmp.path + "/run'";
    return run_dreamddp({"launch", "-n", "2", "--", "/bin/sh", "-c", cmd}, 60);
  };
  auto a = train_as("a");
  ASSERT_EQ(a.status, 0) << a.describe();
  EXPECT_TRUE(std::filesystem::is_directory(tmp / "run/.rendezvous/job-a"));
  auto again = train_as("a");
  ASSERT_FALSE(again.timed_out) << again.describe();
  EXPECT_EQ(again.status, 2) << again.describe();
  EXPECT_NE(again.err.find("earlier job"), std::string::npos) << again.describe();
  auto b = train_as("b");
  EXPECT_EQ(b.status, 0) << b.describe();
}

struct MismatchCase {
  std::string name, field, by_rank;  // by_rank: shell words that differ with $RANK
};
void PrintTo(const MismatchCase& c, std::ostream* os) { *os << c.by_rank; }

class ConfigMismatch : public ::testing::TestWithParam<MismatchCase> {};

TEST_P(ConfigMismatch, IsRefusedNamingTheField) {
  const auto& c = GetParam();
  TmpDir tmp;
  // Each rank writes to its own directory so the refusal comes from the handshake, not from the run directory.
  const std::string cmd = "exec '" + kBin + "' train --steps 5 --threads 1 --eval-samples 50 --out '" +
                          tmp.path + "/r'$RANK " + c.by_rank;
  auto r = run_dreamddp({"launch", "-n", "2", "--", "/bin/sh", "-c", cmd}, 60);
  ASSERT_FALSE(r.timed_out) << "mismatched ranks hung\n" << r.describe();
  EXPECT_EQ(r.status, 2) << r.describe();
  EXPECT_NE(r.err.find("disagree"), std::string::npos) << r.describe();
  EXPECT_NE(r.err.find(c.field + " (rank 0"), std::string::npos) << "the message should name " << c.field << "\n"
                                                                 << r.describe();
}

INSTANTIATE_TEST_SUITE_P(
    Cli, ConfigMismatch,
    ::testing::Values(MismatchCase{"seed", "seed", "--seed $RANK"},
                      MismatchCase{"batch", "batch", "--batch $((32 + RANK))"},
                      MismatchCase{"policy", "policy", "--policy localsgd:k=$((2 + RANK))"},
                      MismatchCase{"model", "model", "--model $([ $RANK = 0 ] && echo mlp || echo cnn)"}),
    [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace dd::cli::test
