// Profile files: bp.json order kept, a layer without a time refused, bad files refused naming the file, write round-trip.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <unistd.h>

#include "base/error.h"
#include "core/sync/profile/profile_io.h"
#include "core/sync/profile/profiler.h"

namespace fs = std::filesystem;
using namespace dd::sync;

namespace {

fs::path fresh_dir(const std::string& tag) {
  static int counter = 0;
  fs::path d = fs::temp_directory_path() /
               ("dd_profile_" + tag + "_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

void put(const fs::path& f, const std::string& text) { std::ofstream(f) << text; }

// Expects a UsageError whose message names `file`.
template <typename F>
void expect_usage_error_naming(F fn, const std::string& file) {
  try {
    fn();
    ADD_FAILURE() << "no UsageError for " << file;
  } catch (const dd::UsageError& e) {
    EXPECT_NE(std::string(e.what()).find(file), std::string::npos) << e.what();
  }
}

}  // namespace

TEST(ProfileIo, KeepsBpOrderAndTakesCommByName) {
  auto d = fresh_dir("order");
  put(d / "bp.json", R"({"zeta": 0.5, "alpha": 0, "beta": 1e-3})");
  put(d / "comm.json", R"({"beta": 0.125, "zeta": 2, "alpha": 0.25})");
  const auto p = read_profile(d.string());
  EXPECT_EQ(p.names, (std::vector<std::string>{"zeta", "alpha", "beta"}));
  EXPECT_EQ(p.bp, (std::vector<double>{0.5, 0.0, 1e-3}));
  EXPECT_EQ(p.comm, (std::vector<double>{2.0, 0.25, 0.125}));
  fs::remove_all(d);
}

// A layer without a time (null, a NaN communication time, or absent from one of the two files) would cost 0 in
// every model: refused, naming the file and the layer. Infinite and negative times stay refused in either file.
TEST(ProfileIo, RefusesLayersWithoutATime) {
  auto d = fresh_dir("missing");
  const std::string bp = (d / "bp.json").string(), comm = (d / "comm.json").string();
  const std::pair<const char*, const char*> cases[] = {
      {R"({"a": 1, "mid": 1})", R"({"a": 1, "mid": NaN})"}, {R"({"a": 1, "mid": 1})", R"({"a": 1, "mid": -NaN})"},
      {R"({"a": 1, "mid": null})", R"({"a": 1, "mid": 1})"}, {R"({"a": 1, "mid": 2})", R"({"a": 1})"},
      {R"({"a": 1})", R"({"a": 1, "mid": 2})"}, {R"({"a": 1, "mid": -1})", R"({"a": 1, "mid": 1})"},
      {R"({"a": 1, "mid": NaN})", R"({"a": 1, "mid": -0.5})"}, {R"({"a": 1, "mid": NaN})", R"({"a": 1, "mid": NaN})"},
      {R"({"a": 1, "mid": "NaN"})", R"({"a": 1, "mid": 1})"}};
  for (const auto& [b, c] : cases) {
    put(bp, b);
    put(comm, c);
    try {
      read_profile(d.string());
      ADD_FAILURE() << "accepted bp " << b << " comm " << c;
    } catch (const dd::UsageError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("\"mid\""), std::string::npos) << what;
      EXPECT_TRUE(what.find("bp.json") != std::string::npos || what.find("comm.json") != std::string::npos) << what;
    }
  }
  fs::remove_all(d);
}

// The DreamDDP artifact's Llama-2 profiles give NaN as the backward time of modules without parameters (the rotary
// embeddings): read as 0 s, and the note names those layers (and only those).
TEST(ProfileIo, NanBackwardTimeReadsAsZeroAndIsNamed) {
  auto d = fresh_dir("nanbp");
  put(d / "bp.json", R"({"embed": 0.5, "rotary_emb": NaN, "attn": 0.25, "rope2": -NaN})");
  put(d / "comm.json", R"({"embed": 2, "rotary_emb": 0, "attn": 1, "rope2": 0})");
  const auto p = read_profile(d.string());
  EXPECT_EQ(p.names, (std::vector<std::string>{"embed", "rotary_emb", "attn", "rope2"}));
  EXPECT_EQ(p.bp, (std::vector<double>{0.5, 0.0, 0.25, 0.0}));
  EXPECT_EQ(p.bp_nan, (std::vector<std::string>{"rotary_emb", "rope2"}));
  const std::string note = bp_nan_note(p, d.string());
  EXPECT_NE(note.find("\"rotary_emb\", \"rope2\""), std::string::npos) << note;
  EXPECT_NE(note.find("0 s"), std::string::npos) << note;
  EXPECT_EQ(note.find("embed\""), std::string::npos) << note;
  EXPECT_EQ(note.find('\n'), std::string::npos) << note;
  put(d / "bp.json", R"({"embed": 0.5, "rotary_emb": 0, "attn": 0.25, "rope2": 0})");
  EXPECT_EQ(bp_nan_note(read_profile(d.string()), d.string()), "");
  fs::remove_all(d);
}

TEST(ProfileIo, NanInsideNamesIsNotTouched) {
  auto d = fresh_dir("nanname");
  put(d / "bp.json", R"({"NaN\"NaN": 1})");
  put(d / "comm.json", R"({"NaN\"NaN": 2})");
  const auto p = read_profile(d.string());
  ASSERT_EQ(p.names.size(), 1u);
  EXPECT_EQ(p.names[0], "NaN\"NaN");
  EXPECT_EQ(p.bp[0], 1.0);
  EXPECT_EQ(p.comm[0], 2.0);
  fs::remove_all(d);
}

TEST(ProfileIo, RefusesBadFilesNamingThem) {
  expect_usage_error_naming([] { read_profile("/nonexistent/dd_profile_dir"); }, "/nonexistent/dd_profile_dir");
  auto d = fresh_dir("bad");
  const std::string bp = (d / "bp.json").string(), comm = (d / "comm.json").string();
  put(bp, R"({"a": 1})");
  expect_usage_error_naming([&] { read_profile(d.string()); }, comm);  // comm.json missing
  const char* bad_comm[] = {"{not json", R"(["a", 1])", R"({"a": "fast"})", R"({"a": -0.5})", R"({"a": [1]})"};
  for (const char* text : bad_comm) {
    put(comm, text);
    expect_usage_error_naming([&] { read_profile(d.string()); }, comm);
  }
  put(comm, R"({"a": 1})");
  put(bp, R"({"a": true})");
  expect_usage_error_naming([&] { read_profile(d.string()); }, bp);
  fs::remove_all(d);
}

TEST(ProfileIo, WriteReadRoundTripAndNoOverwrite) {
  auto d = fresh_dir("write");
  LayerProfile p{{"w", "b", "a"}, {0.1, 0.0, 3.5e-5}, {1.25, 2.0, 0.0}};
  write_profile((d / "out").string(), p);
  const auto q = read_profile((d / "out").string());
  EXPECT_EQ(q.names, p.names);
  EXPECT_EQ(q.bp, p.bp);
  EXPECT_EQ(q.comm, p.comm);
  EXPECT_THROW(write_profile((d / "out").string(), p), dd::UsageError);
  EXPECT_NO_THROW(write_profile((d / "out").string(), p, /*overwrite=*/true));
  fs::remove_all(d);
}

// overlap.json: written beside bp.json and comm.json, read back; absent means no contention; bad values refused.
TEST(ProfileIo, ContentionRoundTripsAndIsOptional) {
  auto d = fresh_dir("contention");
  LayerProfile p{{"a", "b"}, {0.5, 0.25}, {1.0, 2.0}};
  p.contention = {0.75, 1.5};
  write_profile((d / "out").string(), p);
  const auto q = read_profile((d / "out").string());
  EXPECT_EQ(q.contention.compute, 0.75);
  EXPECT_EQ(q.contention.comm, 1.5);
  fs::remove((d / "out" / "overlap.json"));
  EXPECT_TRUE(read_profile((d / "out").string()).contention.none());
  const std::string ov = (d / "out" / "overlap.json").string();
  for (const char* text : {"{not json", R"({"compute_slowdown": 1})", R"({"compute_slowdown": -1, "comm_slowdown": 0})",
                           R"({"compute_slowdown": "x", "comm_slowdown": 0})"}) {
    put(ov, text);
    expect_usage_error_naming([&] { read_profile((d / "out").string()); }, ov);
  }
  fs::remove_all(d);
}

// step.json: written only when the step's forward and update were timed, read back; absent means unmeasured
// (negative); bad values refused naming the file.
TEST(ProfileIo, StepTimesRoundTripAndAreOptional) {
  auto d = fresh_dir("step");
  LayerProfile p{{"a", "b"}, {0.5, 0.25}, {1.0, 2.0}};
  write_profile((d / "none").string(), p);
  EXPECT_FALSE(fs::exists(d / "none" / "step.json"));
  EXPECT_LT(read_profile((d / "none").string()).forward_s, 0);
  EXPECT_LT(read_profile((d / "none").string()).update_s, 0);
  p.forward_s = 0.003;
  p.update_s = 0.0;
  write_profile((d / "out").string(), p);
  const auto q = read_profile((d / "out").string());
  EXPECT_EQ(q.forward_s, 0.003);
  EXPECT_EQ(q.update_s, 0.0);
  const std::string st = (d / "out" / "step.json").string();
  for (const char* text : {"{not json", R"({"forward_s": 1})", R"({"forward_s": -1, "update_s": 0})",
                           R"({"forward_s": 0, "update_s": null})", "[1, 2]"}) {
    put(st, text);
    expect_usage_error_naming([&] { read_profile((d / "out").string()); }, st);
  }
  fs::remove_all(d);
}

// The parts of a pass scale to the median of whole passes: a preemption that lands in a different layer each
// pass leaves every layer's median untouched, but not the pass.
TEST(ProfileIo, PassScaleTakesTheMedianOfWholePasses) {
  // Three layers of 1 ms each; in every pass one of them (a different one) also lost 3 ms off its core.
  const std::vector<double> medians{1e-3, 1e-3, 1e-3};
  EXPECT_NEAR(pass_scale(medians, {6e-3, 6e-3, 6e-3}), 2.0, 1e-12);
  // The median, not the mean: one pass held up for 100 ms does not move it.
  EXPECT_NEAR(pass_scale(medians, {3e-3, 3e-3, 0.1}), 1.0, 1e-12);
  // Nothing measured: no scaling.
  EXPECT_EQ(pass_scale({0.0, 0.0}, {1e-3}), 1.0);
  EXPECT_EQ(pass_scale(medians, {}), 1.0);
}

// Agreed parts are paced to the slowest rank's pass: every sync of the world waits for it.
TEST(ProfileIo, SlowestScalePacesTheAgreedPartsToTheSlowestRank) {
  const std::vector<double> parts{2e-3, 6e-3, 2e-3};  // the ranks' average: a 10 ms pass
  EXPECT_NEAR(slowest_scale(parts, {9e-3, 11e-3}), 1.1, 1e-12);
  EXPECT_NEAR(slowest_scale(parts, {11e-3, 9e-3}), 1.1, 1e-12) << "whichever rank it is";
  EXPECT_NEAR(slowest_scale(parts, {10e-3}), 1.0, 1e-12);
  EXPECT_EQ(slowest_scale(parts, {}), 1.0);
  EXPECT_EQ(slowest_scale({0.0}, {1e-3}), 1.0);
}

// Which machine is crowded: ranks per machine from their ids, against the fewest cores any of them may use.
TEST(CoreShare, OversubscribedWhenAMachinesRanksTimesThreadsExceedItsCores) {
  const uint32_t one[4] = {7, 7, 7, 7};
  const int two_cores[4] = {2, 2, 2, 2};
  CoreShare s = core_share_of(one, two_cores, 4, 1);
  EXPECT_TRUE(s.oversubscribed);
  EXPECT_EQ(s.ranks, 4);
  EXPECT_EQ(s.cores, 2);
  // Two ranks of one thread on two cores fit; of two threads they do not.
  EXPECT_FALSE(core_share_of(one, two_cores, 2, 1).oversubscribed);
  EXPECT_TRUE(core_share_of(one, two_cores, 2, 2).oversubscribed);
  // Four machines of one rank each: nothing shared, whatever the order of their ids.
  const uint32_t four[4] = {9, 3, 5, 1};
  s = core_share_of(four, two_cores, 4, 2);
  EXPECT_FALSE(s.oversubscribed);
  EXPECT_EQ(s.ranks, 1);
  // One crowded machine among others is enough, and it is the one named.
  const uint32_t mixed[4] = {1, 2, 2, 2};
  const int cores[4] = {8, 2, 4, 2};
  s = core_share_of(mixed, cores, 4, 1);
  EXPECT_TRUE(s.oversubscribed);
  EXPECT_EQ(s.ranks, 3);
  EXPECT_EQ(s.cores, 2);
}

TEST(CoreShare, ThisMachineHasAnIdAndCores) {
  EXPECT_EQ(machine_id(), machine_id());
  EXPECT_GE(usable_cores(), 1);
}
