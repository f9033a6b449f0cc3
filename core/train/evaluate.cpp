// Test-set evaluation and the helpers that adapt dataset batches to model inputs.
#include <cmath>
#include <cstdio>
#include <string>

#include "base/error.h"
#include "core/train/batch_upload.h"
#include "core/train/trainer_parts.h"

namespace dd::train {

void check_dataset_fits_model(const data::Dataset& d, const models::Model& m) {
  const int64_t classes = m.takes_tokens() ? m.vocab() : m.num_classes();
  if (d.tokens != m.takes_tokens() || d.x_shape != m.input_shape() || d.target_len != m.targets_per_sample() ||
      d.num_classes > classes)
    throw UsageError("--data " + d.name + " does not fit --model " + m.name() + " (its samples have another shape, " +
                     "or labels beyond the model's " + std::to_string(classes) + " classes)");
}

models::Input make_input(const data::Batch& b) {
  models::Input in;
  in.n = b.n;
  in.x = b.xf.empty() ? nullptr : b.xf.data();
  in.tokens = b.xi.empty() ? nullptr : b.xi.data();
  in.y = b.y.data();
  return in;
}

static nlohmann::json evaluate_local(models::Model& m, const data::Dataset& test, const TrainConfig& cfg) {
  int64_t limit = cfg.eval_samples > 0 ? cfg.eval_samples : (test.tokens ? 512 : test.size);
  limit = std::min(limit, test.size);
  const int64_t chunk = test.tokens ? 16 : 500;
  data::Batch b;
  BatchUpload up(m.device());  // evaluation runs where the model is
  double loss_sum = 0;
  int64_t correct = 0, preds = 0;
  for (int64_t first = 0; first < limit; first += chunk) {
    int64_t n = std::min(chunk, limit - first);
    data::gather_range(test, first, n, &b);
    auto r = m.forward(up.upload(b), false);
    loss_sum += double(r.loss) * double(r.predictions);
    correct += r.correct;
    preds += r.predictions;
  }
  nlohmann::json ev;
  double loss = preds ? loss_sum / double(preds) : NAN;
  ev["test_loss"] = loss;
  ev["test_accuracy"] = preds ? double(correct) / double(preds) : NAN;
  if (test.tokens) ev["perplexity"] = std::exp(loss);
  ev["eval_samples"] = limit;
  return ev;
}

nlohmann::json evaluate(models::Model& m, const data::Dataset& test, const TrainConfig& cfg, sync::RunControl* e) {
  if (!e) return evaluate_local(m, test, cfg);
  nlohmann::json ev;
  e->with_consensus([&] { ev = evaluate_local(m, test, cfg); });
  return ev;
}

std::string format_eval(int64_t step, const nlohmann::json& ev) {
  char buf[200];
  std::snprintf(buf, sizeof buf, "eval @ step %lld: test loss %.4f, test accuracy %.2f%%", (long long)(step + 1),
                ev["test_loss"].get<double>(), 100.0 * ev["test_accuracy"].get<double>());
  return buf;
}

}  // namespace dd::train
