// Resumed MetricsWriter: continues an existing metrics.h5 from a checkpoint step without duplicate or lost rows.
#include <gtest/gtest.h>
#include <hdf5.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <fstream>
#include <iterator>
#include <thread>

#include "base/error.h"
#include "core/telemetry/hdf5_types.h"
#include "core/telemetry/metrics_writer.h"
#include "tests/telemetry/test_util.h"

namespace dd::telemetry {
namespace {

using testing::read_scalar_attr;
using testing::read_string_attr;
using testing::read_table;
using testing::rows_of;
using testing::ScratchDir;

constexpr int64_t kResumeAfter = 11;

// `run` tells the first run (0) from the resumed one (1), so a row of either is recognisable by its values.
StepRow step_row(int64_t i, int run) {
  StepRow r;
  r.step = i;
  r.wall_time_s = 0.5 * static_cast<double>(i) + 1000.0 * run;
  r.loss = 3.0 / (1.0 + 0.1 * static_cast<double>(i)) + 10.0 * run;
  r.lr = 0.1;
  r.forward_ms = 1.0 + run;
  r.backward_ms = 2.0;
  r.update_ms = 0.5;
  r.exposed_comm_ms = 0.25 * static_cast<double>(i % 3);
  r.bytes_sent = 100 * i + 7 * run;
  r.samples_per_s = 256.0;
  return r;
}

std::vector<float> cosines(int64_t t0, int32_t delay, int layers) {
  std::vector<float> v;
  for (int l = 0; l < layers; ++l)
    v.push_back(static_cast<float>(t0) + 0.1f * static_cast<float>(l) + 0.01f * static_cast<float>(delay));
  return v;
}

// Appends everything a training step logs; probes of both kinds start at `fixed_t0` / `mini_t0` steps.
void log_step(MetricsWriter& w, int64_t i, int run, const std::vector<int64_t>& fixed_t0,
              const std::vector<int64_t>& mini_t0) {
  w.append_step(step_row(i, run));
  for (int32_t b = 0; b < 2; ++b)
    w.append_sync_event({i, 2 * b, 2 * b + 1, SyncAction::kAverageParams, 0, 0, 1000 * i + run, 0.001 * b, 0.002});
  w.append_layer_ready({i, 0, static_cast<int32_t>(i % 4), 0.001 * static_cast<double>(i) + run});
  if (i % 5 == 0) w.append_eval({i, 1.0 / (1 + i) + run, 0.5 + 0.01 * static_cast<double>(i), std::nan("")});
  for (int64_t t0 : fixed_t0)
    for (int32_t d : {1, 2, 4})
      if (t0 + d == i) w.record_cosine(ProbeKind::kFixedBatch, t0, d, cosines(t0, d, 4));
  for (int64_t t0 : mini_t0)
    for (int32_t d : {1, 2})
      if (t0 + d == i) w.record_cosine(ProbeKind::kMinibatch, t0, d, cosines(t0, d, 4));
}

// The interrupted run: steps 0..19, probes whose completion falls on both sides of the checkpoint.
// Fixed-batch t0 = 0, 6 complete by step 10 (kept); 9 and 14 complete after 11, 17 never (all dropped).
// Minibatch t0 = 3, 9 complete by 11 (kept); 10 completes at 12 (dropped).
void write_first_run(const std::string& path) {
  MetricsWriterOptions o;
  o.background = false;
  MetricsWriter w(path, o);
  w.set_attributes({{"policy", "dreamddp:h=4"}, {"model", "mlp"}, {"start_time", "first"}});
  w.set_attribute("world", int64_t{4});
  w.set_attribute("lr", 0.05);
  w.set_attribute("hosts", std::vector<std::string>{"node-a", "node-b"});
  std::vector<LayerInfo> layers;
  for (int i = 0; i < 4; ++i) layers.push_back({i, "fc" + std::to_string(i), "Linear", 10 * (i + 1), 40 * (i + 1)});
  w.write_layers(layers);
  w.declare_sensitivity(ProbeKind::kFixedBatch, {1, 2, 4}, 4);
  w.declare_sensitivity(ProbeKind::kMinibatch, {1, 2}, 4);
  for (int64_t i = 0; i < 20; ++i) {
    log_step(w, i, 0, {0, 6, 9, 14, 17}, {3, 9, 10});
    if (i == 3) w.append_event(i, "switch", "ddp -> dreamddp:h=4");
    if (i == kResumeAfter) w.append_event(i, "checkpoint", "step 11");
    if (i == 14) w.append_event(i, "anomaly", "loss spike");
    if (i == 9) w.flush();
  }
  w.close();
}

MetricsWriterOptions resume_opts(int64_t after) {
  MetricsWriterOptions o;
  o.background = false;
  o.resume_after_step = after;
  return o;
}

std::vector<std::string> read_string_list_attr(hid_t obj, const char* key) {
  Hid a(h5check(H5Aopen(obj, key, H5P_DEFAULT), key));
  Hid sp(H5Aget_space(a));
  std::vector<char*> ptrs(static_cast<size_t>(H5Sget_simple_extent_npoints(sp)));
  Hid t = vlen_string_type();
  h5check_status(H5Aread(a, t, ptrs.data()), key);
  std::vector<std::string> out;
  for (char* p : ptrs) {
    out.emplace_back(p);
    H5free_memory(p);
  }
  return out;
}

struct Event {
  int64_t step;
  std::string kind, detail;
};

std::vector<Event> read_events(hid_t f) {
  Hid mem = event_mem_type();
  auto raw = read_table<EventRowC>(f, "events", mem);
  std::vector<Event> out;
  for (const auto& e : raw) out.push_back({e.step, e.kind, e.detail});
  if (!raw.empty()) {
    hsize_t n = raw.size();
    Hid sp(H5Screate_simple(1, &n, nullptr));
    H5Dvlen_reclaim(mem, sp, H5P_DEFAULT, raw.data());
  }
  return out;
}

template <class T>
std::vector<T> read_vector(hid_t f, const char* name, hid_t type) {
  Hid ds(h5check(H5Dopen2(f, name, H5P_DEFAULT), name));
  Hid sp(H5Dget_space(ds));
  std::vector<T> v(static_cast<size_t>(H5Sget_simple_extent_npoints(sp)));
  if (!v.empty()) h5check_status(H5Dread(ds, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()), name);
  return v;
}

std::vector<int64_t> step_column(const std::vector<StepRow>& rows) {
  std::vector<int64_t> out;
  for (const auto& r : rows) out.push_back(r.step);
  return out;
}

std::vector<int64_t> iota_steps(int64_t n) {
  std::vector<int64_t> v;
  for (int64_t i = 0; i < n; ++i) v.push_back(i);
  return v;
}

TEST(MetricsWriterResume, DropsRowsAfterCheckpointAndContinues) {
  ScratchDir dir;
  std::string path = dir.file("metrics.h5");
  write_first_run(path);
  double created;
  {
    Hid f(h5check(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), "open first run"));
    created = read_scalar_attr<double>(f, "created_unix_s", H5T_NATIVE_DOUBLE);
    Hid ds(H5Dopen2(f, "steps", H5P_DEFAULT));
    ASSERT_EQ(rows_of(ds), 20u);
  }

  {
    MetricsWriter w(path, resume_opts(kResumeAfter));
    // The merged file is published by the constructor: a crash right after resuming loses nothing imported.
    EXPECT_EQ(w.stats().steps, kResumeAfter + 1);
    // The resumed trainer re-declares what it probes; same shape must be accepted.
    EXPECT_NO_THROW(w.declare_sensitivity(ProbeKind::kFixedBatch, {1, 2, 4}, 4));
    EXPECT_NO_THROW(w.declare_sensitivity(ProbeKind::kMinibatch, {1, 2}, 4));
    w.set_attributes({{"start_time", "second"}});
    for (int64_t i = kResumeAfter + 1; i <= 15; ++i) log_step(w, i, 1, {12}, {12});
    w.close();
    EXPECT_EQ(w.stats().steps, 16);
  }

  Hid f(h5check(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), "open resumed"));
  // Attributes: all kept, start_time replaced, creation time the first run's.
  EXPECT_EQ(read_string_attr(f, "policy"), "dreamddp:h=4");
  EXPECT_EQ(read_string_attr(f, "model"), "mlp");
  EXPECT_EQ(read_string_attr(f, "start_time"), "second");
  EXPECT_EQ(read_scalar_attr<int64_t>(f, "world", H5T_NATIVE_INT64), 4);
  EXPECT_DOUBLE_EQ(read_scalar_attr<double>(f, "lr", H5T_NATIVE_DOUBLE), 0.05);
  EXPECT_DOUBLE_EQ(read_scalar_attr<double>(f, "created_unix_s", H5T_NATIVE_DOUBLE), created);
  EXPECT_EQ(read_scalar_attr<int64_t>(f, "telemetry_schema_version", H5T_NATIVE_INT64), 1);
  EXPECT_EQ(read_string_list_attr(f, "hosts"), (std::vector<std::string>{"node-a", "node-b"}));

  // /steps: exactly 0..15; 0..11 are the first run's values, 12..15 the resumed run's.
  Hid smem = step_mem_type();
  auto steps = read_table<StepRow>(f, "steps", smem);
  ASSERT_EQ(step_column(steps), iota_steps(16));
  for (int64_t i = 0; i < 16; ++i) {
    StepRow e = step_row(i, i <= kResumeAfter ? 0 : 1);
    EXPECT_DOUBLE_EQ(steps[i].loss, e.loss) << "step " << i;
    EXPECT_DOUBLE_EQ(steps[i].wall_time_s, e.wall_time_s) << "step " << i;
    EXPECT_DOUBLE_EQ(steps[i].forward_ms, e.forward_ms) << "step " << i;
    EXPECT_DOUBLE_EQ(steps[i].exposed_comm_ms, e.exposed_comm_ms) << "step " << i;
    EXPECT_EQ(steps[i].bytes_sent, e.bytes_sent) << "step " << i;
  }

  Hid emem = sync_event_mem_type();
  auto sync = read_table<SyncEventRow>(f, "sync_events", emem);
  ASSERT_EQ(sync.size(), 32u);
  for (size_t k = 0; k < sync.size(); ++k) {
    int64_t i = static_cast<int64_t>(k / 2);
    EXPECT_EQ(sync[k].step, i);
    EXPECT_EQ(sync[k].bytes, 1000 * i + (i <= kResumeAfter ? 0 : 1));
    EXPECT_EQ(sync[k].action, SyncAction::kAverageParams);
  }

  Hid rmem = layer_ready_mem_type();
  auto ready = read_table<LayerReadyRow>(f, "layer_ready", rmem);
  ASSERT_EQ(ready.size(), 16u);
  for (int64_t i = 0; i < 16; ++i) {
    EXPECT_EQ(ready[i].step, i);
    EXPECT_DOUBLE_EQ(ready[i].ready_s, 0.001 * static_cast<double>(i) + (i <= kResumeAfter ? 0 : 1));
  }

  Hid vmem = eval_mem_type();
  auto ev = read_table<EvalRow>(f, "eval", vmem);
  ASSERT_EQ(ev.size(), 4u);
  const int64_t eval_steps[] = {0, 5, 10, 15};
  for (size_t k = 0; k < 4; ++k) {
    EXPECT_EQ(ev[k].step, eval_steps[k]);
    EXPECT_DOUBLE_EQ(ev[k].test_loss, 1.0 / (1 + eval_steps[k]) + (eval_steps[k] <= kResumeAfter ? 0 : 1));
  }

  auto events = read_events(f);
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0].step, 3);
  EXPECT_EQ(events[0].kind, "switch");
  EXPECT_EQ(events[0].detail, "ddp -> dreamddp:h=4");
  EXPECT_EQ(events[1].kind, "checkpoint");
  EXPECT_EQ(events[2].step, kResumeAfter);
  EXPECT_EQ(events[2].kind, "resume");
  EXPECT_EQ(events[2].detail, "after step 11");

  Hid layers_mem = layer_mem_type();
  auto layers = read_table<LayerInfoC>(f, "layers", layers_mem);
  ASSERT_EQ(layers.size(), 4u);
  EXPECT_STREQ(layers[3].name, "fc3");
  EXPECT_STREQ(layers[3].kind, "Linear");
  EXPECT_EQ(layers[3].params, 40);
  EXPECT_EQ(layers[3].bytes, 160);
  {
    hsize_t n = layers.size();
    Hid sp(H5Screate_simple(1, &n, nullptr));
    H5Dvlen_reclaim(layers_mem, sp, H5P_DEFAULT, layers.data());
  }

  // Fixed batch: 0 and 6 imported unchanged, 12 from the resumed run (delay 4 never reached -> NaN).
  EXPECT_EQ(read_vector<int32_t>(f, "sensitivity/delays", H5T_NATIVE_INT32), (std::vector<int32_t>{1, 2, 4}));
  EXPECT_EQ(read_vector<int64_t>(f, "sensitivity/probe_steps", H5T_NATIVE_INT64), (std::vector<int64_t>{0, 6, 12}));
  auto cos = read_vector<float>(f, "sensitivity/cosine", H5T_NATIVE_FLOAT);
  ASSERT_EQ(cos.size(), 3u * 4 * 3);
  const int64_t fixed_t0[] = {0, 6, 12};
  const int32_t fixed_d[] = {1, 2, 4};
  for (int p = 0; p < 3; ++p)
    for (int l = 0; l < 4; ++l)
      for (int d = 0; d < 3; ++d) {
        float got = cos[(p * 4 + l) * 3 + d];
        if (p == 2 && d == 2) {
          EXPECT_TRUE(std::isnan(got));
        } else {
          EXPECT_FLOAT_EQ(got, cosines(fixed_t0[p], fixed_d[d], 4)[l]) << "probe " << p << " layer " << l;
        }
      }
  // Minibatch: 3 and 9 imported (9 + 2 = 11 is complete at the checkpoint), 10 dropped, 12 new.
  EXPECT_EQ(read_vector<int64_t>(f, "sensitivity/probe_steps_minibatch", H5T_NATIVE_INT64),
            (std::vector<int64_t>{3, 9, 12}));
  auto mcos = read_vector<float>(f, "sensitivity/cosine_minibatch", H5T_NATIVE_FLOAT);
  ASSERT_EQ(mcos.size(), 3u * 4 * 2);
  EXPECT_FLOAT_EQ(mcos[(1 * 4 + 2) * 2 + 1], cosines(9, 2, 4)[2]);
  EXPECT_FLOAT_EQ(mcos[(2 * 4 + 0) * 2 + 1], cosines(12, 2, 4)[0]);

  // The same file through h5py: schema, gap-free steps, filtered tables, one resume event.
  std::string cmd = std::string(DD_PYTHON) + " " + DD_SCHEMA_CHECK + " resumed " + path + " 16 11";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
}

TEST(MetricsWriterResume, ResumingTwiceFromTheSameCheckpointKeepsOneCopyOfEachStep) {
  ScratchDir dir;
  std::string path = dir.file("metrics.h5");
  write_first_run(path);
  {
    MetricsWriter w(path, resume_opts(kResumeAfter));
    for (int64_t i = kResumeAfter + 1; i <= 18; ++i) log_step(w, i, 1, {}, {});
    w.close();  // killed again later, before the next checkpoint
  }
  {
    MetricsWriter w(path, resume_opts(kResumeAfter));
    for (int64_t i = kResumeAfter + 1; i <= 13; ++i) log_step(w, i, 1, {}, {});
    w.close();
  }
  Hid f(h5check(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), "open"));
  Hid smem = step_mem_type();
  EXPECT_EQ(step_column(read_table<StepRow>(f, "steps", smem)), iota_steps(14));
  Hid emem = sync_event_mem_type();
  EXPECT_EQ(read_table<SyncEventRow>(f, "sync_events", emem).size(), 28u);
  // Both resumes are history worth keeping; they carry the same step, so neither drops the other.
  auto events = read_events(f);
  int resumes = 0;
  for (const auto& e : events) resumes += e.kind == "resume";
  EXPECT_EQ(resumes, 2);
  EXPECT_EQ(events.size(), 4u);
}

// The scenario resume exists for: a background-flushing run SIGKILLed some steps after its checkpoint.
TEST(MetricsWriterResume, ContinuesAFileLeftBySigkill) {
  ScratchDir dir;
  std::string path = dir.file("metrics.h5");
  const int64_t checkpoint = 50;
  auto* published = static_cast<std::atomic<int64_t>*>(
      ::mmap(nullptr, sizeof(std::atomic<int64_t>), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(published, MAP_FAILED);
  new (published) std::atomic<int64_t>(0);
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    try {
      MetricsWriter w(path, {0.02, false, true});
      w.set_attributes({{"policy", "ddp"}});
      for (int64_t i = 0;; ++i) {
        w.append_step(step_row(i, 0));
        published->store(w.stats().steps);
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
      }
    } catch (...) {
      ::_exit(1);
    }
  }
  double waited = 0;
  while (published->load() < checkpoint + 6 && waited < 20) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    waited += 0.005;
  }
  ASSERT_EQ(::kill(pid, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFSIGNALED(status)) << "writer child exited early with status " << status;
  ASSERT_GE(published->load(), checkpoint + 6) << "the child published too little before the kill";
  ::munmap(published, sizeof(std::atomic<int64_t>));

  {
    MetricsWriter w(path, resume_opts(checkpoint));
    for (int64_t i = checkpoint + 1; i < 70; ++i) w.append_step(step_row(i, 1));
    w.close();
  }
  Hid f(h5check(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), "open"));
  Hid smem = step_mem_type();
  auto steps = read_table<StepRow>(f, "steps", smem);
  ASSERT_EQ(step_column(steps), iota_steps(70));
  EXPECT_DOUBLE_EQ(steps[checkpoint].loss, step_row(checkpoint, 0).loss);
  EXPECT_DOUBLE_EQ(steps[checkpoint + 1].loss, step_row(checkpoint + 1, 1).loss);
  EXPECT_EQ(read_string_attr(f, "policy"), "ddp");
}

TEST(MetricsWriterResume, StepsTheOldRunNeverFlushedAreNamedInTheResumeEvent) {
  ScratchDir dir;
  std::string path = dir.file("metrics.h5");
  {
    MetricsWriter w(path, {2.0, false, false});
    for (int64_t i = 0; i < 9; ++i) w.append_step(step_row(i, 0));
  }
  {
    MetricsWriter w(path, resume_opts(kResumeAfter));
    for (int64_t i = kResumeAfter + 1; i <= 13; ++i) w.append_step(step_row(i, 1));
  }
  Hid f(h5check(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), "open"));
  Hid smem = step_mem_type();
  EXPECT_EQ(step_column(read_table<StepRow>(f, "steps", smem)),
            (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 12, 13}));
  auto events = read_events(f);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kind, "resume");
  EXPECT_EQ(events[0].detail, "after step 11; steps 9..11 missing (never flushed by the interrupted run)");
}

TEST(MetricsWriterResume, MissingFileStartsFresh) {
  ScratchDir dir;
  std::string path = dir.file("metrics.h5");
  {
    MetricsWriter w(path, resume_opts(kResumeAfter));
    w.declare_sensitivity(ProbeKind::kFixedBatch, {1, 2}, 3);
    for (int64_t i = kResumeAfter + 1; i <= 13; ++i) w.append_step(step_row(i, 1));
  }
  Hid f(h5check(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), "open"));
  Hid smem = step_mem_type();
  EXPECT_EQ(step_column(read_table<StepRow>(f, "steps", smem)), (std::vector<int64_t>{12, 13}));
  auto events = read_events(f);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].step, kResumeAfter);
  EXPECT_EQ(events[0].detail, "after step 11 (no earlier metrics file)");
}

TEST(MetricsWriterResume, DifferentSensitivityShapeIsAUsageError) {
  ScratchDir dir;
  std::string path = dir.file("metrics.h5");
  write_first_run(path);
  MetricsWriter w(path, resume_opts(kResumeAfter));
  EXPECT_THROW(w.declare_sensitivity(ProbeKind::kFixedBatch, {1, 2, 8}, 4), dd::UsageError);
  EXPECT_THROW(w.declare_sensitivity(ProbeKind::kMinibatch, {1, 2}, 5), dd::UsageError);
  try {
    w.declare_sensitivity(ProbeKind::kFixedBatch, {1, 2}, 4);
    ADD_FAILURE() << "no error";
  } catch (const dd::UsageError& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("delays=1,2,4 over 4 layers"), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(w.declare_sensitivity(ProbeKind::kFixedBatch, {1, 2, 4}, 4));
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void expect_usage_error_naming(const std::string& path) {
  try {
    MetricsWriter w(path, resume_opts(kResumeAfter));
    ADD_FAILURE() << "resuming " << path << " did not fail";
  } catch (const dd::UsageError& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
}

TEST(MetricsWriterResume, CorruptFileIsAUsageErrorAndIsLeftUntouched) {
  ScratchDir dir;
  // Garbage bytes.
  std::string garbage = dir.file("garbage.h5");
  { std::ofstream(garbage, std::ios::binary) << "this is not an HDF5 file at all\n"; }
  expect_usage_error_naming(garbage);
  EXPECT_EQ(slurp(garbage), "this is not an HDF5 file at all\n");
  // Empty file (e.g. a disk that filled up).
  std::string empty = dir.file("empty.h5");
  { std::ofstream(empty, std::ios::binary); }
  expect_usage_error_naming(empty);
  // A real metrics file cut in half.
  std::string cut = dir.file("cut.h5");
  write_first_run(cut);
  std::string bytes = slurp(cut);
  { std::ofstream(cut, std::ios::binary | std::ios::trunc) << bytes.substr(0, bytes.size() / 2); }
  expect_usage_error_naming(cut);
  EXPECT_EQ(slurp(cut).size(), bytes.size() / 2);
  // Valid HDF5 that is not a metrics file.
  std::string other = dir.file("other.h5");
  {
    Hid f(h5check(H5Fcreate(other.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), "create other"));
  }
  expect_usage_error_naming(other);
}

}  // namespace
}  // namespace dd::telemetry
