// What the emulated cluster shapes every link to: a rate, and optionally a one-way delay and a loss rate.
#pragma once
#include <string>

namespace dd::netem {

// Link shaping applied by --netem RATE[,delay=D][,loss=P].
struct NetemSpec {
  double rate_bps = 0;     // token-bucket rate of every link, bits per second
  double delay_s = 0;      // one-way rank-to-rank latency added by netem (0 = none)
  double loss_pct = 0;     // packet loss in percent added by netem (0 = none)
  std::string text;        // the spec as the user wrote it, for messages
};

}  // namespace dd::netem
