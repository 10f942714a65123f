"""A tiny sgl-kernel look-alike: the CUDA library is loaded with ctypes, so importing needs no GPU."""

import ctypes
import os

__version__ = "0.1.0"

_lib = ctypes.CDLL(os.path.join(os.path.dirname(os.path.abspath(__file__)), "libmini_sgl_kernel_ops.so"))
_lib.mini_sgl_gencodes.restype = ctypes.c_char_p
_lib.mini_sgl_cuda_version.restype = ctypes.c_char_p
_lib.mini_sgl_compile_threads.restype = ctypes.c_int


def gencodes():
    """The nvcc -gencode flags the library was compiled with."""
    return _lib.mini_sgl_gencodes().decode()


def compile_threads():
    """nvcc --threads the library was compiled with (SGL_KERNEL_COMPILE_THREADS)."""
    return _lib.mini_sgl_compile_threads()


def cuda_version():
    """The CUDA compiler version that built the library."""
    return _lib.mini_sgl_cuda_version().decode()


def build_info():
    return {"gencodes": gencodes(), "compile_threads": compile_threads(), "cuda_version": cuda_version(),
            "version": __version__}
