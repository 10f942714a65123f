# A torch C++ extension built the way flash-attention builds its own (torch.utils.cpp_extension's BuildExtension,
# ninja, MAX_JOBS), with sources of very different memory - written for gpufleet.preflight's tests (issue 29 item 4;
# no upstream code). Each source says what its "compile" holds: /* gpufleet-hog: MIB SECONDS */ (hogcc.py of
# ../standin_mixed_memory, put in front of the real compiler through CXX). Only the binding includes Python.h, so the
# real compiles take about a second; the memory is the stand-in's.
import glob
import os

from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CppExtension

HERE = os.path.dirname(os.path.abspath(__file__))

setup(
    name="gpufleet_torch_ext_mixed",
    version="0.1",
    ext_modules=[CppExtension("gpufleet_torch_ext_mixed", sorted(glob.glob(os.path.join(HERE, "csrc", "*.cpp"))))],
    cmdclass={"build_ext": BuildExtension},
)
