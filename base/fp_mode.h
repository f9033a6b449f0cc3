// Subnormal floats: flushed (FTZ: results too small for a normal float become zero; DAZ: subnormal operands read
// as zero) or kept (IEEE gradual underflow). Flushing is the default: CPUs that handle subnormal operands in
// microcode take up to a hundred times longer per instruction, and an untrained or diverging model can compute with
// them for whole steps (docs/models.md). The mode is per thread on x86 (the MXCSR register), so every thread that
// computes applies the process-wide mode when it starts (apply_subnormals_here); dd::ops::set_threads applies it to
// the OpenMP workers, which are also oneDNN's. On other CPUs the mode is recorded and nothing else happens.
#pragma once
#include <atomic>

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#define DD_HAVE_MXCSR 1
#else
#define DD_HAVE_MXCSR 0
#endif

namespace dd {

enum class Subnormals { flush, keep };

inline const char* subnormals_name(Subnormals s) { return s == Subnormals::flush ? "flush" : "keep"; }

// The process-wide mode that threads apply when they start; flush unless set otherwise.
inline std::atomic<Subnormals> subnormals_mode{Subnormals::flush};

// True where this build can set the mode (x86: FTZ and DAZ in MXCSR).
constexpr bool subnormals_settable() { return DD_HAVE_MXCSR; }

#if DD_HAVE_MXCSR
inline constexpr unsigned kMxcsrFtz = 1u << 15, kMxcsrDaz = 1u << 6;
#endif

// Sets the calling thread's mode.
inline void set_subnormals_here(Subnormals s) {
#if DD_HAVE_MXCSR
  const unsigned bits = kMxcsrFtz | kMxcsrDaz;
  const unsigned csr = _mm_getcsr();
  _mm_setcsr(s == Subnormals::flush ? (csr | bits) : (csr & ~bits));
#else
  (void)s;
#endif
}

// Applies the process-wide mode to the calling thread: the first line of every thread that computes.
inline void apply_subnormals_here() { set_subnormals_here(subnormals_mode.load(std::memory_order_relaxed)); }

// What the calling thread's register says: flush when both FTZ and DAZ are set, keep when neither is; false
// (and `*known` false) on a CPU without MXCSR or with only one of the two set.
inline bool subnormals_here(Subnormals* out) {
#if DD_HAVE_MXCSR
  const unsigned csr = _mm_getcsr();
  const bool ftz = csr & kMxcsrFtz, daz = csr & kMxcsrDaz;
  if (ftz != daz) return false;
  *out = ftz ? Subnormals::flush : Subnormals::keep;
  return true;
#else
  (void)out;
  return false;
#endif
}

}  // namespace dd
