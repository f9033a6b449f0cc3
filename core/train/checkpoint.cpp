// Checkpoint format: "DDCKPT1\n", fingerprint, step, arenas, optimizer state, engine blob, probe blob (absent in
// files of earlier versions), then a CRC32 of all of it (zlib), so truncation or corruption is detected before
// anything is loaded.
#include "core/train/checkpoint.h"

#include <zlib.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>

#include "backends/backend.h"
#include "core/common/bytes.h"
#include "core/common/error.h"
#include "core/sync/engine.h"
#include "core/train/sensitivity.h"
#include "core/train/run_dir.h"

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

std::string checkpoint_fingerprint(const TrainConfig& c, const models::Model& m) {
  std::ostringstream s;
  s << "model=" << c.model << "\nparams=" << m.num_params() << "\nworld=" << c.world << "\nrank=" << c.rank
    << "\nbatch=" << c.batch << "\nseed=" << c.seed << "\npolicy=" << c.policy << "\noptimizer=" << c.optimizer
    << "\ndata=" << c.data << "\n";
  for (auto& sw : c.switches) s << "switch=" << sw << "\n";
  return s.str();
}

void write_checkpoint(const std::string& path, const TrainConfig& cfg, int64_t step, models::Model& m,
                      optim::Optimizer& opt, sync::SyncEngine* engine, const SensitivityProbe* probe) {
  ByteWriter w;
  w.put_str(checkpoint_fingerprint(cfg, m));
  w.put<int64_t>(step);
  w.put_floats(m.params().data(), m.params().size());
  w.put_floats(m.buffers().data(), m.buffers().size());
  w.put_floats(opt.state().data(), opt.state().size());
  w.put_vec(opt.layer_steps());
  w.put_str(engine ? engine->save_state() : std::string());
  w.put_str(probe ? probe->save_state() : std::string());
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

// The verified body of a checkpoint file (magic and CRC checked).
static std::string checkpoint_body(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw UsageError("--resume: cannot read checkpoint " + path);
  std::string file((std::istreambuf_iterator<char>(f)), {});
  const size_t hdr = sizeof(kMagic) - 1;
  if (file.size() < hdr + 4 || file.compare(0, hdr, kMagic) != 0)
    throw UsageError("--resume: " + path + " is not a dreamddp checkpoint (bad magic or too short)");
  std::string body = file.substr(hdr, file.size() - hdr - 4);
  uint32_t crc;
  std::memcpy(&crc, file.data() + file.size() - 4, 4);
  if (crc != uint32_t(crc32(0L, reinterpret_cast<const Bytef*>(body.data()), uInt(body.size()))))
    throw UsageError("--resume: " + path + " is truncated or corrupt (CRC mismatch)");
  return body;
}

int64_t checkpoint_step(const std::string& path) {
  try {
    const std::string body = checkpoint_body(path);  // ByteReader points into it
    ByteReader r(body);
    r.get_str();
    return r.get<int64_t>();
  } catch (const UsageError&) {
    throw;
  } catch (const std::exception& e) {
    throw UsageError("--resume: " + path + ": " + e.what());
  }
}

int64_t read_checkpoint(const std::string& path, const TrainConfig& cfg, models::Model& m, optim::Optimizer& opt,
                        sync::SyncEngine* engine, SensitivityProbe* probe) {
  const std::string body = checkpoint_body(path);
  try {
    ByteReader r(body);
    const std::string want = checkpoint_fingerprint(cfg, m), got = r.get_str();
    if (got != want) {
      std::istringstream a(want), b(got);
      std::string la, lb, diff;
      while (std::getline(a, la)) {
        std::getline(b, lb);
        if (la != lb) diff += (diff.empty() ? "" : ", ") + la.substr(0, la.find('=')) + " (checkpoint: " + lb + ", now: " + la + ")";
      }
      throw UsageError("--resume: " + path + " is from another run configuration: " + (diff.empty() ? "fields differ" : diff));
    }
    const int64_t step = r.get<int64_t>();
    if (step < 0 || step >= cfg.steps)
      throw UsageError("--resume: " + path + " was written after step " + std::to_string(step) +
                       ", outside this run's steps 0.." + std::to_string(cfg.steps - 1) + " (raise --steps?)");
    r.get_floats(m.params().data(), m.params().size());
    r.get_floats(m.buffers().data(), m.buffers().size());
    r.get_floats(opt.state().data(), opt.state().size());
    auto steps = r.get_vec<int64_t>();
    if (steps.size() != opt.layer_steps().size()) throw UsageError("--resume: " + path + ": optimizer state of another model");
    opt.layer_steps() = steps;
    const std::string eng = r.get_str();
    if (engine) {
      if (eng.empty()) throw UsageError("--resume: " + path + " was written by a single-process run");
      engine->load_state(eng);
    }
    if (!r.done()) {
      const std::string ps = r.get_str();
      if (probe && !ps.empty()) probe->load_state(ps);
    }
    if (!r.done()) throw UsageError("--resume: " + path + " has trailing bytes");
    return step;
  } catch (const UsageError&) {
    throw;
  } catch (const std::exception& e) {
    throw UsageError("--resume: " + path + ": " + e.what());
  }
}

}  // namespace dd::train
