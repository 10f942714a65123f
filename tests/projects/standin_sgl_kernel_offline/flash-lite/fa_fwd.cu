// stand-in for an FA3 instantiation: only ever compiled for sm_90a
__global__ void flash_lite_fwd(float *o, const float *q, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) o[i] = q[i] * 0.5f;
}
