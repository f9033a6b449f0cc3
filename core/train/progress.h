// Rank 0's progress line: redrawn in place on a terminal, plain periodic lines otherwise.
#pragma once
#include <cstdint>
#include <string>

namespace dd::train {

class Progress {
 public:
  Progress(int64_t total_steps, int64_t every);
  // Called every step; prints when due (terminal: at most ~10/s; otherwise every `every` steps).
  void update(int64_t step, float loss, double samples_per_s, double exposed_frac, double elapsed_s);
  void message(const std::string& line);  // a line that must not be overwritten
  void done();

 private:
  int64_t total_, every_;
  bool tty_;
  double last_draw_ = 0;
  bool dirty_ = false;
};

}  // namespace dd::train
