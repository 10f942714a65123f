# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import threading

import pytest

from ansible_collections.gpufleet.preflight.plugins.module_utils._build._sgl_tree import (
    cmake_cache_notfound,
    fetchcontent_var,
    offline_cmake_args,
    parse_fetchcontent,
    parse_subprojects,
    read_ninja_summary,
    scan_fetchcontent,
)

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures", "sgl_tree")


@pytest.mark.parametrize("text, expected", [
    ("FetchContent_Declare(\n  repo-a\n  GIT_REPOSITORY https://h/a\n  GIT_TAG 0123abcd\n  GIT_SHALLOW OFF\n)",
     [("repo-a", "https://h/a", "0123abcd", None)]),
    ('FetchContent_Declare(json URL https://h/json.tar.xz)', [("json", None, None, "https://h/json.tar.xz")]),
    ('FetchContent_Declare(b GIT_REPOSITORY "https://h/b.git" GIT_TAG v1.4.0)', [("b", "https://h/b.git", "v1.4.0", None)]),
    # commented out: not declared
    ("# FetchContent_Declare(old GIT_REPOSITORY x)\nfetchcontent_declare(New GIT_TAG t)", [("New", None, "t", None)]),
    ("#[[ FetchContent_Declare(blockcomment URL u) ]]\nFetchContent_Declare(c URL u2 # trailing comment\n)",
     [("c", None, None, "u2")]),
    ("FetchContent_Declare(x GIT_REPOSITORY ${MIRROR}/x GIT_TAG ${X_TAG})", [("x", "${MIRROR}/x", "${X_TAG}", None)]),
    ("FetchContent_Declare()\nFetchContent_Populate(x)", []),
    ("", []),
])
def test_parse_fetchcontent(text, expected):
    got = [(e["name"], e["git_repository"], e["git_tag"], e["url"]) for e in parse_fetchcontent(text)]
    assert got == expected


@pytest.mark.parametrize("text, expected", [
    ("FetchContent_MakeAvailable(json nanobind)", {"json", "nanobind"}),
    ("add_subdirectory(\n    ${repo-mscclpp_SOURCE_DIR}\n    ${CMAKE_CURRENT_BINARY_DIR}/mscclpp-build)", {"repo-mscclpp"}),
    ('add_subdirectory("${Dep_SOURCE_DIR}" out)', {"dep"}),
    ("FetchContent_Populate(repo-cutlass)\nadd_subdirectory(python)", set()),
    ("# FetchContent_MakeAvailable(hidden)", set()),
])
def test_parse_subprojects(text, expected):
    assert parse_subprojects(text) == expected


@pytest.mark.parametrize("name, var", [
    ("repo-cutlass", "FETCHCONTENT_SOURCE_DIR_REPO-CUTLASS"),
    ("json", "FETCHCONTENT_SOURCE_DIR_JSON"),
    ("Fast_Hadamard", "FETCHCONTENT_SOURCE_DIR_FAST_HADAMARD"),
])
def test_fetchcontent_var(name, var):
    assert fetchcontent_var(name) == var


@pytest.mark.parametrize("fixture, steps, targets, archs, others", [
    # the stand-in configured as is: 4 architectures hard-coded, the sources twice, an sm_90a-only part
    ("standin_all.ninja", 6, {"ops_sm90_build": 2, "ops_sm100_build": 2, "fa_ops": 1, "mesh_static": 1},
     ["80", "90", "90a", "100a", "120", "120a"], 6),
    # with roles/sgl_kernel/files/gpufleet_arch_filter.cmake: sm_120 only, sm90 library and FA part stubbed
    ("standin_sm120.ninja", 3, {"ops_sm100_build": 2, "mesh_static": 1}, ["120", "120a"], 0),
])
def test_captured_standin_ninja(fixture, steps, targets, archs, others):
    summary = read_ninja_summary(os.path.join(FIXTURES, fixture), ["120"])
    assert summary["cuda_steps"] == steps
    assert dict((name, value["steps"]) for name, value in summary["targets"].items()) == targets
    assert summary["archs"] == archs
    assert summary["other_arch_steps"] == others


@pytest.mark.parametrize("text, expected", [
    ("CUDA_NVRTC_LIB:FILEPATH=CUDA_NVRTC_LIB-NOTFOUND\nCMAKE_AR:FILEPATH=/usr/bin/ar\n",
     {"CUDA_NVRTC_LIB": "CUDA_NVRTC_LIB-NOTFOUND"}),
    ("//doc\nX_INCLUDE_DIR:PATH=X_INCLUDE_DIR-NOTFOUND\nY:STRING=ok\n", {"X_INCLUDE_DIR": "X_INCLUDE_DIR-NOTFOUND"}),
    ("A:INTERNAL=NOTFOUNDISH\n", {}),
    ("", {}),
])
def test_cmake_cache_notfound(text, expected):
    assert cmake_cache_notfound(text) == expected


def _tree(tmp_path, files):
    for rel, text in files.items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_scan_fetchcontent_nested_and_missing(tmp_path):
    _tree(tmp_path, {
        "src/CMakeLists.txt": "FetchContent_Declare(repo-mesh GIT_REPOSITORY u GIT_TAG abc)\n"
                              "FetchContent_Declare(repo-headers GIT_TAG t)\nFetchContent_Populate(repo-headers)\n"
                              "add_subdirectory(${repo-mesh_SOURCE_DIR} mesh)\ninclude(cmake/more.cmake)",
        "src/cmake/more.cmake": "FetchContent_Declare(repo-mla GIT_TAG m)",
        "src/tests/CMakeLists.txt": "FetchContent_Declare(googletest URL g)",   # tests are not configured
        "off/repo-mesh/CMakeLists.txt": "FetchContent_Declare(json URL j)\nFetchContent_Declare(nanobind GIT_TAG n)\n"
                                        "FetchContent_MakeAvailable(json nanobind)",
        "off/json/CMakeLists.txt": "project(json)",
        # only populated, never a sub-project: its own declarations are not fetched
        "off/repo-headers/CMakeLists.txt": "FetchContent_Declare(never-fetched URL x)",
        "elsewhere/mla/x.h": "",
    })
    found = scan_fetchcontent(str(tmp_path / "src"), str(tmp_path / "off"), {"REPO-MLA": str(tmp_path / "elsewhere/mla")})
    by_name = dict((e["name"], e) for e in found["declared"])
    assert list(by_name) == ["repo-mesh", "repo-headers", "repo-mla", "json", "nanobind"]
    assert found["missing"] == ["nanobind"]
    assert by_name["json"]["depth"] == 1 and by_name["json"]["declared_in"] == "repo-mesh: CMakeLists.txt"
    assert by_name["repo-mla"]["source_dir"] == str(tmp_path / "elsewhere/mla")
    assert by_name["repo-mesh"]["subproject"] and not by_name["repo-headers"]["subproject"]
    assert found["errors"] == []


def test_scan_fetchcontent_empty_dir_is_missing(tmp_path):
    _tree(tmp_path, {"src/CMakeLists.txt": "FetchContent_Declare(a URL u)"})
    (tmp_path / "off" / "a").mkdir(parents=True)
    assert scan_fetchcontent(str(tmp_path / "src"), str(tmp_path / "off"))["missing"] == ["a"]
    assert scan_fetchcontent(str(tmp_path / "src"))["missing"] == ["a"]


def test_offline_cmake_args_skip_names_given_explicitly():
    declared = [{"name": "repo-a", "source_dir": "/off/repo-a"}, {"name": "json", "source_dir": "/off/json"},
                {"name": "gone", "source_dir": None}]
    assert offline_cmake_args(declared, {"JSON": "/mine/json"}) == ["-DFETCHCONTENT_SOURCE_DIR_REPO-A=/off/repo-a"]
    assert offline_cmake_args(declared) == ["-DFETCHCONTENT_SOURCE_DIR_REPO-A=/off/repo-a",
                                            "-DFETCHCONTENT_SOURCE_DIR_JSON=/off/json"]


def test_scan_fetchcontent_takes_a_filled_base_dir(tmp_path):
    _tree(tmp_path, {"src/CMakeLists.txt": "FetchContent_Declare(Repo-A URL u)", "base/repo-a-src/x.h": ""})
    found = scan_fetchcontent(str(tmp_path / "src"), str(tmp_path / "base"))
    assert found["missing"] == [] and found["cmake_args"] == [
        "-DFETCHCONTENT_SOURCE_DIR_REPO-A=%s" % (tmp_path / "base" / "repo-a-src")]


def test_a_fifo_named_like_a_cmake_file_is_never_opened(tmp_path):
    """Issue 18 finding 6: a FIFO named x.cmake hung the FetchContent scan for ever (it waited for a writer)."""
    (tmp_path / "CMakeLists.txt").write_text(u"FetchContent_Declare(cutlass GIT_REPOSITORY https://x/cutlass.git)\n")
    os.mkfifo(str(tmp_path / "deps.cmake"))
    scanned = {}
    worker = threading.Thread(target=lambda: scanned.update(scan_fetchcontent(str(tmp_path))))
    worker.daemon = True
    worker.start()
    worker.join(20)
    if worker.is_alive():  # unblock the open so the test process can end
        with open(str(tmp_path / "deps.cmake"), "w"):
            pass
    assert not worker.is_alive(), "the scan blocked on the FIFO"
    assert [entry["name"] for entry in scanned["declared"]] == ["cutlass"]


def test_tree_identity_reads_the_package_version_and_the_checkout_commit(tmp_path):
    """Issue 35 item 9: learned peaks keyed by what the tree is, not the ref that named it."""
    from ansible_collections.gpufleet.preflight.plugins.module_utils._build._sgl_tree import tree_identity
    kernel = tmp_path / "checkout" / "sgl-kernel"
    kernel.mkdir(parents=True)
    (kernel / "pyproject.toml").write_text('[project]\nname = "sgl-kernel"\nversion = "0.3.19"\n')
    assert tree_identity(str(kernel)) == {"package_version": "0.3.19", "commit": None}
    git = tmp_path / "checkout" / ".git"
    (git / "refs" / "heads").mkdir(parents=True)
    (git / "HEAD").write_text("ref: refs/heads/main\n")
    (git / "refs" / "heads" / "main").write_text("7b9156c773f0467df80cc849637d94a4522a8b5e\n")
    assert tree_identity(str(kernel))["commit"] == "7b9156c773f0467df80cc849637d94a4522a8b5e"
    assert tree_identity(str(tmp_path / "none")) == {"package_version": None, "commit": None}
