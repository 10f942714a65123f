# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The license-clean stand-in for sgl-kernel (tests/projects/standin_sgl_kernel) with real CMake and nvcc:
hard-coded gencodes for four architectures restricted to sm_120 in build.ninja, nested FetchContent names found
in local offline sources (and missing ones listed before configure), a cache poisoned with a NOTFOUND recovered,
and an interrupted build's record kept (issue 13)."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time

import pytest

from conftest import PROJECTS, REPO, module_command, ansible_env, parse_result, role_vars, run_local

sys.path.insert(0, os.path.join(REPO, "plugins", "module_utils", "_build"))
sys.path.insert(0, os.path.join(REPO, "plugins", "module_utils", "_facts"))
import _ninja_steps  # noqa: E402 pylint: disable=wrong-import-position,import-error
import _sgl_tree  # noqa: E402 pylint: disable=wrong-import-position,import-error

STANDIN = os.path.join(PROJECTS, "standin_sgl_kernel")
OFFLINE = os.path.join(PROJECTS, "standin_sgl_kernel_offline")
FILTER = os.path.join(REPO, "roles", "sgl_kernel", "files", "gpufleet_arch_filter.cmake")

pytestmark = pytest.mark.skipif(not (shutil.which("nvcc") and shutil.which("cmake") and shutil.which("ninja")),
                                reason="nvcc, cmake and ninja are needed")


def configure(build, *extra):
    found = _sgl_tree.scan_fetchcontent(STANDIN, OFFLINE)
    argv = ["cmake", "-S", STANDIN, "-B", str(build), "-G", "Ninja", "-DPython_EXECUTABLE=" + sys.executable,
            "-DFETCHCONTENT_FULLY_DISCONNECTED=ON"] + found["cmake_args"] + list(extra)
    proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:]
    return proc.stdout


def test_offline_names_nested_ones_included():
    found = _sgl_tree.scan_fetchcontent(STANDIN, OFFLINE)
    assert [(e["name"], e["depth"]) for e in found["declared"]] == [
        ("dep-mesh", 0), ("flash-lite", 0), ("mesh-json", 1), ("mesh-bind", 1)]
    assert found["missing"] == []


def test_gencodes_restricted_to_sm120_in_build_ninja(tmp_path):
    configure(tmp_path / "all")
    shipped = _sgl_tree.read_ninja_summary(str(tmp_path / "all" / "build.ninja"), ["120"])
    assert shipped["cuda_steps"] == 6 and shipped["other_archs"] == ["80", "90", "90a", "100a"]
    # TORCH_CUDA_ARCH_LIST / CMAKE_CUDA_ARCHITECTURES do not reach hard-coded gencodes
    configure(tmp_path / "arch", "-DCMAKE_CUDA_ARCHITECTURES=120")
    assert _sgl_tree.read_ninja_summary(str(tmp_path / "arch" / "build.ninja"), ["120"])["other_arch_steps"] == 6

    out = configure(tmp_path / "sm120", "-DCMAKE_PROJECT_INCLUDE=" + FILTER, "-DGPUFLEET_CUDA_ARCHS=120",
                    "-DGPUFLEET_DROP_TARGETS=ops_sm90_build")
    only = _sgl_tree.read_ninja_summary(str(tmp_path / "sm120" / "build.ninja"), ["120"])
    print("stand-in CUDA steps: %d as shipped, %d for sm_120 only" % (shipped["cuda_steps"], only["cuda_steps"]))
    assert only["other_arch_steps"] == 0 and only["archs"] == ["120", "120a"]
    assert dict((k, v["steps"]) for k, v in only["targets"].items()) == {"ops_sm100_build": 2, "mesh_static": 1}
    assert "gpufleet: fa_ops built without kernels (it only has code for other architectures than sm_120)" in out
    assert "gpufleet: ops_sm90_build built without kernels" in out
    # idempotent: configuring the same tree again gives the same compile steps and flags

    def flags():
        with open(str(tmp_path / "sm120" / "build.ninja")) as handle:
            text = handle.read()
        return [line for line in text.splitlines() if line.startswith("  FLAGS = ")] + [
            (step["output"], step["archs"]) for step in _ninja_steps.parse_ninja_cuda_steps(text)]
    before = flags()
    configure(tmp_path / "sm120", "-DCMAKE_PROJECT_INCLUDE=" + FILTER, "-DGPUFLEET_CUDA_ARCHS=120",
              "-DGPUFLEET_DROP_TARGETS=ops_sm90_build")
    assert flags() == before
    # and it compiles for real
    proc = subprocess.run(["ninja", "-C", str(tmp_path / "sm120")], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:]


def standin_vars(tmp_path, venv, **more):
    """conftest's role_vars for the stand-in tree: offline sources, sm120 only, the sm90 target dropped, a compiler
    cache of its own (the node's, filled by an earlier run on this machine, made every compile a hit: never learned)."""
    variables = role_vars(tmp_path, venv, sgl_kernel_controller_src=STANDIN, sgl_kernel_import_name="standin_sgl_kernel",
                          sgl_kernel_offline_dir=OFFLINE, sgl_kernel_fetchcontent_offline=True,
                          sgl_kernel_target_archs="12.0", sgl_kernel_drop_targets="ops_sm90_build",
                          sgl_kernel_compiler_cache_dir=str(tmp_path / "ccache"))
    variables.update(more)
    return variables


def test_role_builds_sm120_only_and_installs(tmp_path, build_venv):  # noqa: F811 pylint: disable=redefined-outer-name
    venv = os.path.dirname(os.path.dirname(build_venv))
    rc, out = run_local(standin_vars(tmp_path, venv, sgl_kernel_async=600, sgl_kernel_jobs=1))
    assert rc == 0, out[-6000:]
    assert "FetchContent: 4 names (mesh-json, mesh-bind nested); 4 from offline sources" in out, out[-6000:]
    assert "build.ninja: 3 CUDA steps for 120 120a (mesh_static 1, ops_sm100_build 2)" in out, out[-6000:]
    assert re.search(r"WARNING sgl_kernel: sgl_kernel_async=600s is shorter than the plan.s estimate of 720s "
                     r"\(3 CUDA steps x 240s", out), out[-6000:]
    python = os.path.join(venv, "bin", "python")
    status = subprocess.check_output([python, "-c", "import standin_sgl_kernel as s; print(s.fa_status()); "
                                      "print(s.ops_library(120))"], cwd="/", universal_newlines=True)
    assert "fa_ops was not built by gpufleet.preflight: it only has code for other architectures than sm_120" in status
    assert "/sm100/" in status
    # issue 17: every compile went through the memory admission launcher (sgl_kernel_admission, on by default),
    # which left the ledger empty and learned each CUDA source's peak
    build = tmp_path / "src" / "build"
    caches = list(build.glob("*/CMakeCache.txt"))
    launcher = [line for line in caches[0].read_text().splitlines() if line.startswith("CMAKE_CUDA_COMPILER_LAUNCHER")]
    # [admission] + [compiler cache], when a cache is on
    assert launcher and "/gpufleet_admit.py;--config=" in launcher[0], launcher
    # the node's one queue (issue 29: builds on one node share the budget), empty once the build is done
    assert json.loads(open(os.path.expanduser("~/.cache/gpufleet/admission/ledger/ledger.json")).read()) == {}
    with open(os.path.expanduser("~/.cache/gpufleet/admission/peaks.json")) as handle:
        peaks = json.load(handle)
    # keyed by the tree's identity (name, version, archs), the path in it and the compile's arch flags (issue 29 item 7)
    scale = [entry for key, entry in peaks.items() if key.startswith("sgl-kernel@") and ":csrc/scale.cu#" in key]
    assert scale and scale[0].get("peak_bytes", 0) > 0, sorted(peaks)[:20]
    # a FetchContent source from sgl_kernel_offline_dir: keyed as the census keys it, wherever that folder is
    mesh = [entry for key, entry in peaks.items() if key.startswith("sgl-kernel@") and ":offline/dep-mesh/src/mesh.cu#" in key]
    assert mesh and mesh[0].get("peak_bytes", 0) > 0, sorted(peaks)[:20]


def test_missing_nested_offline_source_is_named_before_configure(tmp_path, build_venv):  # noqa: F811 pylint: disable=redefined-outer-name
    venv = os.path.dirname(os.path.dirname(build_venv))
    offline = tmp_path / "offline"
    shutil.copytree(OFFLINE, str(offline))
    shutil.rmtree(str(offline / "mesh-bind"))
    shutil.rmtree(str(offline / "flash-lite"))
    rc, out = run_local(standin_vars(tmp_path, venv, sgl_kernel_offline_dir=str(offline)))
    assert rc != 0
    assert "an offline configure would stop - no sources for flash-lite, mesh-bind" in out, out[-4000:]
    assert "declared in CMakeLists.txt; dep-mesh: CMakeLists.txt" in out
    assert not os.path.exists(str(tmp_path / "src" / "build" / "gpufleet-probe"))
    assert not [name for _root, _dirs, files in os.walk(str(tmp_path / "src")) for name in files if name == "CMakeCache.txt"]


def test_other_archs_left_are_refused(tmp_path, build_venv):  # noqa: F811 pylint: disable=redefined-outer-name
    """A gencode the filter cannot reach (a source file's own COMPILE_OPTIONS) stops the build before compiling."""
    venv = os.path.dirname(os.path.dirname(build_venv))
    rc, out = run_local(standin_vars(tmp_path, venv, sgl_kernel_cmake_args="-DSTANDIN_SOURCE_GENCODE=ON"))
    assert rc != 0
    assert re.search(r"sgl_kernel: 1 of 3 CUDA steps still compile for 89, not only for sm_120 "
                     r"\(e\.g\. CMakeFiles/ops_sm100_build\.dir/csrc/offset\.cu\.o\)", out), out[-4000:]
    assert not os.path.exists(str(tmp_path / "src" / "dist"))


def test_poisoned_cache_is_cleaned_and_configured_afresh(tmp_path, build_venv):  # noqa: F811 pylint: disable=redefined-outer-name
    venv = os.path.dirname(os.path.dirname(build_venv))
    rc, out = run_local(standin_vars(tmp_path, venv, sgl_kernel_environment={"STANDIN_RT_NAME": "gpufleet_no_such_lib"}))
    assert rc != 0
    assert "cache entries NOTFOUND: STANDIN_RT_LIBRARY" in out, out[-4000:]
    # the environment is fixed, but the cache keeps the NOTFOUND: without the clean retry it fails the same way
    rc, out = run_local(standin_vars(tmp_path, venv, sgl_kernel_clean_on_notfound=False))
    assert rc != 0 and "STANDIN_RT_LIBRARY not found: STANDIN_RT_LIBRARY=_standin_rt-NOTFOUND" in out, out[-4000:]
    rc, out = run_local(standin_vars(tmp_path, venv))
    assert rc == 0, out[-6000:]
    assert ("sgl_kernel: configure failed on a cache holding STANDIN_RT_LIBRARY; the build directory was cleaned "
            "and configured afresh - which worked") in out, out[-6000:]


def test_interrupted_build_keeps_its_record(tmp_path, build_venv):  # noqa: F811 pylint: disable=redefined-outer-name
    """SIGTERM to guarded_build while nvcc runs: the result still holds the attempt and its peak memory."""
    source = str(tmp_path / "standin")
    shutil.copytree(STANDIN, source)
    found = _sgl_tree.scan_fetchcontent(source, OFFLINE)
    status_path = os.path.join(source, "build", "gpufleet-build.status.json")
    args = {"argv": [build_venv, "-m", "pip", "wheel", ".", "--no-build-isolation", "--no-deps", "-v", "-w", "dist"],
            "chdir": source, "name": "standin", "jobs": 1, "memory_limit": "4GiB", "memory_per_thread": "1GiB",
            "cmake_args": " ".join(found["cmake_args"] + ["-DFETCHCONTENT_FULLY_DISCONNECTED=ON"]),
            "artifacts": ["dist/*.whl"], "max_attempts": 2}
    proc = subprocess.Popen(module_command(args), env=ansible_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            universal_newlines=True)
    output = []
    reader = threading.Thread(target=lambda: output.append(proc.stdout.read()))
    reader.start()
    module_pid = None
    deadline = time.time() + 300
    while time.time() < deadline and proc.poll() is None:
        try:
            with open(status_path) as handle:
                status = json.load(handle)
        except (IOError, OSError, ValueError):
            status = {}
        # once a CUDA object is being compiled, the attempt has something to lose
        if status.get("state") == "running" and (status.get("progress") or {}).get("total"):
            module_pid = status.get("module_pid")
            break
        time.sleep(0.3)
    assert module_pid, "the build never reached the compile steps: %s" % output
    os.kill(module_pid, signal.SIGTERM)
    proc.wait(timeout=120)
    reader.join(timeout=30)
    result = parse_result(output[0])
    assert result["failed"], output[0][-3000:]
    assert "stopped by SIGTERM" in result["msg"] and "a rerun resumes" in result["msg"], result["msg"]
    (attempt,) = result["attempts"]
    assert attempt["kind"] == "interrupted" and attempt["jobs"] == 1
    assert attempt["peak_memory_bytes"] and result.get("peak_memory_bytes"), result


def test_check_mode_creates_nothing(tmp_path, build_venv):  # noqa: F811 pylint: disable=redefined-outer-name
    venv = os.path.dirname(os.path.dirname(build_venv))
    argv = [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", "localhost,", "-c", "local", "--check",
            "-e", "ansible_python_interpreter=" + sys.executable, "-e", json.dumps(standin_vars(tmp_path, venv, sgl_kernel_clean=True)),
            os.path.join(REPO, "playbooks", "build_sgl_kernel.yml")]
    env = ansible_env()
    env.pop("ANSIBLE_STDOUT_CALLBACK")
    proc = subprocess.run(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True,
                          timeout=600, check=False)
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert not (tmp_path / "src").exists()


def torch_pip_layout(tmp_path):
    """A venv whose CUDA libraries are only in torch's pip layout (nvidia/cu13: libnvrtc.so.13, libcublas.so.13,
    libcublasLt.so.13 and headers) with build_deps' link-only libcuda stub: (cu13 folder, the toolchain facts'
    cuda_libraries for it)."""
    import _cuda_libraries  # pylint: disable=import-error
    venv = tmp_path / "venv"
    site = venv / "lib" / "python3.11" / "site-packages" / "nvidia" / "cu13"
    (site / "include").mkdir(parents=True)
    (site / "lib").mkdir()
    (venv / "bin").mkdir()
    (venv / "bin" / "python").write_text("")
    for header in ("nvrtc.h", "cublas_v2.h", "cublasLt.h"):
        (site / "include" / header).write_text("/* stand-in */\n")
    libraries = [(site / "lib", name, ".so.13") for name in ("nvrtc", "cublas", "cublasLt")]
    stub = venv / "lib" / _cuda_libraries.LINK_STUB_DIR
    stub.mkdir()
    libraries.append((stub, "cuda", ".so"))
    for folder, name, suffix in libraries:
        soname = "lib%s.so.%s" % (name, "1" if name == "cuda" else "13")
        subprocess.check_call(["cc", "-shared", "-fPIC", "-Wl,-soname," + soname, "-x", "c", "-o",
                               str(folder / ("lib%s%s" % (name, suffix))), "/dev/null"])
    found = _cuda_libraries.collect_cuda_libraries(shutil.which("nvcc"), str(venv / "bin" / "python"))
    assert found["nvrtc"]["source"] in ("torch", "toolkit"), found["nvrtc"]
    if found["nvrtc"]["source"] == "toolkit":
        pytest.skip("this toolkit has its own nvrtc: the pip layout is not what configure needs here")
    return site, found


def test_torch_pip_layout_libraries_reach_cmake_and_optional_ones_may_miss(tmp_path):
    """Issue 17: nvrtc only in a torch-like pip layout (venv/.../nvidia/cu13/lib/libnvrtc.so.13 + include/nvrtc.h)
    fails configure on its own; the arguments the toolchain facts give (_cuda_libraries.cmake_args, what the role
    passes) make it pass. The optional library dep-mesh looks for (like mscclpp's IBVerbs) stays NOTFOUND and the
    configure goes on."""
    site, found = torch_pip_layout(tmp_path)
    argv = ["cmake", "-S", STANDIN, "-G", "Ninja", "-DPython_EXECUTABLE=" + sys.executable, "-DSTANDIN_NEEDS_NVRTC=ON",
            "-DFETCHCONTENT_FULLY_DISCONNECTED=ON"] + _sgl_tree.scan_fetchcontent(STANDIN, OFFLINE)["cmake_args"]
    without = subprocess.run(argv + ["-B", str(tmp_path / "without")], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             universal_newlines=True, check=False)
    assert without.returncode != 0 and "nvrtc not found" in without.stdout, without.stdout[-2000:]
    with_args = subprocess.run(argv + ["-B", str(tmp_path / "with")] + found["cmake_args"], stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, universal_newlines=True, check=False)
    assert with_args.returncode == 0, with_args.stdout[-3000:]
    with open(str(tmp_path / "with" / "CMakeCache.txt")) as handle:
        cache = handle.read()
    assert "CUDA_nvrtc_LIBRARY:FILEPATH=%s" % (site / "lib" / "libnvrtc.so.13") in cache
    assert "MESH_IBVERBS_LIBRARIES:FILEPATH=MESH_IBVERBS_LIBRARIES-NOTFOUND" in cache


def test_libraries_linked_by_name_are_found_through_the_roles_link_folder(tmp_path):
    """Issue 17: the real tree's first link through the role failed on `-lcuda -lcublas -lcublasLt` (sgl-kernel links
    them by name; torch's pip packages bring only libcublas.so.13, the libcuda stub lives in the venv). The role's
    link.yml links the names the toolchain facts give (cuda_libraries.link_names) in a folder of the build dir and
    puts it on the build's LIBRARY_PATH: the same link then passes, and the library still needs the real sonames."""
    site, found = torch_pip_layout(tmp_path)
    assert sorted(found["link_names"]) == ["libcublas.so", "libcublasLt.so", "libcuda.so", "libnvrtc.so"], found
    argv = ["cmake", "-S", STANDIN, "-G", "Ninja", "-DPython_EXECUTABLE=" + sys.executable, "-DSTANDIN_NEEDS_NVRTC=ON",
            "-DSTANDIN_LINK_BY_NAME=ON", "-DFETCHCONTENT_FULLY_DISCONNECTED=ON",
            "-DCMAKE_CUDA_ARCHITECTURES=120"] + _sgl_tree.scan_fetchcontent(STANDIN, OFFLINE)["cmake_args"]
    build = tmp_path / "build"
    subprocess.run(argv + ["-B", str(build)] + found["cmake_args"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                   universal_newlines=True, check=True)
    without = subprocess.run(["cmake", "--build", str(build), "--target", "ops_sm100_build"], stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, universal_newlines=True, check=False)
    assert without.returncode != 0 and "cannot find -lcublas" in without.stdout, without.stdout[-2000:]

    playbook = tmp_path / "link.yml"
    playbook.write_text(
        "- hosts: localhost\n  gather_facts: false\n  tasks:\n"
        "    - ansible.builtin.include_role: {name: gpufleet.preflight.sgl_kernel, tasks_from: link.yml}\n"
        "    - ansible.builtin.copy: {content: '{{ _sgl_kernel_link_env | to_json }}', dest: '%s/link_env.json', mode: '0644'}\n"
        % build)
    names = json.dumps({"_sgl_kernel_build_path": str(build), "_sgl_kernel_link_names": found["link_names"],
                        "sgl_kernel_environment": {"LIBRARY_PATH": "/opt/theirs/lib"}})
    proc = subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", "localhost,", "-c",
                           "local", "-e", "ansible_python_interpreter=" + sys.executable, "-e", names, str(playbook)],
                          env=ansible_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True,
                          timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:]
    link_env = json.loads((build / "link_env.json").read_text())
    assert link_env == {"LIBRARY_PATH": "%s/gpufleet-link:/opt/theirs/lib" % build}, link_env
    assert os.readlink(str(build / "gpufleet-link" / "libcublas.so")) == str(site / "lib" / "libcublas.so.13")
    linked = subprocess.run(["cmake", "--build", str(build), "--target", "ops_sm100_build"], env=dict(os.environ, **link_env),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, check=False)
    assert linked.returncode == 0, linked.stdout[-3000:]
    dynamic = subprocess.check_output(["readelf", "-d", str(build / "sm100" / "libops.so")], universal_newlines=True)
    # the link folder is for the linker only: no run path of the library points into it
    assert "gpufleet-link" not in dynamic, dynamic
