// out[i] = a[i] + b[i]
#include <cuda_runtime.h>

__global__ void vector_add_kernel(const float *a, const float *b, float *out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = a[i] + b[i];
}

extern "C" int mini_sgl_vector_add(const float *a, const float *b, float *out, int n) {
  vector_add_kernel<<<(n + 255) / 256, 256>>>(a, b, out, n);
  return static_cast<int>(cudaGetLastError());
}
