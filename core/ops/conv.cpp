// Conv2d through oneDNN 2.6 forward / backward-data / backward-weights primitives, built once per (N,H,W).
// The user side is always plain NCHW / OIHW. By default the primitives choose their own ("any") layouts and
// cached reorders convert at the edges; DD_CONV_LAYOUT=plain forces plain layouts (see bench_ops for timings).
// Under --precision bf16 (base/precision.h) the primitives read bf16 inputs (src, weights, diff_dst; the staging
// reorders round them, nearest even) and write fp32 outputs (dst, diff_src, diff_weights), accumulating in fp32.
#include <dnnl.hpp>

#include <cstdlib>
#include <cstring>
#include <map>
#include <omp.h>
#include <tuple>
#include <vector>

#include "base/error.h"
#include "core/ops/ops.h"

namespace dd::ops {

namespace {
using dnnl::memory;
using tag = memory::format_tag;
using dt = memory::data_type;

dnnl::engine& cpu_engine() {
  static dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  return eng;
}

bool layout_any() {
  static const bool any = [] {
    const char* v = std::getenv("DD_CONV_LAYOUT");
    if (!v || !*v || std::strcmp(v, "any") == 0) return true;
    if (std::strcmp(v, "plain") == 0) return false;
    throw UsageError(std::string("DD_CONV_LAYOUT must be 'any' or 'plain', got '") + v + "'");
  }();
  return any;
}

// A user (plain-layout) buffer plus, when the primitive wants another layout, a private buffer and the cached
// reorder between them. When layouts match, prim and user are the same memory object (no copy).
struct Staged {
  memory user, prim;
  dnnl::reorder conv;
  bool needs = false;

  void init(const memory::desc& user_md, const memory::desc& prim_md, bool is_input) {
    auto& eng = cpu_engine();
    user = memory(user_md, eng, DNNL_MEMORY_NONE);
    needs = user_md != prim_md;
    if (!needs) {
      prim = user;
      return;
    }
    prim = memory(prim_md, eng);
    conv = is_input ? dnnl::reorder(user, prim) : dnnl::reorder(prim, user);
  }
  // Input: bind the user pointer and convert into the primitive's layout if needed.
  const memory& in(dnnl::stream& s, const float* p) {
    user.set_data_handle(const_cast<float*>(p));
    if (needs) conv.execute(s, user, prim);
    return prim;
  }
  // Output: bind the user pointer; call out_done() after the primitive ran.
  const memory& out(float* p) {
    user.set_data_handle(p);
    return prim;
  }
  void out_done(dnnl::stream& s) {
    if (needs) conv.execute(s, prim, user);
  }
};

struct Plan {
  dnnl::convolution_forward fwd;
  Staged f_src, f_w, f_dst;
  dnnl::convolution_backward_data bwd_d;
  Staged d_ddst, d_w, d_dsrc;
  dnnl::convolution_backward_weights bwd_w;
  Staged w_src, w_ddst, w_dw;
};

// Backward-weights overwrites its output and ops.h promises accumulation, so the primitive writes here and the
// result is added to dw. One buffer per thread, grown to the largest weight, shared by every convolution: it
// holds nothing between calls (a buffer per plan cost a second copy of all weights, 94 MB in resnet50).
std::vector<float>& dw_scratch(size_t n) {
  thread_local std::vector<float> buf;
  if (buf.size() < n) buf.resize(n);
  return buf;
}
}  // namespace

struct Conv2d::Impl {
  dnnl::stream strm{cpu_engine()};
  std::map<std::tuple<int64_t, int64_t, int64_t, int, bool>, Plan> plans;  // (N, H, W, threads, bf16)
};

Conv2d::Conv2d(int64_t C, int64_t OC, int64_t k, int64_t stride, int64_t pad)
    : C_(C), OC_(OC), k_(k), stride_(stride), pad_(pad), impl_(std::make_unique<Impl>()) {
  if (C < 1 || OC < 1 || k < 1 || stride < 1 || pad < 0)
    throw UsageError("Conv2d: need C, OC, k, stride >= 1 and pad >= 0 (got C=" + std::to_string(C) + " OC=" +
                     std::to_string(OC) + " k=" + std::to_string(k) + " stride=" + std::to_string(stride) +
                     " pad=" + std::to_string(pad) + ")");
}

Conv2d::~Conv2d() = default;

namespace {
Plan& get_plan(std::map<std::tuple<int64_t, int64_t, int64_t, int, bool>, Plan>& plans, int64_t C, int64_t OC,
               int64_t k, int64_t stride, int64_t pad, int64_t N, int64_t H, int64_t W, int64_t Ho, int64_t Wo) {
  const bool bf16 = precision() == Precision::bf16;
  auto key = std::make_tuple(N, H, W, omp_get_max_threads(), bf16);
  auto it = plans.find(key);
  if (it != plans.end()) return it->second;
  if (Ho < 1 || Wo < 1)
    throw UsageError("Conv2d: input " + std::to_string(H) + "x" + std::to_string(W) + " too small for k=" +
                     std::to_string(k) + " pad=" + std::to_string(pad));

  auto& eng = cpu_engine();
  memory::dims src_d{N, C, H, W}, w_d{OC, C, k, k}, dst_d{N, OC, Ho, Wo};
  memory::dims strides{stride, stride}, padding{pad, pad};
  memory::desc src_u(src_d, dt::f32, tag::nchw), w_u(w_d, dt::f32, tag::oihw), dst_u(dst_d, dt::f32, tag::nchw);
  const bool any = layout_any();
  // Inputs of a primitive in the compute type, outputs in f32 (the same as the fp32 descriptors without bf16).
  const dt in_t = bf16 ? dt::bf16 : dt::f32;
  auto compute = [any](const memory::dims& d, dt t, tag plain) { return memory::desc(d, t, any ? tag::any : plain); };
  const memory::desc src_c = compute(src_d, dt::f32, tag::nchw), w_c = compute(w_d, dt::f32, tag::oihw),
                     dst_c = compute(dst_d, dt::f32, tag::nchw);
  const memory::desc src_in = compute(src_d, in_t, tag::nchw), w_in = compute(w_d, in_t, tag::oihw),
                     dst_in = compute(dst_d, in_t, tag::nchw);

  Plan p;
  dnnl::convolution_forward::desc fd(dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct, src_in,
                                     w_in, dst_c, strides, padding, padding);
  dnnl::convolution_forward::primitive_desc fpd(fd, eng);
  p.fwd = dnnl::convolution_forward(fpd);
  p.f_src.init(src_u, fpd.src_desc(), true);
  p.f_w.init(w_u, fpd.weights_desc(), true);
  p.f_dst.init(dst_u, fpd.dst_desc(), false);

  dnnl::convolution_backward_data::desc bdd(dnnl::algorithm::convolution_direct, src_c, w_in, dst_in, strides,
                                            padding, padding);
  dnnl::convolution_backward_data::primitive_desc bdpd(bdd, eng, fpd);
  p.bwd_d = dnnl::convolution_backward_data(bdpd);
  p.d_ddst.init(dst_u, bdpd.diff_dst_desc(), true);
  p.d_w.init(w_u, bdpd.weights_desc(), true);
  p.d_dsrc.init(src_u, bdpd.diff_src_desc(), false);

  dnnl::convolution_backward_weights::desc bwd(dnnl::algorithm::convolution_direct, src_in, w_c, dst_in, strides,
                                               padding, padding);
  dnnl::convolution_backward_weights::primitive_desc bwpd(bwd, eng, fpd);
  p.bwd_w = dnnl::convolution_backward_weights(bwpd);
  p.w_src.init(src_u, bwpd.src_desc(), true);
  p.w_ddst.init(dst_u, bwpd.diff_dst_desc(), true);
  p.w_dw.init(w_u, bwpd.diff_weights_desc(), false);

  return plans.emplace(key, std::move(p)).first->second;
}
}  // namespace

void Conv2d::forward(float* y, const float* x, const float* w, int64_t N, int64_t H, int64_t W) {
  Plan& p = get_plan(impl_->plans, C_, OC_, k_, stride_, pad_, N, H, W, out_h(H), out_w(W));
  auto& s = impl_->strm;
  const memory& src = p.f_src.in(s, x);
  const memory& wm = p.f_w.in(s, w);
  const memory& dst = p.f_dst.out(y);
  p.fwd.execute(s, {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, wm}, {DNNL_ARG_DST, dst}});
  p.f_dst.out_done(s);
  s.wait();
}

void Conv2d::backward(float* dx, float* dw, const float* dy, const float* x, const float* w, int64_t N, int64_t H,
                      int64_t W) {
  Plan& p = get_plan(impl_->plans, C_, OC_, k_, stride_, pad_, N, H, W, out_h(H), out_w(W));
  auto& s = impl_->strm;
  bool ddst_staged = false;
  if (dx) {
    const memory& ddst = p.d_ddst.in(s, dy);
    const memory& wm = p.d_w.in(s, w);
    const memory& dsrc = p.d_dsrc.out(dx);
    p.bwd_d.execute(s, {{DNNL_ARG_DIFF_DST, ddst}, {DNNL_ARG_WEIGHTS, wm}, {DNNL_ARG_DIFF_SRC, dsrc}});
    p.d_dsrc.out_done(s);
    ddst_staged = true;
  }
  if (dw) {
    // Reuse the diff_dst reorder done for backward-data when both primitives asked for the same layout.
    const bool share = ddst_staged && p.d_ddst.needs && p.w_ddst.needs &&
                       p.d_ddst.prim.get_desc() == p.w_ddst.prim.get_desc();
    const memory& ddst = share ? p.d_ddst.prim : p.w_ddst.in(s, dy);
    const memory& src = p.w_src.in(s, x);
    const int64_t n = OC_ * C_ * k_ * k_;
    std::vector<float>& tmp = dw_scratch(static_cast<size_t>(n));
    const memory& dwm = p.w_dw.out(tmp.data());
    p.bwd_w.execute(s, {{DNNL_ARG_SRC, src}, {DNNL_ARG_DIFF_DST, ddst}, {DNNL_ARG_DIFF_WEIGHTS, dwm}});
    p.w_dw.out_done(s);
    s.wait();
    const float* t = tmp.data();
    for (int64_t i = 0; i < n; ++i) dw[i] += t[i];
  }
  s.wait();
}

}  // namespace dd::ops
