# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A build.ninja's CUDA compile steps and their architectures (``_build/_ninja_steps``)."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.gpufleet.preflight.plugins.module_utils._build._ninja_steps import (
    arch_number,
    parse_ninja_cuda_steps,
    summarize_cuda_steps,
)


@pytest.mark.parametrize("arch, number", [
    ("sm_120a", "120"), ("compute_120a", "120"), ("120", "120"), ("120a", "120"), ("120f", "120"),
    ("12.0", "120"), ("12.0a", "120"), ("9.0", "90"), ("10.3", "103"), ("90a-real", "90"),
    ("sm_", None), ("", None), ("twelve", None), ("12.0.1", None), ("sm_12x", None), ("12.0x", None),
])
def test_arch_number(arch, number):
    assert arch_number(arch) == number


NINJA_SNIPPET = """rule CUDA_COMPILER__t_unscanned_Release
  command = nvcc $FLAGS -c $in -o $out

build CMakeFiles/t.dir/a$ b.cu.o: CUDA_COMPILER__t_unscanned_Release /src/a$ b.cu || cmake_object_order_depends_target_t
  DEFINES = -DX
  FLAGS = -O3 -gencode=arch=compute_80,code=sm_80 $
      -gencode=arch=compute_120a,code=sm_120a --threads=1
  OBJECT_DIR = CMakeFiles/t.dir

build CMakeFiles/t.dir/b.cu.o: CUDA_COMPILER__t_unscanned_Release /src/b.cu
  FLAGS = --generate-code=arch=compute_120,code=[compute_120,sm_120]
  OBJECT_DIR = CMakeFiles/t.dir

build sub/CMakeFiles/u.dir/c.cu.o: CUDA_COMPILER__u_Release /src/c.cu | /src/c.h
  FLAGS = -arch=sm_90a
  OBJECT_DIR = sub/CMakeFiles/u.dir

build CMakeFiles/t.dir/x.cc.o: CXX_COMPILER__t_unscanned_Release /src/x.cc
  FLAGS = -gencode=arch=compute_80,code=sm_80

build CMakeFiles/v.dir/d.cu.o: CUDA_COMPILER__v_
  FLAGS = -O2
"""


def test_parse_ninja_cuda_steps():
    steps = parse_ninja_cuda_steps(NINJA_SNIPPET)
    assert [(s["output"], s["source"], s["target"], s["archs"]) for s in steps] == [
        ("CMakeFiles/t.dir/a b.cu.o", "/src/a b.cu", "t", ["80", "120a"]),
        ("CMakeFiles/t.dir/b.cu.o", "/src/b.cu", "t", ["120"]),
        ("sub/CMakeFiles/u.dir/c.cu.o", "/src/c.cu", "u", ["90a"]),
        ("CMakeFiles/v.dir/d.cu.o", None, "v", []),       # no OBJECT_DIR: target from the rule name
    ]


@pytest.mark.parametrize("keep, other_steps, other_archs", [
    (None, 0, []),
    (["120"], 2, ["80", "90a"]),
    (["12.0"], 2, ["80", "90a"]),
    (["sm_90a"], 2, ["80", "120", "120a"]),
    (["80", "90", "120"], 0, []),
])
def test_summarize_cuda_steps(keep, other_steps, other_archs):
    summary = summarize_cuda_steps(parse_ninja_cuda_steps(NINJA_SNIPPET), keep)
    assert summary["cuda_steps"] == 4
    assert summary["targets"]["t"] == {"steps": 2, "archs": ["80", "120", "120a"]}
    assert (summary["other_arch_steps"], summary["other_archs"]) == (other_steps, other_archs)
