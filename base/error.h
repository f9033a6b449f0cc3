// Error types that the CLI maps to docs/cli.md exit codes: UsageError -> 2, PeerLost -> 3, anything else -> 1.
#pragma once
#include <stdexcept>
#include <string>

namespace dd {

// Bad usage or bad input: unknown option/policy, invalid value, missing/corrupt dataset, bad output dir. Exit 2.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A peer was lost or a collective timed out. The message names the rank. Exit 3.
struct PeerLost : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Anomaly guard asked to stop (checkpoint written). Exit 4.
struct AnomalyStop : std::runtime_error {
  using std::runtime_error::runtime_error;
};

}  // namespace dd

#define DD_CHECK(cond, msg)                                                             \
  do {                                                                                  \
    if (!(cond))                                                                        \
      throw std::runtime_error(std::string(__FILE__) + ":" + std::to_string(__LINE__) + \
                               ": " + (msg));                                           \
  } while (0)
