// Markers the compiler-cache tests rewrite: each must reach the object that is built after the edit.
#include <cstdio>

#ifndef __CUDA_ARCH__
// host-only code: the sm_90 preprocessing pass (what ccache's default mode hashes) never sees it
const char *twoarch_host_marker() { return "HOSTMARK_v0"; }
#endif

__global__ void twoarch_kernel(int *out) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 1200
  // only the sm_120a pass compiles this
  printf("ARCHMARK_v0\n");
#endif
  out[threadIdx.x] = threadIdx.x;
}

void twoarch_launch(int *out) { twoarch_kernel<<<1, 32>>>(out); }
