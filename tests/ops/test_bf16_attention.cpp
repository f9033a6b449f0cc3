// --precision bf16: causal attention forward and backward against a double-precision reference, the bound of
// test_bf16.cpp (a bf16 GEMM term: (2u + u^2) S + gamma_{K+3} (1+u)^2 S) carried through the softmax.
//
// Forward, per row t of a (batch, head): the scores S_j = scale q.k_j (a bf16 GEMM, K = head size) are off by at
// most d_j; with d = max_j d_j, softmax(S + e) / softmax(S) lies in [exp(-2d), exp(2d)] for any |e_j| <= d, so
// |P~_j - P_j| <= P_j expm1(2d). The fp32 softmax adds a relative eta <= (|S_j - m| + 2d) u32 (the subtraction,
// amplified by exp) + e_exp (vecmath.h's exp: relative error ~1e-7, taken as 4 u32) + gamma_{T+4} (the sum, the
// reciprocal, the product). So |P^_j - P_j| <= P_j rho, rho = expm1(2d) + exp(2d) eta. The output o = P^ V (a bf16
// GEMM, K = T) is off by rho sum P_j |v_j| + the GEMM term of (1 + rho) sum P_j |v_j|.
// Backward, given the stored P (exact input): dA = dO V^T and dV = P^T dO are bf16 GEMMs; the fp32 softmax
// backward dS_j = P_j (dA_j - sum_k P_k dA_k) carries dA's error (and gamma_{T+2} of its magnitudes); dQ = scale dS K
// and dK = scale dS^T Q carry dS's error through |K|, |Q| plus their own GEMM term.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <vector>

#include "core/ops/ops.h"
#include "tests/ops/bf16_bounds.h"

using namespace dd;
using namespace dd::ops;
using namespace dd::bf16_test;

namespace {

constexpr int64_t B = 2, T = 24, C = 64, NH = 4, hd = C / NH, C3 = 3 * C;

// Exact softmax rows (double) of the given qkv, and each row's score bound d.
struct Exact {
  std::vector<double> P, d, d32, range;  // d32: the score bound of an fp32 GEMM
};
Exact exact_softmax(const std::vector<float>& qkv) {
  const double scale = 1 / std::sqrt(double(hd));
  Exact e{std::vector<double>(B * NH * T * T), std::vector<double>(B * NH * T), std::vector<double>(B * NH * T),
          std::vector<double>(B * NH * T)};
  for (int64_t bh = 0; bh < B * NH; ++bh)
    for (int64_t t = 0; t < T; ++t) {
      const int64_t b = bh / NH, h = bh % NH;
      std::vector<double> s(t + 1);
      double m = -INFINITY, lo = INFINITY, dmax = 0, dmax32 = 0;
      for (int64_t j = 0; j <= t; ++j) {
        double v = 0, S = 0;
        for (int64_t i = 0; i < hd; ++i) {
          const double a = qkv[(b * T + t) * C3 + h * hd + i], k = qkv[(b * T + j) * C3 + C + h * hd + i];
          v += a * k, S += std::fabs(a * k);
        }
        s[j] = scale * v, m = std::max(m, s[j]), lo = std::min(lo, s[j]);
        dmax = std::max(dmax, gemm_term(scale * S, hd)), dmax32 = std::max(dmax32, gamma32(hd + 3) * scale * S);
      }
      double z = 0;
      for (double v : s) z += std::exp(v - m);
      for (int64_t j = 0; j <= t; ++j) e.P[(bh * T + t) * T + j] = std::exp(s[j] - m) / z;
      e.d[bh * T + t] = dmax, e.d32[bh * T + t] = dmax32, e.range[bh * T + t] = m - lo;
    }
  return e;
}

using Bf16Attention = Fixture;

// Forward: att and out of `qkv_run` against the exact values of `qkv` (the same unless testing a wrong input).
Ratio forward_ratio(Precision p, const std::vector<float>& qkv, const std::vector<float>& qkv_run) {
  set_precision(p);
  std::vector<float> out(B * T * C), att(B * NH * T * T);
  attention_forward(out.data(), att.data(), qkv_run.data(), B, T, C, NH);
  set_precision(Precision::fp32);
  const Exact e = exact_softmax(qkv);
  Ratio q;
  for (int64_t bh = 0; bh < B * NH; ++bh)
    for (int64_t t = 0; t < T; ++t) {
      const int64_t b = bh / NH, h = bh % NH, row = bh * T + t;
      const double d = e.d[row], eta = (e.range[row] + 2 * d) * kU32 + 4 * kU32 + gamma32(T + 4);
      const double rho = std::expm1(2 * d) + std::exp(2 * d) * eta;
      const double d32 = e.d32[row], rho32 = std::expm1(2 * d32) + std::exp(2 * d32) * eta;
      for (int64_t j = 0; j <= t; ++j) {
        const double P = e.P[row * T + j];
        q.add(att[row * T + j], P, P * rho + 1e-300, P * rho32 + 1e-300);
      }
      for (int64_t i = 0; i < hd; ++i) {
        double o = 0, S = 0;
        for (int64_t j = 0; j <= t; ++j) {
          const double v = qkv[(b * T + j) * C3 + 2 * C + h * hd + i];
          o += e.P[row * T + j] * v, S += e.P[row * T + j] * std::fabs(v);
        }
        q.add(out[(b * T + t) * C + h * hd + i], o, rho * S + gemm_term((1 + rho) * S, T),
              rho32 * S + gamma32(T + 3) * (1 + rho32) * S);
      }
    }
  return q;
}

TEST_F(Bf16Attention, ForwardWithinBound) {
  const auto qkv = normal(B * T * C3, 21);
  const Ratio q = forward_ratio(Precision::bf16, qkv, qkv);
  std::printf("error / bf16 bound %.3g, error / fp32 bound %.3g\n", q.bf16, q.fp32);
  EXPECT_LE(q.bf16, 1.0) << "bf16 attention forward outside its bound";
  EXPECT_GT(q.fp32, 1.0) << "bf16 attention forward within fp32's bound everywhere: did it compute in bf16?";
  EXPECT_LE(forward_ratio(Precision::fp32, qkv, qkv).fp32, 1.0) << "fp32 attention outside fp32's bound";
  // Wrong: fp32 with the first feature of every value vector dropped.
  auto bad = qkv;
  for (int64_t r = 0; r < B * T; ++r) bad[r * C3 + 2 * C] = 0;
  EXPECT_GT(forward_ratio(Precision::fp32, qkv, bad).bf16, 1.0) << "the bound does not catch a dropped term";
}

// Backward: dq, dk, dv of the stored exact P (rounded to float, then exact input) and `dout_run` against the
// exact values of `dout` (the same unless testing a wrong input).
Ratio backward_ratio(Precision p, const std::vector<float>& qkv, const std::vector<float>& dout,
                     const std::vector<float>& att, const std::vector<float>& dout_run) {
  set_precision(p);
  std::vector<float> dqkv(B * T * C3), scratch(attention_scratch_floats(B, T, C, NH));
  attention_backward(dqkv.data(), scratch.data(), dout_run.data(), qkv.data(), att.data(), B, T, C, NH);
  set_precision(Precision::fp32);
  const double scale = 1 / std::sqrt(double(hd));
  Ratio q;
  auto at = [&](int64_t b, int64_t t, int64_t part, int64_t h, int64_t i) { return (b * T + t) * C3 + part * C + h * hd + i; };
  for (int64_t bh = 0; bh < B * NH; ++bh) {
    const int64_t b = bh / NH, h = bh % NH;
    // dA, its bound, and dS with its bound (bf16 and fp32-only).
    std::vector<double> dA(T * T), eA(T * T), eA32(T * T), dS(T * T), eS(T * T), eS32(T * T);
    for (int64_t t = 0; t < T; ++t)
      for (int64_t j = 0; j < T; ++j) {
        double s = 0, S = 0;
        for (int64_t i = 0; i < hd; ++i) {
          const double x = double(dout[(b * T + t) * C + h * hd + i]) * qkv[at(b, j, 2, h, i)];
          s += x, S += std::fabs(x);
        }
        dA[t * T + j] = s, eA[t * T + j] = gemm_term(S, hd), eA32[t * T + j] = gamma32(hd + 3) * S;
      }
    for (int64_t t = 0; t < T; ++t) {
      const float* P = att.data() + (bh * T + t) * T;
      double dot = 0, edot = 0, edot32 = 0, mag = 0;
      for (int64_t j = 0; j <= t; ++j)
        dot += P[j] * dA[t * T + j], edot += P[j] * eA[t * T + j], edot32 += P[j] * eA32[t * T + j],
            mag += P[j] * (std::fabs(dA[t * T + j]) + eA[t * T + j]);
      edot += gamma32(T + 2) * mag, edot32 += gamma32(T + 2) * mag;
      for (int64_t j = 0; j <= t; ++j) {
        const double r = std::fabs(dA[t * T + j]) + eA[t * T + j] + std::fabs(dot) + edot;
        dS[t * T + j] = P[j] * (dA[t * T + j] - dot);
        eS[t * T + j] = P[j] * (eA[t * T + j] + edot + gamma32(2) * r);
        eS32[t * T + j] = P[j] * (eA32[t * T + j] + edot32 + gamma32(2) * r);
      }
    }
    for (int64_t t = 0; t < T; ++t)
      for (int64_t i = 0; i < hd; ++i) {
        double dq = 0, eq = 0, eq32 = 0, Sq = 0, dk = 0, ek = 0, ek32 = 0, Sk = 0, dv = 0, Sv = 0;
        for (int64_t j = 0; j < T; ++j) {
          const double K = qkv[at(b, j, 1, h, i)], Q = qkv[at(b, j, 0, h, i)];
          dq += scale * dS[t * T + j] * K, eq += scale * eS[t * T + j] * std::fabs(K), eq32 += scale * eS32[t * T + j] * std::fabs(K);
          Sq += scale * (std::fabs(dS[t * T + j]) + eS[t * T + j]) * std::fabs(K);
          dk += scale * dS[j * T + t] * Q, ek += scale * eS[j * T + t] * std::fabs(Q), ek32 += scale * eS32[j * T + t] * std::fabs(Q);
          Sk += scale * (std::fabs(dS[j * T + t]) + eS[j * T + t]) * std::fabs(Q);
          const double x = double(att[(bh * T + j) * T + t]) * dout[(b * T + j) * C + h * hd + i];
          dv += x, Sv += std::fabs(x);
        }
        q.add(dqkv[at(b, t, 0, h, i)], dq, eq + gemm_term(Sq, T) + 1e-300, eq32 + gamma32(T + 3) * Sq + 1e-300);
        q.add(dqkv[at(b, t, 1, h, i)], dk, ek + gemm_term(Sk, T) + 1e-300, ek32 + gamma32(T + 3) * Sk + 1e-300);
        q.add(dqkv[at(b, t, 2, h, i)], dv, gemm_term(Sv, T) + 1e-300, gamma32(T + 3) * Sv + 1e-300);
      }
  }
  return q;
}

TEST_F(Bf16Attention, BackwardWithinBound) {
  const auto qkv = normal(B * T * C3, 31), dout = normal(B * T * C, 32);
  const Exact e = exact_softmax(qkv);
  std::vector<float> att(e.P.size());
  for (size_t i = 0; i < att.size(); ++i) att[i] = float(e.P[i]);
  const Ratio q = backward_ratio(Precision::bf16, qkv, dout, att, dout);
  std::printf("error / bf16 bound %.3g, error / fp32 bound %.3g\n", q.bf16, q.fp32);
  EXPECT_LE(q.bf16, 1.0) << "bf16 attention backward outside its bound";
  EXPECT_GT(q.fp32, 1.0) << "bf16 attention backward within fp32's bound everywhere: did it compute in bf16?";
  EXPECT_LE(backward_ratio(Precision::fp32, qkv, dout, att, dout).fp32, 1.0)
      << "fp32 attention backward outside fp32's bound";
  // Wrong: fp32 with the first feature of every upstream gradient dropped.
  auto bad = dout;
  for (int64_t r = 0; r < B * T; ++r) bad[r * C] = 0;
  EXPECT_GT(backward_ratio(Precision::fp32, qkv, dout, att, bad).bf16, 1.0) << "the bound does not catch a dropped term";
}

}  // namespace
