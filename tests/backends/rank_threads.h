// Test helper: run N ranks as threads over one in-process Gloo HashStore and collect their failures.
#pragma once
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gloo/rendezvous/hash_store.h>

#include "backends/gloo/gloo_backend.h"
#include "base/error.h"

namespace dd::test {

inline BackendOptions thread_opts(double timeout_s = 20) {
  BackendOptions o;
  o.kind = dd::BackendKind::Gloo;
  o.timeout_s = timeout_s;
  o.prefix = "test";
  return o;
}

// Runs fn(rank, backend) on n threads; returns "" or the first rank's error text (so a test can ASSERT on it).
inline std::string run_ranks(int n, const std::function<void(int, Backend&)>& fn,
                             BackendOptions opts = thread_opts()) {
  auto store = std::make_shared<gloo::rendezvous::HashStore>();
  std::vector<std::string> errors(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      try {
        auto be = make_gloo_backend(r, n, store, opts);
        fn(r, *be);
      } catch (const std::exception& e) {
        errors[r] = "rank " + std::to_string(r) + ": " + e.what();
      }
    });
  for (auto& t : threads) t.join();
  for (auto& e : errors)
    if (!e.empty()) return e;
  return "";
}

}  // namespace dd::test
