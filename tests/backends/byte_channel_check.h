// The byte-channel contract every backend with run_bytes keeps (called by each rank of a group): exact all-to-all
// and all-gather of raw bytes on the communication thread, in order with the float ops submitted before them; an
// exception inside the operation fails only its Work and the backend stays usable.
#pragma once
#include <gtest/gtest.h>

#include <stdexcept>
#include <vector>

#include "backends/backend.h"

namespace dd::test {

inline void check_byte_channel(Backend& be) {
  const int n = be.size(), r = be.rank();
  const size_t block = 1001;
  std::vector<uint8_t> in(block * size_t(n)), out(block * size_t(n)), mine(block, uint8_t(r + 1)), all(block * size_t(n));
  for (int q = 0; q < n; ++q)
    for (size_t i = 0; i < block; ++i) in[size_t(q) * block + i] = uint8_t(r * 16 + q + i % 7);
  std::vector<float> f(10, float(r));
  auto w0 = be.allreduce(f.data(), f.size(), ReduceOp::Sum);
  auto w1 = be.run_bytes([&](ByteChannel& ch) {
    ch.alltoall(in.data(), out.data(), block);
    ch.allgather(mine.data(), all.data(), block);
  }, "bytes", block);
  w1->wait();
  EXPECT_TRUE(w0->test()) << "byte ops run after the float op submitted before them";
  for (int q = 0; q < n; ++q)
    for (size_t i = 0; i < block; ++i) {
      ASSERT_EQ(out[size_t(q) * block + i], uint8_t(q * 16 + r + i % 7)) << "from rank " << q;
      ASSERT_EQ(all[size_t(q) * block + i], uint8_t(q + 1));
    }
  auto bad = be.run_bytes([](ByteChannel&) { throw std::runtime_error("inside"); }, "bytes", 0);
  EXPECT_THROW(bad->wait(), std::runtime_error);
  be.allreduce(f.data(), f.size(), ReduceOp::Sum)->wait();
}

}  // namespace dd::test
