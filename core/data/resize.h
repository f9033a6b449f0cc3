// Bilinear image resize, as docs/data.md ("Resizing") defines it: the values of
// torch.nn.functional.interpolate(mode="bilinear", align_corners=False) and of torchvision's Resize on a float
// tensor with antialias=False.
#pragma once
#include <cstdint>

namespace dd::data {

// Resizes n planes of h x w floats (row-major, plane after plane) at `src` into n planes of oh x ow at `dst`.
// Output pixel (i, j) samples the input at (sy, sx) = ((i + 0.5) h/oh - 0.5, (j + 0.5) w/ow - 0.5), clamped
// below at 0; it is the bilinear blend of the four input pixels around that point (the last row or column is
// repeated at the far edge). No antialiasing: shrinking reads only the 2 x 2 pixels nearest each sample point.
// src and dst must not overlap. All sizes must be >= 1.
void resize_bilinear(const float* src, int64_t n, int64_t h, int64_t w, float* dst, int64_t oh, int64_t ow);

}  // namespace dd::data
