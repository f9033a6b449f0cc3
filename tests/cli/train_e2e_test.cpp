// End-to-end: short single-process training runs of the binary learn (loss falls, test accuracy rises), write
// the docs/cli.md summary.json and a readable metrics.h5, and read the same options from an INI file.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <utility>

#include "tests/cli/cli_run.h"

namespace dd::cli::test {
namespace {

// Reads /steps of metrics.h5 with h5py (the analysis side's reader), so the file is checked as users read it.
nlohmann::json steps_table_stats(const std::string& h5) {
  const std::string py =
      "import h5py, json, sys\n"
      "s = h5py.File(sys.argv[1], 'r')['/steps'][:]\n"
      "loss = [float(x) for x in s['loss']]\n"
      "print(json.dumps({'rows': len(s), 'first5': sum(loss[:5]) / 5, 'last20': sum(loss[-20:]) / 20,\n"
      "                  'steps': [int(x) for x in s['step']], 'finite': all(x == x for x in loss)}))\n";
  auto r = run_program("/usr/bin/python3", {"-c", py, h5}, 60);
  if (r.status != 0) throw std::runtime_error("reading " + h5 + " with h5py failed\n" + r.describe());
  return nlohmann::json::parse(r.last_stdout_line());
}

TEST(TrainE2E, MlpFashionMnistLearnsAndWritesTheContractFiles) {
  TmpDir tmp;
  const std::string out = tmp / "run";
  const int steps = 150;
  auto r = run_dreamddp({"train", "--model", "mlp", "--data", "fashion-mnist", "--steps", std::to_string(steps),
                         "--batch", "64", "--threads", "1", "--eval-samples", "500", "--out", out},
                        120);
  ASSERT_EQ(r.status, 0) << r.describe();

  auto s = read_json(out + "/summary.json");
  for (auto& k : summary_keys()) EXPECT_TRUE(s.contains(k)) << "summary.json lacks '" << k << "': " << s.dump();
  EXPECT_EQ(nlohmann::json::parse(r.last_stdout_line()), s) << "the last stdout line is the summary";
  EXPECT_EQ(s.at("model"), "mlp");
  EXPECT_EQ(s.at("policy"), "ddp");
  EXPECT_EQ(s.at("world"), 1);
  EXPECT_EQ(s.at("steps"), steps);
  EXPECT_EQ(s.at("params"), 2913290);  // docs/cli.md reference-model size
  EXPECT_EQ(s.at("comm_bytes"), 0) << "a single process communicates nothing";
  EXPECT_GT(s.at("samples_per_s").get<double>(), 0);
  EXPECT_EQ(s.at("timed_steps"), nlohmann::json::array({5, steps})) << "ddp: timed after a 5-step warm-up to the end";
  const double ecf = s.at("exposed_comm_fraction");
  EXPECT_TRUE(ecf >= 0 && ecf <= 1) << ecf;
  EXPECT_GT(s.at("test_accuracy").get<double>(), 0.6);
  EXPECT_TRUE(std::isfinite(s.at("final_loss").get<double>()));

  auto t = steps_table_stats(out + "/metrics.h5");
  EXPECT_EQ(t.at("rows"), steps) << "one /steps row per step";
  EXPECT_TRUE(t.at("finite").get<bool>());
  const double first = t.at("first5"), last = t.at("last20");
  EXPECT_LT(last, 0.5 * first) << "loss should fall well below its start (first 5 steps " << first
                               << ", last 20 " << last << ")";
  EXPECT_LT(last, 1.0);
  auto st = t.at("steps").get<std::vector<int64_t>>();
  for (size_t i = 1; i < st.size(); ++i) ASSERT_EQ(st[i], st[i - 1] + 1) << "steps are consecutive at row " << i;

  auto h = run_program("h5dump", {"-H", out + "/metrics.h5"}, 30);
  EXPECT_EQ(h.status, 0) << h.describe();
}

// The same run configured by flags and by an INI file gives the same result; flags override the file.
TEST(TrainE2E, ConfigFileGivesTheSameRunAsFlags) {
  TmpDir tmp;
  const std::vector<std::string> flags = {"--model", "cnn", "--steps", "4", "--batch", "16", "--seed", "3",
                                          "--lr", "0.02", "--policy", "localsgd:k=2", "--threads", "1",
                                          "--eval-samples", "50"};
  auto by_flags = flags;
  by_flags.insert(by_flags.begin(), "train");
  by_flags.insert(by_flags.end(), {"--out", tmp / "flags"});
  auto a = run_dreamddp(by_flags, 60);
  ASSERT_EQ(a.status, 0) << a.describe();

  write_file(tmp / "run.ini",
             "# the same run as the flags\nmodel = cnn\nsteps = 4\nbatch = 16\nseed = 3\nlr = 0.02\n"
             "policy = localsgd:k=2\nthreads = 1\neval-samples = 50\n");
  auto b = run_dreamddp({"train", "--config", tmp / "run.ini", "--out", tmp / "ini"}, 60);
  ASSERT_EQ(b.status, 0) << b.describe();

  auto sa = read_json(tmp / "flags/summary.json"), sb = read_json(tmp / "ini/summary.json");
  for (auto k : {"model", "steps", "params", "policy", "batch", "seed"})
    EXPECT_EQ(sa.at(k), sb.at(k)) << "summary field " << k;
  EXPECT_EQ(sb.at("model"), "cnn");
  EXPECT_EQ(sb.at("params"), 1701354);
  EXPECT_EQ(sb.at("policy"), "localsgd:k=2");
  EXPECT_NEAR(sa.at("final_loss").get<double>(), sb.at("final_loss").get<double>(), 1e-6)
      << "same configuration, same seed, one thread: same loss";

  auto c = run_dreamddp({"train", "--config", tmp / "run.ini", "--steps", "3", "--out", tmp / "override"}, 60);
  ASSERT_EQ(c.status, 0) << c.describe();
  EXPECT_EQ(read_json(tmp / "override/summary.json").at("steps"), 3) << "a flag overrides the INI file";
}

// A --switch at or after the last step never applies: the run goes on, and says so once; one inside the run does not.
TEST(TrainE2E, SwitchPastTheLastStepIsNoted) {
  TmpDir tmp;
  auto r = run_dreamddp({"train", "--model", "mlp", "--data", "synthetic", "--steps", "3", "--threads", "1",
                         "--eval-samples", "10", "--switch", "1:localsgd:k=2", "--switch", "3:ddp", "--out",
                         tmp / "run"},
                        60);
  ASSERT_EQ(r.status, 0) << r.describe();
  EXPECT_NE(r.err.find("train: note: --switch 3:ddp is not before the last step (3 steps)"), std::string::npos)
      << r.describe();
  EXPECT_EQ(r.err.find("--switch 1:"), std::string::npos) << "a switch inside the run is not noted\n" << r.describe();
}

// The byte-level GPT learns something on the text corpus within a few steps (loss below uniform, ln 256).
TEST(TrainE2E, GptMiniOnTextLearns) {
  TmpDir tmp;
  auto r = run_dreamddp({"train", "--model", "gpt-mini", "--data", "text", "--steps", "30", "--batch", "4",
                         "--threads", "1", "--eval-samples", "64", "--out", tmp / "run"},
                        120);
  ASSERT_EQ(r.status, 0) << r.describe();
  auto s = read_json(tmp / "run/summary.json");
  EXPECT_EQ(s.at("model"), "gpt-mini");
  EXPECT_EQ(s.at("params"), 3323392);
  const double loss = s.at("final_loss");
  EXPECT_TRUE(std::isfinite(loss));
  EXPECT_LT(loss, std::log(256.0)) << "below the loss of a uniform guess over bytes";
  auto t = steps_table_stats(tmp / "run/metrics.h5");
  EXPECT_EQ(t.at("rows"), 30);
}

// The decoder families through the CLI at tiny sizes: the spec's options reach the model (the count the peer
// prints for gpt2:layers=1,d=32,heads=2,vocab=300 and its llama twin), and a
// mistyped option is a usage error (exit 2) before anything is written.
TEST(TrainE2E, DecoderSpecsTrainAndBadOptionsAreRefused) {
  for (auto [spec, params] : {std::pair<std::string, int64_t>{"gpt2:layers=1,d=32,heads=2,vocab=300", 55136},
                              {"llama:layers=1,d=32,heads=2,ffn=64,vocab=300", 29536}}) {
    TmpDir tmp;
    auto r = run_dreamddp({"train", "--model", spec, "--data", "synthetic", "--steps", "2", "--batch", "2",
                           "--threads", "1", "--eval-samples", "4", "--out", tmp / "run"},
                          60);
    ASSERT_EQ(r.status, 0) << r.describe();
    auto s = read_json(tmp / "run/summary.json");
    EXPECT_EQ(s.at("model"), spec);
    EXPECT_EQ(s.at("params"), params) << spec;
    EXPECT_TRUE(std::isfinite(double(s.at("final_loss")))) << spec;
  }
  TmpDir tmp;
  auto bad = run_dreamddp({"train", "--model", "gpt2:layers=1,dd=32", "--data", "synthetic", "--steps", "1",
                           "--out", tmp / "run"},
                          60);
  EXPECT_EQ(bad.status, 2) << bad.describe();
  EXPECT_NE(bad.err.find("no option 'dd'"), std::string::npos) << bad.describe();
  EXPECT_FALSE(std::filesystem::exists(tmp / "run/summary.json")) << bad.describe();
}

}  // namespace
}  // namespace dd::cli::test
