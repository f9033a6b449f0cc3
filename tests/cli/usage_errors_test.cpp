// End-to-end: bad usage and bad input make `dreamddp` exit 2 at once with one clear stderr line naming the
// problem (docs/cli.md "Exit codes"); a non-empty --out is left untouched.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "tests/cli/cli_run.h"

namespace dd::cli::test {
namespace {

struct UsageCase {
  std::string name;
  std::vector<std::string> args;  // "@T" is replaced by the test's temporary directory
  std::string must_name;          // the error line must contain this (it names the problem)
};
void PrintTo(const UsageCase& c, std::ostream* os) { *os << c.name; }

// Options every train case gets unless it sets them itself, so that a wrongly accepted case ends quickly.
const std::vector<std::pair<std::string, std::string>> kQuickDefaults = {
    {"--threads", "1"}, {"--steps", "2"}, {"--eval-samples", "10"}};

std::vector<std::string> with_quick_defaults(std::vector<std::string> a) {
  if (a.empty() || a[0] != "train") return a;
  for (auto& [k, v] : kQuickDefaults)
    if (std::find(a.begin(), a.end(), k) == a.end()) {
      a.push_back(k);
      a.push_back(v);
    }
  return a;
}

// The lines dreamddp itself writes as diagnostics start with "dreamddp"; other stderr lines are the start-up
// banner ("train: ...") or a usage listing. Exactly one diagnostic line, holding the whole message.
void expect_one_line_error(const Result& r, const std::string& must_name) {
  EXPECT_FALSE(r.timed_out) << r.describe();
  EXPECT_EQ(r.status, 2) << r.describe();
  EXPECT_LT(r.seconds, 20) << "a usage error must be reported at once\n" << r.describe();
  std::vector<std::string> diag;
  for (auto& l : lines_of(r.err))
    if (l.rfind("dreamddp", 0) == 0) diag.push_back(l);
  ASSERT_EQ(diag.size(), 1u) << "expected exactly one diagnostic line\n" << r.describe();
  EXPECT_NE(diag[0].find(must_name), std::string::npos) << "the message should name '" << must_name << "'\n"
                                                        << r.describe();
  // A newline inside the message (a usage text glued to it) comes out escaped: the line is unreadable.
  EXPECT_EQ(diag[0].find("\\x0a"), std::string::npos) << "one line, no embedded usage text\n" << r.describe();
  EXPECT_EQ(r.out.find('{'), std::string::npos) << "no summary may be printed on an error\n" << r.describe();
}

class UsageErrors : public ::testing::TestWithParam<UsageCase> {
 protected:
  void SetUp() override {
    // Fixtures the cases refer to through @T.
    write_file(tmp_ / "unknown_key.ini", "model = mlp\nno_such_key = 3\n");
    write_file(tmp_ / "a_file", "not a directory\n");
    std::filesystem::create_directory(tmp_ / "empty_data");
    // A dataset directory whose training images are a truncated gzip (the other files are intact).
    std::filesystem::create_directory(tmp_ / "corrupt_data");
    const std::string fm = "/usr/share/datasets/fashion-mnist/";
    for (auto f : {"train-labels-idx1-ubyte.gz", "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"})
      std::filesystem::create_symlink(fm + f, tmp_ / "corrupt_data" + "/" + f);
    std::ifstream images(fm + "train-images-idx3-ubyte.gz", std::ios::binary);
    std::string head(4096, '\0');
    ASSERT_TRUE(images.read(head.data(), std::streamsize(head.size()))) << "dataset-fashion-mnist is not installed";
    write_file(tmp_ / "corrupt_data/train-images-idx3-ubyte.gz", head);
  }
  std::vector<std::string> args_for(const UsageCase& c) {
    auto a = with_quick_defaults(c.args);
    for (auto& s : a) s = subst(s);
    return a;
  }
  std::string subst(std::string s) {
    for (size_t p; (p = s.find("@T")) != std::string::npos;) s.replace(p, 2, tmp_.path);
    return s;
  }
  TmpDir tmp_;
};

TEST_P(UsageErrors, ExitTwoWithOneLineNamingTheProblem) {
  const auto& c = GetParam();
  auto r = run_dreamddp(args_for(c), 30);
  expect_one_line_error(r, subst(c.must_name));
}

const UsageCase kCases[] = {
    {"unknown_option", {"train", "--bogus", "1"}, "--bogus"},
    {"unknown_model", {"train", "--model", "resnet9000"}, "resnet9000"},
    {"resnet_unknown_stem", {"train", "--model", "resnet18:stem=foo"}, "stem=foo"},
    {"unknown_dataset", {"train", "--data", "imagenet"}, "imagenet"},
    {"unknown_backend", {"train", "--backend", "tcp"}, "unknown backend 'tcp' (expected gloo, mpi or nccl)"},
    {"unknown_subnormals", {"train", "--subnormals", "maybe"}, "--subnormals 'maybe' is not one of flush, keep"},
    {"unknown_precision", {"train", "--precision", "fp16"}, "--precision 'fp16' is not one of fp32, bf16"},
    {"bf16_on_cuda", {"train", "--device", "cuda", "--precision", "bf16"}, "--precision bf16: the cuda device"},
    {"unknown_policy", {"train", "--policy", "nosuchpolicy"}, "nosuchpolicy"},
    {"unknown_policy_key", {"train", "--policy", "localsgd:q=1"}, "'q'"},
    {"batch_zero", {"train", "--batch", "0"}, "--batch"},
    {"steps_negative", {"train", "--steps", "-1"}, "--steps"},
    {"localsgd_k_zero", {"train", "--policy", "localsgd:k=0"}, "k=0"},
    {"dreamddp_h_zero", {"train", "--policy", "dreamddp:h=0"}, "h=0"},
    {"lr_not_a_number", {"train", "--lr", "abc"}, "--lr"},
    {"steps_not_an_integer", {"train", "--steps", "10x"}, "--steps"},
    {"missing_option_value", {"train", "--threads", "1", "--steps", "2", "--eval-samples", "10", "--model"},
     "--model"},
    {"missing_config_file", {"train", "--config", "@T/no_such.ini"}, "@T/no_such.ini"},
    {"config_unknown_key", {"train", "--config", "@T/unknown_key.ini"}, "no_such_key"},
    {"missing_dataset", {"train", "--data-dir", "@T/empty_data"}, "@T/empty_data"},
    {"corrupt_dataset", {"train", "--data-dir", "@T/corrupt_data"}, "@T/corrupt_data"},
    {"token_model_on_images", {"train", "--model", "gpt-mini", "--data", "fashion-mnist"}, "--model gpt-mini"},
    {"image_model_on_text", {"train", "--model", "cnn", "--data", "text"}, "--model cnn"},
    {"out_parent_is_a_file", {"train", "--out", "@T/a_file/sub"}, "@T/a_file/sub"},
    {"out_is_a_file", {"train", "--out", "@T/a_file"}, "@T/a_file"},
    {"switch_without_colon", {"train", "--switch", "garbage"}, "garbage"},
    {"switch_step_not_a_number", {"train", "--switch", "x:ddp"}, "x:ddp"},
    {"switch_unknown_policy", {"train", "--switch", "5:nosuchpolicy"}, "nosuchpolicy"},
    {"switch_bad_policy_value", {"train", "--switch", "5:localsgd:k=0"}, "k=0"},
    {"unknown_subcommand", {"frobnicate"}, "frobnicate"},
    {"bench_without_benchmark", {"bench"}, "allreduce"},
    {"bench_unknown_benchmark", {"bench", "alltoall"}, "alltoall"},
    {"bench_unknown_option", {"bench", "allreduce", "--bogus"}, "unknown option '--bogus'"},
    {"bench_missing_value", {"bench", "allreduce", "--iters"}, "--iters"},
    {"bench_unknown_backend", {"bench", "allreduce", "--backend", "tcp"}, "unknown backend 'tcp'"},
    {"bench_gemm_unknown_option", {"bench", "gemm", "--bogus"}, "unknown option '--bogus'"},
    {"bench_gemm_missing_value", {"bench", "gemm", "--m"}, "--m"},
};

INSTANTIATE_TEST_SUITE_P(Cli, UsageErrors, ::testing::ValuesIn(kCases),
                         [](const auto& info) { return info.param.name; });

TEST(UsageErrors, NoArgumentsPrintsUsageAndExitsTwo) {
  auto r = run_dreamddp({}, 10);
  EXPECT_EQ(r.status, 2) << r.describe();
  EXPECT_NE(r.err.find("usage: dreamddp"), std::string::npos) << r.describe();
}

TEST(UsageErrors, HelpExitsZero) {
  auto r = run_dreamddp({"train", "--help"}, 10);
  EXPECT_EQ(r.status, 0) << r.describe();
  for (auto opt : {"--model", "--policy", "--switch", "--out", "--overwrite", "--config", "--save-params",
                   "--precision"})
    EXPECT_NE(r.out.find(opt), std::string::npos) << "--help should list " << opt << "\n" << r.describe();
}

// Every sub-command's --help (README: "build/dreamddp <command> --help") prints its usage on stdout and exits 0.
TEST(UsageErrors, EverySubcommandsHelpExitsZero) {
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"train", "--help"}, {"launch", "--help"}, {"bench", "--help"}, {"bench", "allreduce", "--help"},
           {"bench", "gemm", "--help"}, {"schedule", "--help"}, {"profile", "--help"}, {"simulate", "--help"}}) {
    auto r = run_dreamddp(args, 10);
    const std::string what = args[0] + (args.size() > 2 ? " " + args[1] : "");
    EXPECT_EQ(r.status, 0) << what << "\n" << r.describe();
    EXPECT_TRUE(r.err.empty()) << what << "\n" << r.describe();
    EXPECT_NE(r.out.find("dreamddp " + what), std::string::npos) << "its usage names it\n" << r.describe();
  }
  auto r = run_dreamddp({"bench", "--help"}, 10);
  for (auto b : {"bench allreduce", "bench gemm"}) EXPECT_NE(r.out.find(b), std::string::npos) << r.describe();
}

// A model and data that do not fit, a missing and a corrupt dataset: refused before the run directory is made
// (the data is checked and loaded first), so no empty --out is left behind.
TEST(UsageErrors, BadDataLeavesNoRunDirectory) {
  TmpDir tmp;
  std::filesystem::create_directory(tmp / "empty_data");
  std::filesystem::create_directory(tmp / "corrupt_data");
  const std::string fm = "/usr/share/datasets/fashion-mnist/";
  for (auto f : {"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz", "t10k-images-idx3-ubyte.gz"})
    std::filesystem::create_symlink(fm + f, tmp / "corrupt_data" + "/" + f);
  write_file(tmp / "corrupt_data/t10k-labels-idx1-ubyte.gz", "\x1f\x8b\x08 not really gzip");  // the test split
  write_file(tmp / "short.txt", "too short for one window\n");
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--model", "gpt-mini", "--data", "fashion-mnist"}, "--model gpt-mini"},
      {{"--model", "mlp", "--data", "text"}, "--model mlp"},
      {{"--data-dir", tmp / "empty_data"}, tmp / "empty_data"},
      {{"--data-dir", tmp / "corrupt_data"}, "t10k-labels"},
      {{"--model", "gpt-mini", "--data", "text", "--data-dir", tmp / "short.txt"}, "window"}};
  int n = 0;
  for (const auto& [extra, must] : cases) {
    const std::string out = tmp / ("run" + std::to_string(n++));
    std::vector<std::string> args{"train", "--out", out};
    args.insert(args.end(), extra.begin(), extra.end());
    auto r = run_dreamddp(with_quick_defaults(args), 30);
    expect_one_line_error(r, must);
    EXPECT_FALSE(std::filesystem::exists(out)) << "the refused run made its --out " << out << "\n" << r.describe();
  }
}

// A run directory with earlier results is refused and left byte for byte as it was; --overwrite is the way out.
TEST(UsageErrors, NonEmptyOutIsRefusedAndUntouched) {
  TmpDir tmp;
  const std::string out = tmp / "run";
  std::filesystem::create_directory(out);
  const std::string metrics(4096, '\x5a'), summary = "{\"model\": \"earlier\"}\n";
  write_file(out + "/metrics.h5", metrics);
  write_file(out + "/summary.json", summary);
  auto before = std::filesystem::last_write_time(out + "/metrics.h5");

  auto r = run_dreamddp(with_quick_defaults({"train", "--out", out}), 30);
  expect_one_line_error(r, out);
  EXPECT_NE(r.err.find("--overwrite"), std::string::npos) << "the message should say how to proceed\n"
                                                          << r.describe();
  EXPECT_EQ(read_file(out + "/metrics.h5"), metrics);
  EXPECT_EQ(read_file(out + "/summary.json"), summary);
  EXPECT_EQ(std::filesystem::last_write_time(out + "/metrics.h5"), before);
  int entries = 0;
  for (auto& e : std::filesystem::directory_iterator(out)) {
    (void)e;
    ++entries;
  }
  EXPECT_EQ(entries, 2) << "nothing may be added to a refused run directory";

  auto ok = run_dreamddp(with_quick_defaults({"train", "--out", out, "--overwrite"}), 60);
  ASSERT_EQ(ok.status, 0) << ok.describe();
  EXPECT_EQ(read_json(out + "/summary.json").at("model"), "mlp");
}

}  // namespace
}  // namespace dd::cli::test
