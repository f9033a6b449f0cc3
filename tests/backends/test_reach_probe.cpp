// ReachProbe (backends/common/reach_probe.h): a live probe answers many connections, one that is gone does not,
// and a malformed address is simply not reached.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>

#include "backends/common/reach_probe.h"

namespace dd {
namespace {

TEST(ReachProbe, AnswersWhileItLivesAndNotAfter) {
  auto p = std::make_unique<ReachProbe>("lo");
  const std::string a = p->address();
  EXPECT_EQ(a.rfind("127.0.0.1:", 0), 0u) << a;
  for (int i = 0; i < 200; ++i) ASSERT_TRUE(ReachProbe::reaches(a, 2.0)) << "connection " << i;  // beyond the backlog
  p.reset();
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_FALSE(ReachProbe::reaches(a, 2.0));  // refused at once on a closed port
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 1.0);
}

TEST(ReachProbe, MalformedAddressesAreNotReached) {
  for (const char* a : {"", "127.0.0.1", "127.0.0.1:", "127.0.0.1:0", "127.0.0.1:70000", "nohost:80", "1.2.3:80"})
    EXPECT_FALSE(ReachProbe::reaches(a, 0.2)) << a;
}

}  // namespace
}  // namespace dd
