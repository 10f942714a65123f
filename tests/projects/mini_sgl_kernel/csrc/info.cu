// What the library was built for; readable without a GPU.
extern "C" const char *mini_sgl_gencodes() { return MINI_SGL_GENCODES; }
extern "C" int mini_sgl_compile_threads() { return MINI_SGL_COMPILE_THREADS; }
extern "C" const char *mini_sgl_cuda_version() { return MINI_SGL_CUDA_VERSION; }
