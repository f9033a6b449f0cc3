// End-to-end: output targets that cannot be written are refused before the first step (exit 2, one line, nothing
// written); a profile whose two files time different layers is refused before anything is printed; every
// sub-command's --help prints its defaults as they would be written on the command line (0.9, not 0.899999976).
#include <gtest/gtest.h>

#include <filesystem>
#include <regex>

#include "tests/cli/cli_run.h"

namespace dd::cli::test {
namespace {

namespace fs = std::filesystem;

const std::vector<std::string> kQuick = {"--model", "mlp", "--data", "synthetic", "--batch", "4", "--steps", "3",
                                         "--threads", "1", "--eval-samples", "8"};

std::vector<std::string> train(std::vector<std::string> extra) {
  std::vector<std::string> a = {"train"};
  a.insert(a.end(), kQuick.begin(), kQuick.end());
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

// Exit 2, exactly one "dreamddp ..." diagnostic naming `must`, no training step, no summary.
void expect_refused_at_once(const Result& r, const std::string& must) {
  EXPECT_EQ(r.status, 2) << r.describe();
  int diag = 0;
  for (const auto& l : lines_of(r.err))
    if (l.rfind("dreamddp", 0) == 0) {
      ++diag;
      EXPECT_NE(l.find(must), std::string::npos) << l;
    }
  EXPECT_EQ(diag, 1) << r.describe();
  EXPECT_EQ(r.err.find("step 1/"), std::string::npos) << "refused only after training\n" << r.describe();
  EXPECT_EQ(r.out.find('{'), std::string::npos) << r.describe();
}

TEST(OutputTargets, UnwritableSaveParamsIsRefusedBeforeTheFirstStep) {
  TmpDir tmp;
  const std::string run = tmp / "run";
  for (const auto& [target, must] : std::vector<std::pair<std::string, std::string>>{
           {tmp / "no/such/dir/p.bin", "--save-params"},
           {tmp.path, "is a directory"},
           {"/proc/p.bin", "not writable"},
           {tmp / "no/such/p%r.bin", "--save-params"}}) {
    auto r = run_dreamddp(train({"--out", run, "--save-params", target}), 30);
    expect_refused_at_once(r, must);
    EXPECT_FALSE(fs::exists(run)) << "the run directory must not be made for a refused run (" << target << ")";
  }
}

TEST(OutputTargets, UnwritableOutIsRefusedBeforeTheFirstStep) {
  TmpDir tmp;
  write_file(tmp / "a_file", "x\n");
  for (const auto& [out, must] : std::vector<std::pair<std::string, std::string>>{
           {"/proc/dd_run", "not writable"}, {tmp / "a_file/run", "not a directory"}}) {
    auto r = run_dreamddp(train({"--out", out}), 30);
    expect_refused_at_once(r, out);
    EXPECT_NE(r.err.find(must), std::string::npos) << r.describe();
  }
  // profile measures for a while before it writes: its --out is checked first.
  auto r = run_dreamddp({"profile", "--model", "mlp", "--threads", "1", "--out", "/proc/dd_profile"}, 30);
  expect_refused_at_once(r, "/proc");
  // schedule prints its table before writing --out: nothing may be printed for an unwritable one.
  TmpDir p;
  write_file(p / "bp.json", R"({"fc1": 0.002, "fc2": 0.001})");
  write_file(p / "comm.json", R"({"fc1": 0.004, "fc2": 0.004})");
  auto s = run_dreamddp({"schedule", "--profile", p.path, "--h", "2", "--out", tmp / "no/dir/s.json"}, 30);
  expect_refused_at_once(s, "--out");
  EXPECT_TRUE(s.out.empty()) << s.describe();
}

TEST(OutputTargets, SaveParamsInsideTheNewRunDirectoryIsAccepted) {
  TmpDir tmp;
  const std::string run = tmp / "run";
  auto r = run_dreamddp(train({"--out", run, "--save-params", run + "/p.bin"}), 90);
  ASSERT_EQ(r.status, 0) << r.describe();
  EXPECT_GT(fs::file_size(run + "/p.bin"), 0u);
}

TEST(Profiles, TwoFilesNamingDifferentLayersAreRefused) {
  TmpDir p;
  write_file(p / "bp.json", R"({"fc1": 0.002, "fc2": 0.001, "fc3": 0.001, "fc4": 0.0005})");
  write_file(p / "comm.json", R"({"fc1": 0.004, "fc2": 0.004, "fc3": 0.004})");
  auto r = run_dreamddp({"schedule", "--profile", p.path, "--h", "4"}, 30);
  expect_refused_at_once(r, "\"fc4\"");
  EXPECT_TRUE(r.out.empty()) << r.describe();
  TmpDir run;
  auto t = run_dreamddp(train({"--policy", "dreamddp:h=4,profile=" + p.path, "--out", run / "r"}), 30);
  expect_refused_at_once(t, "\"fc4\"");
  EXPECT_FALSE(fs::exists(run / "r"));
  write_file(p / "comm.json", R"({"fc1": 0.004, "fc2": NaN, "fc3": 0.004, "fc4": 0.001})");
  expect_refused_at_once(run_dreamddp({"schedule", "--profile", p.path, "--h", "4"}, 30), "\"fc2\" has no time");
}

// A default the help prints must be what one would type: the float 0.9f is 0.899999976 through Boost's
// lexical_cast, and 0.9 as a double 0.90000000000000002. No sub-command prints such a number.
TEST(Help, DefaultsArePrintedAsWritten) {
  const std::regex long_number("[0-9]\\.[0-9]{7,}");
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"train", "--help"}, {"launch", "--help"}, {"bench", "--help"}, {"bench", "allreduce", "--help"},
           {"bench", "gemm", "--help"}, {"schedule", "--help"}, {"profile", "--help"}, {"simulate", "--help"}}) {
    auto r = run_dreamddp(args, 10);
    ASSERT_EQ(r.status, 0) << r.describe();
    std::smatch m;
    EXPECT_FALSE(std::regex_search(r.out, m, long_number)) << args[0] << " --help prints " << m.str() << "\n" << r.out;
  }
  auto r = run_dreamddp({"train", "--help"}, 10);
  EXPECT_TRUE(std::regex_search(r.out, std::regex("--momentum arg \\(=0\\.9\\)"))) << r.out;
  EXPECT_TRUE(std::regex_search(r.out, std::regex("--staleness-lr \\[=arg\\(=0\\.9\\)\\]"))) << r.out;
  EXPECT_TRUE(std::regex_search(r.out, std::regex("--weight-decay arg \\(=0\\)"))) << r.out;
}

}  // namespace
}  // namespace dd::cli::test
