// Checkpoint format: "DDCKPT1\n", fingerprint, step, arenas, optimizer state, engine blob, probe blob (absent in
// files of earlier versions), then a CRC32 of all of it (zlib), so truncation or corruption is detected before
// anything is loaded.
#include "core/train/checkpoint.h"
#include "core/train/checkpoint_file.h"

#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <mutex>
#include <sstream>

#include "backends/backend.h"
#include "core/common/bytes.h"
#include "base/error.h"
#include "core/sync/engine/sync_session.h"
#include "core/sync/policy/registry.h"
#include "core/train/run_dir.h"
#include "core/train/sensitivity.h"
#include "core/ops/device_bytes.h"

namespace dd::train {

static const char kMagic[] = "DDCKPT1\n";

std::string checkpoint_path(const std::string& dir, int rank) {
  return dir + "/checkpoint.rank" + std::to_string(rank) + ".bin";
}

std::string previous_checkpoint_path(const std::string& dir, int rank) {
  return dir + "/checkpoint.rank" + std::to_string(rank) + ".prev.bin";
}

std::string choose_checkpoint(const std::string& dir, int rank, Backend* b) {
  std::vector<std::pair<int64_t, std::string>> mine;
  std::string first_error;
  for (const auto& p : {checkpoint_path(dir, rank), previous_checkpoint_path(dir, rank)}) {
    try {
      mine.push_back({checkpoint_step(p), p});
    } catch (const UsageError& e) {
      if (first_error.empty()) first_error = e.what();
    }
  }
  std::string blob;
  for (auto& [s, p] : mine) blob += std::to_string(s) + " ";
  std::vector<std::string> all{blob};
  if (b && b->size() > 1) all = b->allgather(blob);
  // The newest of my steps that every rank also has.
  int64_t best = -1;
  std::string path;
  for (auto& [s, p] : mine) {
    bool everywhere = true;
    for (auto& other : all) everywhere &= (" " + other).find(" " + std::to_string(s) + " ") != std::string::npos;
    if (everywhere && s > best) best = s, path = p;
  }
  if (best < 0)
    throw UsageError(mine.empty() ? first_error
                                  : "--resume " + dir + ": the ranks hold no checkpoint of a common step (rank " +
                                        std::to_string(rank) + " has steps " + blob + ")");
  return path;
}

namespace {

std::string fingerprint_of(const TrainConfig& c, int64_t num_params) {
  std::ostringstream s;
  s << "model=" << c.model << "\nparams=" << num_params << "\nworld=" << c.world << "\nrank=" << c.rank
    << "\nbatch=" << c.batch << "\nseed=" << c.seed << "\npolicy=" << c.policy << "\noptimizer=" << name(c.optimizer)
    << "\ndata=" << c.data << "\n";
  for (auto& sw : c.switches) s << "switch=" << sw << "\n";
  return s.str();
}

}  // namespace

std::string fingerprint_diff(const std::string& want, const std::string& got) {
  if (want == got) return "";
  std::istringstream a(want), b(got);
  std::string la, lb, diff;
  while (std::getline(a, la)) {
    if (!std::getline(b, lb)) lb.clear();
    if (la != lb) diff += (diff.empty() ? "" : ", ") + la.substr(0, la.find('=')) + " (checkpoint: " + lb + ", now: " + la + ")";
  }
  return diff.empty() ? "fields differ" : diff;
}

std::string checkpoint_fingerprint(const TrainConfig& c, const models::Model& m) {
  return fingerprint_of(c, m.num_params());
}

namespace {

// The fingerprint and step of an intact checkpoint file. Throws dd::UsageError.
std::pair<std::string, int64_t> checkpoint_header(const std::string& path);

// The value of the first "key=value" line of a fingerprint ("" when absent).
std::string fingerprint_field(const std::string& fp, const std::string& key) {
  std::istringstream in(fp);
  for (std::string line; std::getline(in, line);)
    if (line.compare(0, key.size() + 1, key + "=") == 0) return line.substr(key.size() + 1);
  return "";
}

// Rank q's intact checkpoints in `dir`: {step, path}, newest file first.
std::vector<std::pair<int64_t, std::string>> intact_checkpoints(const std::string& dir, int q) {
  std::vector<std::pair<int64_t, std::string>> out;
  for (const auto& p : {checkpoint_path(dir, q), previous_checkpoint_path(dir, q)}) {
    try {
      out.push_back({checkpoint_step(p), p});
    } catch (const UsageError&) {
    }
  }
  return out;
}

}  // namespace

// Why a policy's saved state cannot be carried to another world size ("" when it can). Parameters, optimizer
// state, schedules, delayed averages in flight and outer-optimizer anchors are rank 0's and identical on every new
// rank; what is refused keeps state that is per old rank or laid out over the old ranks.
std::string unmappable_policy_state(const sync::PolicySpec& spec) {
  std::vector<const sync::PolicySpec*> parts{&spec};
  if (spec.composite()) parts = {&spec.parts[0], &spec.parts[1]};
  for (const sync::PolicySpec* part : parts) {
    const std::string& name = part->name;
    if (name == "threshold" || name == "autothreshold" || name == "hybrid")
      return "policy " + spec.text + " decides from per-rank statistics summed over the old ranks";
    if (name == "hier") return "policy " + spec.text + " lays its groups over the old ranks";
    if (part->get_str("compress", "none") != "none")
      return "policy " + spec.text + " keeps error-feedback residuals per rank and per shard of the old world";
  }
  return "";
}

std::string finished_run(int64_t step, int64_t steps) {
  return "its checkpoint was written after step " + std::to_string(step) + ", the last of this run's " +
         std::to_string(steps) + ": the run trained every step, nothing is left to resume, and its directory stays as "
         "it is (raise --steps to train further)";
}

// The newest of rank 0's intact steps (`zero`) that the files of ranks 1..world-1 in `dir` hold too, with its path
// ({-1, ""} when none). `lenient`: when some rank has no file here at all, rank 0's newest.
static std::pair<int64_t, std::string> newest_common_step(const std::string& dir,
                                                   const std::vector<std::pair<int64_t, std::string>>& zero, int world,
                                                   bool lenient) {
  std::vector<std::vector<std::pair<int64_t, std::string>>> others;
  bool all_here = true;
  for (int q = 1; q < world; ++q) {
    others.push_back(intact_checkpoints(dir, q));
    all_here &= !others.back().empty();
  }
  std::pair<int64_t, std::string> best{-1, ""};
  for (const auto& [step, path] : zero) {
    bool everywhere = true;
    for (const auto& o : others) {
      bool has = false;
      for (const auto& e : o) has |= e.first == step;
      everywhere &= has || (lenient && !all_here);
    }
    if (everywhere && step > best.first) best = {step, path};
  }
  return best;
}

ResumePlan plan_resume(const std::string& dir, const TrainConfig& cfg) {
  ResumePlan plan;
  plan.from_world = cfg.world;
  plan.from_rank = cfg.rank;
  // The writer's world size, from rank 0's newest intact file: every rank reads the same one, so all decide alike.
  const auto zero = intact_checkpoints(dir, 0);
  std::string fp;
  if (!zero.empty()) {
    fp = checkpoint_header(zero.front().second).first;
  } else {
    plan.path = choose_checkpoint(dir, cfg.rank, nullptr);  // names what is wrong with this rank's own file
    fp = checkpoint_header(plan.path).first;
  }
  const std::string w = fingerprint_field(fp, "world");
  const int M = w.empty() ? 0 : std::atoi(w.c_str());
  if (M < 1) throw UsageError("--resume " + dir + ": checkpoint names no world size");
  if (M == cfg.world) {
    // A checkpoint of another configuration (model, batch, policy, ...) is refused here, before anything is written;
    // the parameter count follows from the model spec and is checked when the file is read.
    TrainConfig writer = cfg;
    writer.rank = zero.empty() ? cfg.rank : 0;
    const std::string got_params = fingerprint_field(fp, "params");
    const std::string diff = fingerprint_diff(fingerprint_of(writer, std::atoll(got_params.c_str())), fp);
    if (!diff.empty())
      throw UsageError("--resume " + dir + ": the checkpoint is from another run configuration: " + diff);
    if (plan.path.empty()) plan.path = choose_checkpoint(dir, cfg.rank, nullptr);  // this rank has an intact one
    plan.step = checkpoint_step(plan.path);
    // A finished run is refused here, from the files alone, before any rank makes a directory: the newest step
    // every rank's files hold (what the ranks would agree on) is the last one.
    const int64_t common = newest_common_step(dir, zero, cfg.world, false).first;
    if (common == cfg.steps - 1) throw UsageError("--resume " + dir + ": " + finished_run(common, cfg.steps));
    return plan;
  }
  const std::string head = "--resume " + dir + ": cannot resume a " + std::to_string(M) + "-rank checkpoint on " +
                           std::to_string(cfg.world) + " rank(s): ";
  if (zero.empty()) throw UsageError(head + "rank 0's checkpoint, which every new rank loads, is not readable here");
  if (M == 1) throw UsageError(head + "a single process's checkpoint holds no sync engine state to start the ranks from");
  // Everything but the world size and the rank must match.
  TrainConfig writer = cfg;
  writer.world = M;
  writer.rank = 0;
  const std::string want = checkpoint_fingerprint(writer, *models::make_model(cfg.model, cfg.seed));
  if (const std::string diff = fingerprint_diff(want, fp); !diff.empty())
    throw UsageError(head + "it is from another run configuration: " + diff);
  std::vector<sync::PolicySpec> specs{sync::PolicySpec::parse(cfg.policy)};
  for (auto& sw : sync::parse_switches(cfg.switches)) specs.push_back(sw.spec);
  for (auto& spec : specs)
    if (const std::string why = unmappable_policy_state(spec); !why.empty()) throw UsageError(head + why);
  if (!cfg.sensitivity.empty()) throw UsageError(head + "the sensitivity probe's open probe is per rank (drop --sensitivity)");
  // The newest step every old rank holds when their files are here (a complete generation), else rank 0's newest.
  if (const auto [step, path] = newest_common_step(dir, zero, M, true); step > plan.step) plan.step = step, plan.path = path;
  if (plan.step < 0) throw UsageError(head + "the old ranks hold no checkpoint of a common step");
  if (plan.step == cfg.steps - 1) throw UsageError("--resume " + dir + ": " + finished_run(plan.step, cfg.steps));
  if (plan.step >= cfg.steps)
    throw UsageError(head + "it was written after step " + std::to_string(plan.step) + ", outside this run's steps 0.." +
                     std::to_string(cfg.steps - 1) + " (raise --steps?)");
  plan.same_world = false;
  plan.from_world = M;
  plan.from_rank = 0;
  return plan;
}

void write_checkpoint(const std::string& path, const TrainConfig& cfg, int64_t step, models::Model& m,
                      optim::Optimizer& opt, sync::EngineState* engine, const SensitivityProbe* probe,
                      int64_t data_position) {
  ByteWriter w;
  w.put_str(checkpoint_fingerprint(cfg, m));
  w.put<int64_t>(step);
  for (const ops::DeviceFloats* a : {&m.params(), &m.buffers(), &opt.state()})
    ops::put_device_floats(w, *a);  // the state on the model's device; the file on the host
  w.put_vec(opt.layer_steps());
  w.put_str(engine ? engine->save_state() : std::string());
  w.put_str(probe ? probe->save_state() : std::string());
  w.put<int64_t>(data_position >= 0 ? data_position : (step + 1) * cfg.world * cfg.batch);
  std::string body = w.bytes();
  uint32_t crc = uint32_t(crc32(0L, reinterpret_cast<const Bytef*>(body.data()), uInt(body.size())));
  std::string file = std::string(kMagic) + body;
  file.append(reinterpret_cast<const char*>(&crc), 4);
  // Keep the previous generation: ranks are killed at different moments, and resuming needs a common step.
  // A hard link moves the current file to `prev` by atomic renames only, so at every instant PATH holds a complete
  // checkpoint (old or new) and `prev` the one before; a kill anywhere in here loses nothing.
  const std::string prev = path.substr(0, path.size() - 4) + ".prev.bin";
  const std::string prev_tmp = prev + ".link";
  std::error_code ec;
  if (std::filesystem::exists(path, ec)) {
    std::filesystem::remove(prev_tmp, ec);
    std::filesystem::create_hard_link(path, prev_tmp, ec);
    if (!ec) std::filesystem::rename(prev_tmp, prev, ec);
    if (ec) std::filesystem::copy_file(path, prev, std::filesystem::copy_options::overwrite_existing, ec);
  }
  write_file_atomic(path, file);
}

namespace {
// Where a rank looked for its file: on a cluster without a shared filesystem each host holds its own ranks' files.
std::string missing_where(const std::string& path) {
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  std::error_code ec;
  const bool there = std::filesystem::exists(path, ec);
  return std::string(" on host ") + host + (there ? "" : " (no such file there: each rank resumes from the file it "
                                                          "wrote, on its own host)");
}
}  // namespace

std::string checkpoint_body(const std::string& path) {
  std::ifstream f(path, std::ios::binary | std::ios::ate);
  if (!f) throw UsageError("--resume: cannot read checkpoint " + path + missing_where(path));
  const std::streamoff n = f.tellg();
  const size_t hdr = sizeof(kMagic) - 1;
  char magic[sizeof(kMagic) - 1] = {};
  f.seekg(0);
  if (n < std::streamoff(hdr + 4) || !f.read(magic, hdr) || std::memcmp(magic, kMagic, hdr) != 0)
    throw UsageError("--resume: " + path + " is not a dreamddp checkpoint (bad magic or too short)");
  // One read of the body straight into its string (no per-character stream iteration, no second copy).
  std::string body(size_t(n) - hdr - 4, '\0');
  uint32_t crc = 0;
  if (!f.read(body.data(), std::streamsize(body.size())) || !f.read(reinterpret_cast<char*>(&crc), 4))
    throw UsageError("--resume: cannot read checkpoint " + path);
  if (crc != uint32_t(crc32(0L, reinterpret_cast<const Bytef*>(body.data()), uInt(body.size()))))
    throw UsageError("--resume: " + path + " is truncated or corrupt (CRC mismatch)");
  return body;
}

namespace {
// A file's identity for the header cache: same inode, size and modification time means the same bytes (a writer
// replaces checkpoints by rename, which gives a new inode).
struct FileStamp {
  dev_t dev = 0;
  ino_t ino = 0;
  off_t size = -1;
  int64_t mtime_ns = 0;
  bool operator==(const FileStamp& o) const {
    return dev == o.dev && ino == o.ino && size == o.size && mtime_ns == o.mtime_ns;
  }
};

bool stamp_of(const std::string& path, FileStamp* s) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return false;
  s->dev = st.st_dev;
  s->ino = st.st_ino;
  s->size = st.st_size;
  s->mtime_ns = int64_t(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  return true;
}

// Resuming asks about the same few files many times (which world wrote them, which steps each rank holds, which
// generation is common): each file is read and CRC-checked once per process, and its verdict (header or error) is
// kept while the file is unchanged.
struct HeaderVerdict {
  FileStamp stamp;
  std::string fingerprint, error;
  int64_t step = -1;
};

std::pair<std::string, int64_t> checkpoint_header(const std::string& path) {
  static std::mutex mu;
  static std::map<std::string, HeaderVerdict> cache;
  FileStamp stamp;
  const bool stamped = stamp_of(path, &stamp);
  if (stamped) {
    std::lock_guard<std::mutex> lock(mu);
    auto it = cache.find(path);
    if (it != cache.end() && it->second.stamp == stamp) {
      if (!it->second.error.empty()) throw UsageError(it->second.error);
      return {it->second.fingerprint, it->second.step};
    }
  }
  HeaderVerdict v;
  v.stamp = stamp;
  try {
    const std::string body = checkpoint_body(path);  // ByteReader points into it
    ByteReader r(body);
    v.fingerprint = r.get_str();
    v.step = r.get<int64_t>();
  } catch (const UsageError& e) {
    v.error = e.what();
  } catch (const std::exception& e) {
    v.error = "--resume: " + path + ": " + e.what();
  }
  FileStamp after;  // cache only what was read from a file that did not change meanwhile
  if (stamped && stamp_of(path, &after) && after == stamp) {
    std::lock_guard<std::mutex> lock(mu);
    cache[path] = v;
  }
  if (!v.error.empty()) throw UsageError(v.error);
  return {v.fingerprint, v.step};
}
}  // namespace

int64_t checkpoint_step(const std::string& path) { return checkpoint_header(path).second; }

}  // namespace dd::train
