// stand-in kernel: y = x + b
__global__ void standin_offset(float *y, const float *x, float b, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] + b;
}
