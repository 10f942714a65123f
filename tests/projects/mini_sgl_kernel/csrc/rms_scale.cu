// x[i] *= weight[i] / sqrt(mean(x^2) + eps), one block per row: a toy of sgl-kernel's rmsnorm
#include <cuda_runtime.h>

template <int BLOCK>
__global__ void rms_scale_kernel(float *x, const float *weight, int cols, float eps) {
  __shared__ float partial[BLOCK];
  float *row = x + static_cast<size_t>(blockIdx.x) * cols;
  float sum = 0.f;
  for (int i = threadIdx.x; i < cols; i += BLOCK) sum += row[i] * row[i];
  partial[threadIdx.x] = sum;
  __syncthreads();
  for (int stride = BLOCK / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) partial[threadIdx.x] += partial[threadIdx.x + stride];
    __syncthreads();
  }
  float scale = rsqrtf(partial[0] / cols + eps);
  for (int i = threadIdx.x; i < cols; i += BLOCK) row[i] *= scale * weight[i];
}

extern "C" int mini_sgl_rms_scale(float *x, const float *weight, int rows, int cols, float eps) {
  rms_scale_kernel<256><<<rows, 256>>>(x, weight, cols, eps);
  return static_cast<int>(cudaGetLastError());
}
