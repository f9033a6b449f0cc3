// MetricsWriter round trip: every table, attribute and sensitivity array read back with the HDF5 C API and h5py.
#include <gtest/gtest.h>
#include <hdf5.h>

#include <chrono>
#include <cmath>
#include <thread>

#include "base/clock.h"
#include "base/error.h"
#include "core/telemetry/hdf5_types.h"
#include "core/telemetry/metrics_writer.h"
#include "tests/telemetry/test_util.h"

namespace dd::telemetry {
namespace {

using testing::column_names;
using testing::read_scalar_attr;
using testing::read_string_attr;
using testing::read_table;
using testing::rows_of;
using testing::ScratchDir;

StepRow make_step(int64_t i) {
  StepRow r;
  r.step = i;
  r.wall_time_s = 0.01 * static_cast<double>(i);
  r.loss = 2.3 / (1.0 + 0.01 * static_cast<double>(i));
  r.lr = 0.1;
  r.forward_ms = 1.5;
  r.backward_ms = 3.0;
  r.update_ms = 0.25;
  r.exposed_comm_ms = 0.5 + static_cast<double>(i % 7);
  r.bytes_sent = 1000 * i;
  r.samples_per_s = 512.0;
  return r;
}

// Writes one run exercising every table; returns the file path.
void write_full_run(const std::string& path, int64_t n_steps) {
  MetricsWriterOptions o;
  o.background = false;
  MetricsWriter w(path, o);
  w.set_attributes({{"policy", "dreamddp:h=8"}, {"model", "mlp"}, {"backend", "gloo"}});
  w.set_attribute("world", int64_t{4});
  w.set_attribute("lr", 0.05);
  w.set_attribute("hosts", std::vector<std::string>{"node-a", "node-b"});
  std::vector<LayerInfo> layers;
  for (int i = 0; i < 4; ++i) layers.push_back({i, "fc" + std::to_string(i), "Linear", 100 * (i + 1), 400 * (i + 1)});
  w.write_layers(layers);
  w.declare_sensitivity(ProbeKind::kFixedBatch, {1, 2, 4, 8}, 4);
  w.declare_sensitivity(ProbeKind::kMinibatch, {1, 2}, 4);
  for (int64_t i = 0; i < n_steps; ++i) {
    w.append_step(make_step(i));
    for (int32_t b = 0; b < 2; ++b)
      w.append_sync_event({i, 2 * b, 2 * b + 1, b ? SyncAction::kAverageParams : SyncAction::kAllreduceGrads, 0, 0,
                           4096 * (b + 1), 0.001 * b, 0.001 * b + 0.002});
    w.append_layer_ready({i, 0, static_cast<int32_t>(i % 4), 0.0005 * static_cast<double>(i % 4)});
    if (i % 100 == 0) w.append_eval({i, 1.0 / (1 + i), 0.5 + 0.001 * static_cast<double>(i), std::nan("")});
    if (i == n_steps / 2) w.flush();  // a mid-run flush must not duplicate or lose rows
  }
  w.append_event(7, "switch", "ddp -> dreamddp:h=8");
  w.append_event(9, "anomaly", "loss spike 3.2x");
  // Fixed-batch probes at steps 0 and 10, all delays; values encode (probe, layer, delay).
  for (int64_t p : {0, 10})
    for (int32_t d : {1, 2, 4, 8}) {
      std::vector<float> v;
      for (int l = 0; l < 4; ++l) v.push_back(static_cast<float>(p) + 0.1f * static_cast<float>(l) + 0.01f * static_cast<float>(d));
      w.record_cosine(ProbeKind::kFixedBatch, p, d, v);
    }
  // Minibatch probe that never gets its delay 2: must be kept at close with NaN there.
  w.record_cosine(ProbeKind::kMinibatch, 5, 1, {0.9f, 0.8f, 0.7f, 0.6f});
  w.close();
}

TEST(MetricsWriter, RoundTripEveryTableWithCApi) {
  ScratchDir dir;
  std::string path = dir.file("metrics.h5");
  const int64_t n = 1000;
  write_full_run(path, n);

  Hid f(h5check(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), "open"));
  EXPECT_EQ(read_string_attr(f, "policy"), "dreamddp:h=8");
  EXPECT_EQ(read_string_attr(f, "backend"), "gloo");
  EXPECT_EQ(read_scalar_attr<int64_t>(f, "world", H5T_NATIVE_INT64), 4);
  EXPECT_DOUBLE_EQ(read_scalar_attr<double>(f, "lr", H5T_NATIVE_DOUBLE), 0.05);
  EXPECT_EQ(read_scalar_attr<int64_t>(f, "telemetry_schema_version", H5T_NATIVE_INT64), 1);

  EXPECT_EQ(column_names(f, "steps"),
            (std::vector<std::string>{"step", "wall_time_s", "loss", "lr", "forward_ms", "backward_ms", "update_ms",
                                      "exposed_comm_ms", "bytes_sent", "samples_per_s"}));
  EXPECT_EQ(column_names(f, "sync_events"),
            (std::vector<std::string>{"step", "first_layer", "last_layer", "action", "group", "rank", "bytes",
                                      "launch_s", "end_s"}));
  EXPECT_EQ(column_names(f, "eval"), (std::vector<std::string>{"step", "test_loss", "test_accuracy", "perplexity"}));
  EXPECT_EQ(column_names(f, "layer_ready"), (std::vector<std::string>{"step", "rank", "layer", "ready_s"}));
  EXPECT_EQ(column_names(f, "events"), (std::vector<std::string>{"step", "kind", "detail"}));
  EXPECT_EQ(column_names(f, "layers"), (std::vector<std::string>{"index", "name", "kind", "params", "bytes"}));

  Hid smem = step_mem_type();
  auto steps = read_table<StepRow>(f, "steps", smem);
  ASSERT_EQ(steps.size(), static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    StepRow e = make_step(i);
    ASSERT_EQ(steps[i].step, i);
    ASSERT_DOUBLE_EQ(steps[i].loss, e.loss);
    ASSERT_DOUBLE_EQ(steps[i].exposed_comm_ms, e.exposed_comm_ms);
    ASSERT_EQ(steps[i].bytes_sent, e.bytes_sent);
  }

  Hid emem = sync_event_mem_type();
  auto sync = read_table<SyncEventRow>(f, "sync_events", emem);
  ASSERT_EQ(sync.size(), static_cast<size_t>(2 * n));
  EXPECT_EQ(sync[3].step, 1);
  EXPECT_EQ(sync[3].action, SyncAction::kAverageParams);
  EXPECT_EQ(sync[2].action, SyncAction::kAllreduceGrads);
  EXPECT_EQ(sync[3].first_layer, 2);
  EXPECT_EQ(sync[3].last_layer, 3);
  EXPECT_EQ(sync[3].bytes, 8192);
  EXPECT_DOUBLE_EQ(sync[3].end_s, 0.003);

  // The enum's names are in the file, so h5dump/h5py users see "average_params", not just 1.
  {
    Hid ds(H5Dopen2(f, "sync_events", H5P_DEFAULT));
    Hid t(H5Dget_type(ds));
    Hid at(H5Tget_member_type(t, static_cast<unsigned>(H5Tget_member_index(t, "action"))));
    ASSERT_EQ(H5Tget_class(at), H5T_ENUM);
    char name[64];
    int8_t v = 1;
    ASSERT_GE(H5Tenum_nameof(at, &v, name, sizeof name), 0);
    EXPECT_STREQ(name, "average_params");
  }

  Hid evmem = eval_mem_type();
  auto ev = read_table<EvalRow>(f, "eval", evmem);
  ASSERT_EQ(ev.size(), 10u);
  EXPECT_EQ(ev[3].step, 300);
  EXPECT_DOUBLE_EQ(ev[3].test_accuracy, 0.8);
  EXPECT_TRUE(std::isnan(ev[3].perplexity));

  Hid rmem = layer_ready_mem_type();
  EXPECT_EQ(read_table<LayerReadyRow>(f, "layer_ready", rmem).size(), static_cast<size_t>(n));

  Hid lmem = layer_mem_type();
  auto layers = read_table<LayerInfoC>(f, "layers", lmem);
  ASSERT_EQ(layers.size(), 4u);
  EXPECT_STREQ(layers[2].name, "fc2");
  EXPECT_STREQ(layers[2].kind, "Linear");
  EXPECT_EQ(layers[2].params, 300);
  EXPECT_EQ(layers[2].bytes, 1200);
  {
    Hid ds(H5Dopen2(f, "layers", H5P_DEFAULT));
    Hid sp(H5Dget_space(ds));
    H5Dvlen_reclaim(lmem, sp, H5P_DEFAULT, layers.data());
  }

  Hid tmem = event_mem_type();
  auto events = read_table<EventRowC>(f, "events", tmem);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].step, 7);
  EXPECT_STREQ(events[0].kind, "switch");
  EXPECT_STREQ(events[1].detail, "loss spike 3.2x");
  {
    Hid ds(H5Dopen2(f, "events", H5P_DEFAULT));
    Hid sp(H5Dget_space(ds));
    H5Dvlen_reclaim(tmem, sp, H5P_DEFAULT, events.data());
  }

  // /sensitivity/cosine[probe, layer, delay]
  Hid cos(h5check(H5Dopen2(f, "sensitivity/cosine", H5P_DEFAULT), "open cosine"));
  Hid cs(H5Dget_space(cos));
  hsize_t dims[3];
  ASSERT_EQ(H5Sget_simple_extent_ndims(cs), 3);
  H5Sget_simple_extent_dims(cs, dims, nullptr);
  EXPECT_EQ(dims[0], 2u);
  EXPECT_EQ(dims[1], 4u);
  EXPECT_EQ(dims[2], 4u);
  std::vector<float> cv(2 * 4 * 4);
  h5check_status(H5Dread(cos, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, cv.data()), "read cosine");
  // probe 1 (step 10), layer 3, delay index 2 (d=4)
  EXPECT_FLOAT_EQ(cv[(1 * 4 + 3) * 4 + 2], 10.f + 0.3f + 0.04f);
  EXPECT_FLOAT_EQ(cv[(0 * 4 + 1) * 4 + 0], 0.f + 0.1f + 0.01f);
  Hid ps(H5Dopen2(f, "sensitivity/probe_steps", H5P_DEFAULT));
  std::vector<int64_t> pv(rows_of(ps));
  H5Dread(ps, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, pv.data());
  EXPECT_EQ(pv, (std::vector<int64_t>{0, 10}));
  Hid dl(H5Dopen2(f, "sensitivity/delays", H5P_DEFAULT));
  std::vector<int32_t> dv(rows_of(dl));
  H5Dread(dl, H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, dv.data());
  EXPECT_EQ(dv, (std::vector<int32_t>{1, 2, 4, 8}));

  Hid cm(h5check(H5Dopen2(f, "sensitivity/cosine_minibatch", H5P_DEFAULT), "open cosine_minibatch"));
  std::vector<float> mv(1 * 4 * 2);
  Hid ms(H5Dget_space(cm));
  ASSERT_EQ(H5Sget_simple_extent_npoints(ms), 8);
  H5Dread(cm, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, mv.data());
  EXPECT_FLOAT_EQ(mv[0], 0.9f);        // layer 0, d=1
  EXPECT_TRUE(std::isnan(mv[1]));      // layer 0, d=2 never recorded
  EXPECT_FLOAT_EQ(mv[3 * 2 + 0], 0.6f);
}

TEST(MetricsWriter, H5pyReadsTheSchema) {
  ScratchDir dir;
  std::string path = dir.file("metrics.h5");
  write_full_run(path, 250);
  std::string cmd = std::string(DD_PYTHON) + " " + DD_SCHEMA_CHECK + " schema " + path +
                    " steps=250 sync_events=500 eval=3 layer_ready=250 events=2 layers=4 probes=2 probes_minibatch=1";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
}

TEST(MetricsWriter, RefusesToOverwriteUnlessAllowed) {
  ScratchDir dir;
  std::string path = dir.file("metrics.h5");
  { MetricsWriter w(path, {2.0, false, false}); }
  EXPECT_THROW(MetricsWriter(path, {2.0, false, false}), dd::UsageError);
  MetricsWriter w(path, {2.0, /*overwrite=*/true, false});
  w.append_step(make_step(0));
  w.close();
  Hid f(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
  Hid ds(H5Dopen2(f, "steps", H5P_DEFAULT));
  EXPECT_EQ(rows_of(ds), 1u);
}

TEST(MetricsWriter, UnwritableDirectoryIsAUsageError) {
  EXPECT_THROW(MetricsWriter("/nonexistent-dir-dd/metrics.h5", {2.0, false, false}), dd::UsageError);
}

TEST(MetricsWriter, BackgroundThreadPublishesWhileRunning) {
  ScratchDir dir;
  std::string path = dir.file("metrics.h5");
  MetricsWriter w(path, {0.05, false, true});
  for (int i = 0; i < 300; ++i) w.append_step(make_step(i));
  double deadline = dd::now_s() + 10;
  while (w.stats().steps < 300 && dd::now_s() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_EQ(w.stats().steps, 300);
  // The writer is still open; the published file is complete and readable now.
  Hid f(h5check(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), "open while writing"));
  Hid ds(H5Dopen2(f, "steps", H5P_DEFAULT));
  EXPECT_EQ(rows_of(ds), 300u);
}

TEST(MetricsWriter, AppendIsCheapWhileFlushing) {
  ScratchDir dir;
  MetricsWriter w(dir.file("metrics.h5"), {0.01, false, true});
  const int n = 200000;
  double t0 = dd::now_s();
  for (int i = 0; i < n; ++i) w.append_step(make_step(i));
  double per_row_us = (dd::now_s() - t0) / n * 1e6;
  w.close();
  EXPECT_EQ(w.stats().steps, n);
  // A mutex + vector push_back (~0.05 us); the bound is loose so a loaded or sanitized build does not flake,
  // while an HDF5 write per row (tens of us) would still break it.
  EXPECT_LT(per_row_us, 10.0);
}

TEST(MetricsWriter, RejectsMisuseOfSensitivity) {
  ScratchDir dir;
  MetricsWriter w(dir.file("metrics.h5"), {2.0, false, false});
  EXPECT_THROW(w.record_cosine(ProbeKind::kFixedBatch, 0, 1, {1.f}), std::invalid_argument);
  EXPECT_THROW(w.declare_sensitivity(ProbeKind::kFixedBatch, {2, 1}, 3), std::invalid_argument);
  w.declare_sensitivity(ProbeKind::kFixedBatch, {1, 2}, 3);
  EXPECT_THROW(w.declare_sensitivity(ProbeKind::kFixedBatch, {1, 2}, 4), std::invalid_argument);
  EXPECT_THROW(w.record_cosine(ProbeKind::kFixedBatch, 0, 3, {1.f, 1.f, 1.f}), std::invalid_argument);
  EXPECT_THROW(w.record_cosine(ProbeKind::kFixedBatch, 0, 1, {1.f}), std::invalid_argument);
}

}  // namespace
}  // namespace dd::telemetry
