# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""toolchain: --version parsers on captured texts, nvcc arch support, numa lookup, collect with real processes."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import sys

import pytest

from ansible_collections.gpufleet.preflight.plugins.module_utils._facts import _toolchain
from ansible_collections.gpufleet.preflight.plugins.module_utils import _versions
from ansible_collections.gpufleet.preflight.plugins.module_utils._run import run_with_timeout
from ansible_collections.gpufleet.preflight.tests.unit.conftest import fixture_reader

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "toolchain")

text = fixture_reader(FIXTURES)


def nvcc_facts(cuda):
    """nvcc facts as collect_nvcc builds them, from the captured texts of one CUDA release."""
    facts = _toolchain.parse_nvcc_version(text("nvcc-%s-version.txt" % cuda))
    facts.update(present=True,
                 gpu_archs=_toolchain.parse_gpu_list(text("nvcc-%s-list-gpu-arch.txt" % cuda)),
                 gpu_codes=_toolchain.parse_gpu_list(text("nvcc-%s-list-gpu-code.txt" % cuda)))
    return facts


@pytest.mark.parametrize("name, version, major_minor, policy_needed", [
    ("cmake-3.25.1-version.txt", "3.25.1", "3.25", False),
    ("cmake-3.31.6-version.txt", "3.31.6", "3.31", False),
    ("cmake-4.2.1-version.txt", "4.2.1", "4.2", True),
])
def test_parse_cmake_version(name, version, major_minor, policy_needed):
    assert _toolchain.parse_cmake_version(text(name)) == {
        "version": version, "major_minor": major_minor, "policy_version_minimum_needed": policy_needed}


@pytest.mark.parametrize("cuda, version", [("12.6", "12.6.85"), ("12.8", "12.8.93"), ("13.0", "13.0.88")])
def test_parse_nvcc_version(cuda, version):
    assert _toolchain.parse_nvcc_version(text("nvcc-%s-version.txt" % cuda)) == {"version": version, "cuda_version": cuda}


@pytest.mark.parametrize("cuda, has_120, newest", [("12.6", False, "compute_90"), ("12.8", True, "compute_120"),
                                                   ("13.0", True, "compute_121")])
def test_list_gpu_arch(cuda, has_120, newest):
    archs = _toolchain.parse_gpu_list(text("nvcc-%s-list-gpu-arch.txt" % cuda))
    assert ("compute_120" in archs) is has_120
    assert archs[-1] == newest


@pytest.mark.parametrize("cuda, arch, ok, words", [
    ("12.6", "sm_120a", False, "does not know sm_120a"),
    ("12.6", "sm_90a", True, "supports"),
    ("12.8", "sm_120a", True, "supports"),
    ("12.8", "compute_120a", True, "supports"),
    ("12.8", "sm_100f", False, "CUDA >= 12.9"),
    ("13.0", "sm_120a", True, "supports"),
    ("13.0", "sm_100f", True, "supports"),
    ("13.0", "12.0", True, "supports"),
    ("13.0", "sm_70", False, "knows 75 to 121"),
    ("13.0", "sm_80a", False, "start at sm_90a"),
])
def test_supports(cuda, arch, ok, words):
    supported, why = _versions.supports(nvcc_facts(cuda), arch)
    assert supported is ok
    assert words in why


def test_supports_without_nvcc_and_bad_arch():
    assert _versions.supports({"present": False}, "sm_120a") == (False, "nvcc not found")
    with pytest.raises(ValueError, match="not a GPU architecture"):
        _versions.supports(nvcc_facts("13.0"), "blackwell")


@pytest.mark.parametrize("name, parse, expected", [
    ("gcc-12-version.txt", _toolchain.parse_gcc_version, "12.2.0"),
    ("gxx-12-version.txt", _toolchain.parse_gcc_version, "12.2.0"),
    ("gcc-11-ubuntu-version.txt", _toolchain.parse_gcc_version, "11.4.0"),
    ("ninja-1.11.1-version.txt", _toolchain.first_version, "1.11.1"),
    ("ccache-4.8-version.txt", _toolchain.first_version, "4.8"),
    ("git-version.txt", _toolchain.first_version, "2.39.5"),
])
def test_simple_versions(name, parse, expected):
    assert parse(text(name)) == expected


@pytest.mark.parametrize("version, minimum, expected", [
    ("3.31.6", "3.31", True), ("3.9.0", "3.10", False), ("4.2.1", "4.0", True), (None, "3.5", None), ("3.25.1", "3.26", False),
])
def test_version_at_least(version, minimum, expected):
    assert _versions.version_at_least(version, minimum) is expected


@pytest.mark.parametrize("files, header, library, linkable", [
    ([], False, None, False),
    (["usr/lib/x86_64-linux-gnu/libnuma.so.1"], False, "usr/lib/x86_64-linux-gnu/libnuma.so.1", False),
    (["usr/include/numa.h", "usr/lib64/libnuma.so.1", "usr/lib64/libnuma.so"], True, "usr/lib64/libnuma.so", True),
    (["usr/local/include/numa.h", "usr/local/lib/libnuma.so"], True, "usr/local/lib/libnuma.so", True),
])
def test_collect_numa_in_a_tree(tmp_path, files, header, library, linkable):
    for name in files:
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(u"")
    numa = _toolchain.collect_numa(str(tmp_path))
    assert numa["header_present"] is header
    assert numa["library_path"] == (None if library is None else str(tmp_path / library))
    assert numa["library_present"] is bool(library)
    assert numa["linkable"] is linkable


def test_python_probe_in_a_real_subprocess():
    python, torch, skbuild = _toolchain.collect_python(run_with_timeout, sys.executable, 60, [])
    assert python["present"] is True and python["error"] is None
    assert python["version"] == "%d.%d.%d" % sys.version_info[:3]
    for module, entry in (("torch", torch), ("scikit_build_core", skbuild)):
        try:
            __import__(module)
            importable = True
        except ImportError:
            importable = False
        assert entry["present"] is importable


def test_python_probe_timeout_is_reported(tmp_path):
    slow = tmp_path / "python3"
    slow.write_text(u"#!/bin/sh\nexec sleep 30\n")
    slow.chmod(0o755)
    python, torch, _skbuild = _toolchain.collect_python(run_with_timeout, str(slow), 1, [])
    assert python["present"] is True and "timed out after 1s" in python["error"]
    assert torch["present"] is False and "timed out" in torch["error"]


def test_missing_tools_are_facts(tmp_path):
    facts = _toolchain.collect_toolchain(run_with_timeout, python="python3", timeout=10, search_paths=[str(tmp_path)],
                                         root=str(tmp_path))
    for name in ("cmake", "ninja", "nvcc", "gcc", "gxx", "ccache", "git", "python"):
        assert facts[name]["present"] is False, name
        assert "not found" in facts[name]["error"], name
    assert facts["cmake"]["policy_version_minimum_needed"] is False
    assert facts["nvcc"]["gpu_archs"] == []
    assert facts["numa"]["header_present"] is False


def test_a_tool_that_fails_reports_why(tmp_path):
    broken = tmp_path / "cmake"
    broken.write_text(u"#!/bin/sh\necho 'cmake: error while loading shared libraries: libssl.so.3' >&2\nexit 127\n")
    broken.chmod(0o755)
    facts = _toolchain.collect_toolchain(run_with_timeout, python="python3", timeout=10, search_paths=[str(tmp_path)])
    assert facts["cmake"]["present"] is True and facts["cmake"]["version"] is None
    assert "exited 127" in facts["cmake"]["error"] and "libssl" in facts["cmake"]["error"]


@pytest.mark.parametrize("cuda_line, cuda", [
    ("cuda: Optional[str] = '12.8'", "12.8"),
    ('cuda = "13.0"', "13.0"),
    ("cuda: Optional[str] = None", None),
])
def test_torch_is_read_from_metadata_not_imported(tmp_path, cuda_line, cuda):
    """A torch whose import would fail still reports its version and CUDA: the probe never imports it."""
    site = tmp_path / "site"
    package = site / "torch"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(u"raise RuntimeError('the probe must not import torch')\n")
    (package / "version.py").write_text(u"from typing import Optional\n__version__ = '2.9.1'\n%s\n" % cuda_line)
    info = site / "torch-2.9.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(u"Metadata-Version: 2.1\nName: torch\nVersion: 2.9.1\n")
    wrapper = tmp_path / "python3"
    wrapper.write_text(u"#!/bin/sh\nPYTHONPATH=%s exec %s \"$@\"\n" % (site, sys.executable))
    wrapper.chmod(0o755)
    dummy, torch, dummy2 = _toolchain.collect_python(run_with_timeout, str(wrapper), 30, [])
    assert torch == {"present": True, "version": "2.9.1", "error": None, "cuda": cuda}


def test_default_interpreter_is_probed_in_process():
    """No python named: the module's own interpreter answers, without a subprocess (nothing to run)."""
    def no_subprocess(argv, timeout):
        raise AssertionError("ran %r" % (argv,))
    python, torch, skbuild = _toolchain.collect_python(no_subprocess, None, 30, [])
    assert python["path"] == sys.executable and python["version"] == "%d.%d.%d" % sys.version_info[:3]
    assert torch["error"] is None and skbuild["error"] is None


@pytest.mark.parametrize("entries, version", [
    ({"scikit_build_core-0.10.7.dist-info/METADATA": "Metadata-Version: 2.1\nName: scikit-build-core\nVersion: 0.10.7\n\nVersion: 9\n"},
     "0.10.7"),
    # a project name as its author spelled it
    ({"Scikit_Build.Core-0.11.1.dist-info/METADATA": "Name: Scikit-Build-Core\nVersion: 0.11.1\n"}, "0.11.1"),
    # setuptools' egg-info, as a directory and as a single file
    ({"scikit_build_core-0.9.0-py3.11.egg-info/PKG-INFO": "Metadata-Version: 1.0\nVersion: 0.9.0\n"}, "0.9.0"),
    ({"scikit_build_core-0.8.2-py3.11.egg-info": "Metadata-Version: 1.0\nVersion: 0.8.2\n"}, "0.8.2"),
    # two dist-infos (a stale one left behind): importlib.metadata decides, and it takes the first on sys.path
    ({"scikit_build_core-0.10.7.dist-info/METADATA": "Version: 0.10.7\n",
      "scikit_build_core-0.9.0.dist-info/METADATA": "Version: 0.9.0\n"}, ("0.10.7", "0.9.0")),
    # no metadata at all: present, version unknown
    ({}, None),
])
def test_installed_version_is_read_from_the_dist_info_beside_the_package(tmp_path, entries, version):
    site = tmp_path / "site"
    package = site / "scikit_build_core"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(u"raise RuntimeError('the probe must not import it')\n")
    for relative, content in entries.items():
        path = site / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(u"" + content)
    wrapper = tmp_path / "python3"
    wrapper.write_text(u"#!/bin/sh\nPYTHONPATH=%s exec %s \"$@\"\n" % (site, sys.executable))
    wrapper.chmod(0o755)
    _python, _torch, skbuild = _toolchain.collect_python(run_with_timeout, str(wrapper), 30, [])
    assert skbuild["present"] is True and skbuild["error"] is None
    if isinstance(version, tuple):
        assert skbuild["version"] in version
    else:
        assert skbuild["version"] == version
