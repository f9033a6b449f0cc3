// Causal multi-head attention: forward against a naive double loop, causality, finite-difference grads of qkv.
#include <gtest/gtest.h>

#include <cmath>

#include "core/ops/ops.h"
#include "tests/ops/gradcheck.h"

using namespace dd::ops;
using namespace dd::test;

namespace {
std::vector<double> attention_ref(const std::vector<float>& qkv, int64_t B, int64_t T, int64_t C, int64_t NH) {
  const int64_t hd = C / NH;
  std::vector<double> out(B * T * C, 0.0);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < NH; ++h)
      for (int64_t t = 0; t < T; ++t) {
        auto at = [&](int64_t tt, int64_t part, int64_t d) { return double(qkv[(b * T + tt) * 3 * C + part * C + h * hd + d]); };
        std::vector<double> s(t + 1);
        double m = -1e300, z = 0;
        for (int64_t j = 0; j <= t; ++j) {
          double v = 0;
          for (int64_t d = 0; d < hd; ++d) v += at(t, 0, d) * at(j, 1, d);
          s[j] = v / std::sqrt(double(hd));
          m = std::max(m, s[j]);
        }
        for (auto& v : s) z += (v = std::exp(v - m));
        for (int64_t j = 0; j <= t; ++j)
          for (int64_t d = 0; d < hd; ++d) out[(b * T + t) * C + h * hd + d] += s[j] / z * at(j, 2, d);
      }
  return out;
}

void attention_case(int64_t B, int64_t T, int64_t C, int64_t NH) {
  SCOPED_TRACE("B=" + std::to_string(B) + " T=" + std::to_string(T) + " C=" + std::to_string(C) +
               " NH=" + std::to_string(NH));
  auto qkv = randn(B * T * 3 * C, 1), R = randn(B * T * C, 2);
  std::vector<float> out(B * T * C), att(B * NH * T * T);
  auto loss = [&] {
    attention_forward(out.data(), att.data(), qkv.data(), B, T, C, NH);
    return dot(out, R);
  };
  loss();
  auto ref = attention_ref(qkv, B, T, C, NH);
  for (size_t i = 0; i < out.size(); ++i) ASSERT_NEAR(out[i], ref[i], 1e-5) << "out " << i;
  for (int64_t r = 0; r < B * NH * T; ++r) {
    const int64_t t = r % T;
    double s = 0;
    for (int64_t j = 0; j < T; ++j) {
      s += att[r * T + j];
      if (j > t) EXPECT_EQ(att[r * T + j], 0.f);
    }
    EXPECT_NEAR(s, 1.0, 1e-5);
  }
  std::vector<float> dqkv(qkv.size(), 7.f), scratch(attention_scratch_floats(B, T, C, NH));
  attention_backward(dqkv.data(), scratch.data(), R.data(), qkv.data(), att.data(), B, T, C, NH);
  check_grad("attention dqkv", qkv, dqkv, loss, 1e-2f, 2e-2, 2e-3, 300);
}
}  // namespace

TEST(Attention, OddT) { attention_case(2, 5, 8, 2); }
TEST(Attention, ThreeHeads) { attention_case(1, 7, 12, 3); }
TEST(Attention, SingleHeadSingleToken) { attention_case(3, 1, 4, 1); }
TEST(Attention, LongerSequence) { attention_case(2, 33, 16, 4); }

TEST(Attention, FutureTokensDoNotChangeThePast) {
  const int64_t B = 2, T = 9, C = 12, NH = 3;
  auto qkv = randn(B * T * 3 * C, 3);
  std::vector<float> out1(B * T * C), out2(out1.size()), att(B * NH * T * T);
  attention_forward(out1.data(), att.data(), qkv.data(), B, T, C, NH);
  const int64_t tf = 6;  // rewrite q, k and v of tokens >= tf in every batch row
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = tf; t < T; ++t)
      for (int64_t c = 0; c < 3 * C; ++c) qkv[(b * T + t) * 3 * C + c] += 5.f;
  attention_forward(out2.data(), att.data(), qkv.data(), B, T, C, NH);
  int changed_future = 0;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t)
      for (int64_t c = 0; c < C; ++c) {
        const int64_t i = (b * T + t) * C + c;
        if (t < tf)
          EXPECT_EQ(out1[i], out2[i]) << "b=" << b << " t=" << t << " c=" << c;
        else
          changed_future += out1[i] != out2[i];
      }
  EXPECT_GT(changed_future, 0);  // the edit was visible where it should be
}
