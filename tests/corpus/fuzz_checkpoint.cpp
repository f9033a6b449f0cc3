// libFuzzer target: checkpoint bodies. The input is sealed with the magic and a correct CRC, so the fuzzer
// explores the field parsing behind the CRC; every body must load or raise a UsageError, never crash.
#include <zlib.h>

#include <cstdint>
#include <cstring>
#include <memory>

#include "base/error.h"
#include "core/models/model.h"
#include "core/optim/optimizer.h"
#include "core/train/checkpoint.h"
#include "tests/corpus/fuzz_input_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static dd::train::TrainConfig cfg = [] {
    dd::train::TrainConfig c;
    c.model = "resnet20";  // the smallest reference model keeps an iteration cheap
    c.data = "synthetic";
    c.optimizer = dd::train::OptimizerKind::Sgd;
    c.batch = 2;  // seed inputs: bodies of `train --model resnet20 --data synthetic --batch 2` checkpoints
    return c;
  }();
  static std::unique_ptr<dd::models::Model> model = dd::models::make_model(cfg.model, 0);
  static std::unique_ptr<dd::optim::Optimizer> opt = [] {
    dd::optim::OptimConfig oc;
    oc.kind = dd::optim::OptimizerKind::Sgd;
    return std::make_unique<dd::optim::Optimizer>(oc, *model);
  }();
  std::string file = "DDCKPT1\n";
  file.append(reinterpret_cast<const char*>(data), size);
  const uint32_t crc = uint32_t(crc32(0L, data, uInt(size)));
  file.append(reinterpret_cast<const char*>(&crc), 4);
  const std::string& path =
      dd::fuzz::input_file(reinterpret_cast<const uint8_t*>(file.data()), file.size(), ".ckpt");
  try {
    dd::train::checkpoint_step(path);
    dd::train::read_checkpoint(path, cfg, *model, *opt, nullptr);
  } catch (const dd::UsageError&) {
  }
  return 0;
}
