// Boost.Program_options description of the train options; INI files use the same names (key = value).
#include "app/cli/train_options.h"

#include <boost/lexical_cast.hpp>
#include <boost/program_options.hpp>
#include <charconv>
#include <type_traits>
#include <cstdlib>
#include <cerrno>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "backends/backend.h"
#include "base/error.h"

namespace po = boost::program_options;

namespace dd::cli {

namespace {

// A default as the user would write it: floating-point values in their shortest round-trip form ("0.9" for the
// float 0.9f, which Boost's lexical_cast prints as 0.899999976).
template <typename T>
std::string as_written(const T& v) {
  if constexpr (std::is_floating_point_v<T>) {
    char buf[64];
    const auto r = std::to_chars(buf, buf + sizeof buf, v);
    return std::string(buf, r.ptr);
  } else {
    return boost::lexical_cast<std::string>(v);
  }
}

template <typename T>
po::typed_value<T>* with_default(T* v) {
  return po::value(v)->default_value(*v, as_written(*v));
}

// Options read as words and parsed once after the command line (and --config): the rest of the program sees only
// values.
struct Words {
  std::string seed, optimizer;
  std::string backend, device, lr_schedule, anomaly, on_peer_loss = "exit", subnormals = "flush",
              precision = "fp32", last_period = "local";
};

// Every train option, bound to `c` or, for the enumerated ones, to `w`.
void describe_train_options(po::options_description& d, train::TrainConfig& c, Words& w) {
  // clang-format off
  d.add_options()
    ("help,h", "show this help")
    ("config", po::value(&c.config_file), "INI file with the same options (key = value)")
    ("model", with_default(&c.model), "mlp | cnn | resnet20 | gpt-mini | gpt2[:k=v,...] | llama[:k=v,...] | resnet18[:k=v,...] | resnet50[:k=v,...] (docs/models.md)")
    ("data", with_default(&c.data), "fashion-mnist | text | synthetic")
    ("data-dir", po::value(&c.data_dir), "dataset location (default: the Debian package's)")
    ("policy", with_default(&c.policy), "ddp | localsgd:k=8 | plsgd:h=8 | dreamddp:h=8[,profile=DIR][,fillin=1] | fixed:... | threshold:... | autothreshold | staleness:t=T | hybrid | hier:nodes=AxB | A+staleness:t=T (core/sync/policies/POLICIES.md)")
    ("switch", po::value(&c.switches)->composing(), "STEP:SPEC, change policy at STEP (repeatable)")
    ("backend", with_default(&w.backend), "gloo | mpi | nccl")
    ("device", with_default(&w.device), "cpu | cuda")
    ("batch", with_default(&c.batch), "per-rank batch size")
    ("steps", with_default(&c.steps), "training steps")
    ("lr", po::value(&c.lr), "learning rate (default: sgd 0.05, adamw 0.001)")
    ("momentum", with_default(&c.momentum), "SGD momentum")
    ("nesterov", po::bool_switch(&c.nesterov), "Nesterov momentum")
    ("weight-decay", with_default(&c.weight_decay), "weight decay (AdamW: decoupled)")
    ("optimizer", po::value(&w.optimizer), "sgd | adamw (default: sgd; adamw for gpt-mini, gpt2, llama)")
    ("lr-schedule", with_default(&w.lr_schedule), "const | cosine | step")
    ("warmup", po::value(&c.warmup), "linear warm-up steps (default 2% of --steps)")
    ("seed", po::value(&w.seed)->default_value("0"), "seed of initialization and data order (0 .. 2^64-1)")
    ("eval-every", with_default(&c.eval_every), "test-set evaluation every N steps (and at the end)")
    ("eval-samples", with_default(&c.eval_samples), "test samples per evaluation (0: all; text: 512)")
    ("out", po::value(&c.out), "run directory: metrics.h5, summary.json")
    ("overwrite", po::bool_switch(&c.overwrite), "allow a non-empty --out")
    ("checkpoint-every", with_default(&c.checkpoint_every), "checkpoint every N steps")
    ("resume", po::value(&c.resume), "resume from a run directory's checkpoint")
    ("sensitivity", po::value(&c.sensitivity)->implicit_value("on"), "layer sensitivity probe [delays=1,2,4,8][,every=N]")
    ("save-params", po::value(&c.save_params), "write final parameters (raw float32; %r = rank)")
    ("rendezvous", po::value(&c.rendezvous), "file:///path | redis://host:port")
    ("iface", po::value(&c.iface), "network interface for Gloo (also GLOO_SOCKET_IFNAME)")
    ("timeout", with_default(&c.timeout_s), "collective timeout, seconds")
    ("on-peer-loss", with_default(&w.on_peer_loss), "exit | shrink: a lost peer ends the run (exit 3), or the survivors continue")
    ("rejoin", po::bool_switch(&c.rejoin), "join the live run of this rendezvous (with --on-peer-loss shrink)")
    ("heartbeat", po::value(&c.heartbeat_s), "with --on-peer-loss shrink: a member whose heartbeat stands still this long "
     "is lost (seconds; default min(timeout, max(1, timeout/10)); 0: off, a silent member is found at its timeout)")
    ("rejoins-in-place", po::value(&c.rejoins_in_place), "with --on-peer-loss shrink: a rank that the others "
     "excluded (stopped or cut off while they agreed) asks to join again from the same process, at most N times "
     "(default 8; 0: it exits 3, for a launcher to start it again)")
    ("threads", with_default(&c.threads), "compute threads per rank (0: auto)")
    ("last-period", with_default(&w.last_period), "local | scheduled: a periodic policy's last period leaves its layer averages to the run's closing average, or makes them as planned (docs/cli.md)")
    ("subnormals", with_default(&w.subnormals), "flush | keep: subnormal floats flushed to zero on every compute thread (FTZ/DAZ), or kept")
    ("precision", with_default(&w.precision), "fp32 | bf16: GEMMs and convolutions on bf16 inputs with fp32 accumulation (CPUs with avx512_bf16 or AMX); master weights, optimizer, reductions and communication stay fp32")
    ("log-every", with_default(&c.log_every), "progress line every N steps (0: auto)")
    ("check-collectives", po::bool_switch(&c.check_collectives), "fingerprint every collective across ranks")
    ("staleness-lr", po::value(&c.staleness_gamma)->implicit_value(0.9, as_written(0.9)), "scale lr_l by GAMMA^stale_l (default 0.9)")
    ("immediate-update", po::bool_switch(&c.immediate_update), "update each layer as soon as its sync is done")
    ("anomaly", with_default(&w.anomaly), "off | fallback | stop: on NaN/Inf or a loss spike")
    ("anomaly-spike", with_default(&c.anomaly_spike), "loss spike factor over its EMA (0: off)")
    ("anomaly-window", with_default(&c.anomaly_window), "fallback: lock-step steps")
    ("inject-nan", with_default(&c.inject_nan), "testing: poison a gradient on rank 0 at STEP")
    ("control-file", po::value(&c.control_file), "rank 0 watches FILE; a policy spec written there is switched to")
    ("avg-optimizer-state", po::bool_switch(&c.average_optimizer_state), "average optimizer state with parameters")
    ("bucket-cap-mb", with_default(&c.bucket_cap_mb), "bucket cap, MiB")
    ("first-bucket-mb", with_default(&c.first_bucket_mb), "first bucket cap, MiB");
  // clang-format on
}

// The command line, then --config FILE; false when --help was printed.
bool read_train_options(int argc, char** argv, const po::options_description& d, po::variables_map& vm) {
  auto parsed = po::command_line_parser(argc, argv).options(d).run();
  for (auto& o : parsed.options)
    if (o.unregistered || o.string_key.empty())
      throw UsageError("unexpected argument '" + (o.original_tokens.empty() ? std::string("?") : o.original_tokens[0]) + "'");
  po::store(parsed, vm);
  if (vm.count("help")) {
    std::cout << d << "\n";
    return false;
  }
  if (vm.count("config")) {
    const std::string file = vm["config"].as<std::string>();
    std::error_code ec;
    if (!std::filesystem::is_regular_file(file, ec)) throw UsageError("--config " + file + ": not a readable file");
    std::ifstream f(file);
    if (!f) throw UsageError("--config " + file + ": cannot read file");
    try {
      po::store(po::parse_config_file(f, d, false), vm);
    } catch (const po::error& e) {
      throw UsageError("--config " + file + ": " + e.what());
    }
  }
  return true;
}

// Values Boost accepts but that are out of range for us (a given value never silently means "the default").
void check_numbers(const po::variables_map& vm, const Words& w, train::TrainConfig& c) {
  const std::string& seed = w.seed;
  if (seed.empty() || seed.find_first_not_of("0123456789") != std::string::npos || seed.size() > 20)
    throw UsageError("--seed " + seed + ": expected an integer in [0, 2^64)");
  errno = 0;
  c.seed = std::strtoull(seed.c_str(), nullptr, 10);
  if (errno == ERANGE) throw UsageError("--seed " + seed + ": expected an integer in [0, 2^64)");
  if (vm.count("lr") && !(c.lr > 0 && std::isfinite(c.lr))) throw UsageError("--lr must be a positive number");
  if (vm.count("staleness-lr") && !(c.staleness_gamma > 0 && c.staleness_gamma <= 1))
    throw UsageError("--staleness-lr must be in (0, 1]");
  if (vm.count("warmup") && c.warmup < 0) throw UsageError("--warmup must be >= 0");
  if (vm.count("optimizer") && w.optimizer.empty())
    throw UsageError("--optimizer: empty value (expected sgd or adamw)");
}

// The enumerated options' words as values, and what --on-peer-loss and --rejoin (or DREAMDDP_REJOIN) ask for.
void parse_words(const Words& w, train::TrainConfig& c) {
  c.device = train::parse_device(w.device);
  c.backend = train::parse_backend(w.backend);
  c.optimizer = train::parse_optimizer(w.optimizer);
  c.lr_schedule = train::parse_lr_schedule(w.lr_schedule);
  c.anomaly = train::parse_anomaly(w.anomaly);
  if (w.on_peer_loss != "exit" && w.on_peer_loss != "shrink")
    throw UsageError("--on-peer-loss '" + w.on_peer_loss + "' is not one of exit, shrink");
  c.shrink_on_peer_loss = w.on_peer_loss == "shrink";
  if (w.last_period != "local" && w.last_period != "scheduled")
    throw UsageError("--last-period '" + w.last_period + "' is not one of local, scheduled");
  c.last_period_local = w.last_period == "local";
  if (w.subnormals != "flush" && w.subnormals != "keep")
    throw UsageError("--subnormals '" + w.subnormals + "' is not one of flush, keep");
  c.subnormals = w.subnormals == "flush" ? Subnormals::flush : Subnormals::keep;
  if (w.precision != "fp32" && w.precision != "bf16")
    throw UsageError("--precision '" + w.precision + "' is not one of fp32, bf16");
  c.precision = w.precision == "bf16" ? Precision::bf16 : Precision::fp32;
  // `dreamddp launch --max-restarts` starts a lost rank again this way (docs/elastic.md "Rejoin").
  if (const char* j = std::getenv("DREAMDDP_REJOIN"); j && std::string(j) == "1") c.rejoin = true;
  if (c.rejoin && !c.shrink_on_peer_loss)
    throw UsageError("--rejoin joins a live world that admits ranks: it needs --on-peer-loss shrink");
  if (c.heartbeat_s != -1 && !c.shrink_on_peer_loss)
    throw UsageError("--heartbeat finds silent members for the survivors of a loss: it needs --on-peer-loss shrink");
  if (c.rejoins_in_place != -1 && !c.shrink_on_peer_loss)
    throw UsageError("--rejoins-in-place rejoins a rank that a shrink excluded: it needs --on-peer-loss shrink");
  if (c.rejoins_in_place != -1 && !(c.rejoins_in_place >= 0 && c.rejoins_in_place <= 1000))
    throw UsageError("--rejoins-in-place must be in [0, 1000]");
  if (c.heartbeat_s != -1 && c.heartbeat_s != 0 && !(c.heartbeat_s >= 0.1 && c.heartbeat_s <= 86400))
    throw UsageError("--heartbeat must be 0 (off) or in [0.1, 86400] seconds");
}

}  // namespace

bool parse_train_options(int argc, char** argv, train::TrainConfig& c) {
  Words w;
  w.backend = name(c.backend);
  w.device = name(c.device);
  w.lr_schedule = train::name(c.lr_schedule);
  w.anomaly = name(c.anomaly);
  po::options_description d("dreamddp train options");
  describe_train_options(d, c, w);
  po::variables_map vm;
  if (!read_train_options(argc, argv, d, vm)) return false;
  po::notify(vm);
  check_numbers(vm, w, c);
  parse_words(w, c);
  return true;
}

void place_rank(train::TrainConfig& c) {
  RankInfo r = discover_rank();
  c.rank = r.rank;
  c.world = r.world;
  c.local_rank = r.local_rank;
  c.local_world = 1;
  for (const char* v : {"LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE", "SLURM_NTASKS_PER_NODE"})
    if (const char* s = std::getenv(v)) {
      c.local_world = std::max(1, std::atoi(s));
      break;
    }
  // srun -N2 -n4 sets no SLURM_NTASKS_PER_NODE; its step's per-node list says how many tasks share this node.
  const char* step = std::getenv("SLURM_STEP_TASKS_PER_NODE");
  const char* node = std::getenv("SLURM_NODEID");
  if (c.local_world == 1 && r.source == "slurm" && step && node)
    c.local_world = std::max(1, slurm_tasks_on_node(step, std::atoi(node)));
  if (c.world > 1 && c.local_world == 1 && r.source == "none") c.local_world = c.world;
}

}  // namespace dd::cli
