# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Role gpufleet.preflight.sgl_kernel (playbooks/build_sgl_kernel.yml) building the sgl-kernel look-alike for real:
on localhost (strategy each, idempotent), and on a fleet of sshd nodes (strategy once: one build, the wheel
installed on the matching nodes, a node with another Python ABI refused)."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import glob
import os
import re
import shutil
import subprocess
import sys

import pytest

from conftest import REPO, SGL_KERNEL_PLAYBOOK as PLAYBOOK, role_vars, run_local

sys.path.insert(0, os.path.join(REPO, "tests", "tools"))
import fleetlib  # noqa: E402 pylint: disable=wrong-import-position

RECAP = re.compile(r"^(\S+)\s*:\s*ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)", re.M)

pytestmark = pytest.mark.skipif(not shutil.which("nvcc"), reason="nvcc is needed")


def recap(output):
    return dict((host, {"ok": int(ok), "changed": int(changed), "unreachable": int(unr), "failed": int(failed)})
                for host, ok, changed, unr, failed in RECAP.findall(output))


def test_each_builds_installs_imports_and_is_idempotent(tmp_path, build_venv):  # noqa: F811 pylint: disable=redefined-outer-name
    venv = os.path.dirname(os.path.dirname(build_venv))
    variables = role_vars(tmp_path, venv, sgl_kernel_nvcc_threads=2)
    rc, out = run_local(variables)
    assert rc == 0, out[-5000:]
    assert re.search(r"jobs=\d+: \S+ available - \S+ reserve over 2 threads x 1Gi", out), "the plan is shown"
    # progress while the build runs: gpufleet.preflight.build_watch's fleet table (issue 14)
    assert re.search(r"BUILD \S+: .*\(of 1\)", out), "progress is printed while the build runs"
    assert re.search(r"built: mini_sgl_kernel-0\.1\.0-cp\d+-\S+\.whl, imports from %s/lib/python" % re.escape(venv), out)
    assert os.listdir(str(tmp_path / "src" / "dist"))

    rc, out = run_local(variables)
    assert rc == 0, out[-5000:]
    assert recap(out)["localhost"]["changed"] == 0, out[-5000:]


def test_bad_input_fails_before_anything_runs(tmp_path, build_venv):  # noqa: F811 pylint: disable=redefined-outer-name
    venv = os.path.dirname(os.path.dirname(build_venv))
    rc, out = run_local(role_vars(tmp_path, venv, sgl_kernel_controller_src=""))
    assert rc != 0 and "sgl_kernel_controller_src is required" in out
    rc, out = run_local(role_vars(tmp_path, venv, sgl_kernel_build_strategy="sometimes"))
    assert rc != 0 and "sgl_kernel_build_strategy" in out and "sometimes" in out
    assert not (tmp_path / "src").exists()


@pytest.fixture
def fleet3():
    problems = fleetlib.missing_prerequisites()
    if problems:
        pytest.skip("fleet needs: " + "; ".join(problems))
    fleet = fleetlib.Fleet().start(3)
    yield fleet
    fleet.stop()


def test_once_builds_on_one_node_and_installs_its_wheel_on_the_matching_ones(tmp_path, build_venv, fleet3):  # noqa: F811 pylint: disable=redefined-outer-name
    builder_venv = os.path.dirname(os.path.dirname(build_venv))
    # a real interpreter of another minor version (not a pyenv shim, which may refuse to run)
    others = sorted(glob.glob("/root/.pyenv/versions/3.12*/bin/python3.12")) + ["/usr/bin/python3.12"]
    other = others[0]
    venvs = {"node1": builder_venv, "node2": str(tmp_path / "venv-node2"), "node3": str(tmp_path / "venv-node3")}
    subprocess.check_call([sys.executable, "-m", "venv", venvs["node2"]])     # same Python ABI as the builder
    has_other = os.path.exists(other)
    if has_other:
        subprocess.check_call([other, "-m", "venv", venvs["node3"]])          # another ABI: must be refused
    else:
        subprocess.check_call([sys.executable, "-m", "venv", venvs["node3"]])
    variables = role_vars(tmp_path, "{{ _test_venvs[inventory_hostname] }}", _test_venvs=venvs,
                          sgl_kernel_build_strategy="once",
                          sgl_kernel_checkout_dir=str(tmp_path) + "/src-{{ inventory_hostname }}",
                          sgl_kernel_wheel_dest=str(tmp_path) + "/wheels-{{ inventory_hostname }}",
                          sgl_kernel_wheel_cache=str(tmp_path / "controller-wheels"))
    result = fleetlib.run_playbook(PLAYBOOK, fleet3.inventory_path, extra_vars=variables, timeout=900)
    out = result.stdout + result.stderr
    hosts = recap(out)
    assert hosts["node1"]["failed"] == 0 and hosts["node2"]["failed"] == 0, out[-6000:]
    assert os.path.isdir(str(tmp_path / "src-node1" / "dist"))
    assert not os.path.exists(str(tmp_path / "src-node2")), "node2 did not build"
    (wheel,) = os.listdir(str(tmp_path / "controller-wheels"))
    assert os.listdir(str(tmp_path / "wheels-node2")) == [wheel]
    assert "took the wheel of node1: %s" % wheel in out
    # issue 12 item 20: the node checked the bytes it got against the builder's sha256
    assert re.search(r"sgl_kernel: wheel sha256 [0-9a-f]{64} verified against node1", out), out[-6000:]
    imported = subprocess.check_output([os.path.join(venvs["node2"], "bin", "python"), "-c",
                                        "import mini_sgl_kernel; print(mini_sgl_kernel.gencodes())"],
                                       cwd="/", universal_newlines=True)
    assert "sm_120a" in imported
    if has_other:
        assert hosts["node3"]["failed"] == 1
        assert "this node cannot take node1's wheel - python: cp312 here, cp311 on node1" in out
        assert not os.path.exists(str(tmp_path / "wheels-node3" / wheel))


def test_import_name_is_a_module_name_never_code(tmp_path, build_venv):  # noqa: F811 pylint: disable=redefined-outer-name
    """Issue 12 item 4: sgl_kernel_import_name was pasted into `python -c`; now it must be a dotted module name."""
    venv = os.path.dirname(os.path.dirname(build_venv))
    marker = tmp_path / "pwned"
    for name in ["os'); open('%s', 'w'); ('" % marker, "sgl_kernel; import os", "1abc", "a..b", ""]:
        rc, out = run_local(role_vars(tmp_path, venv, sgl_kernel_import_name=name))
        assert rc != 0, out[-3000:]
        assert "sgl_kernel_import_name must be a dotted Python module name" in out, out[-3000:]
    assert not marker.exists()
    assert not (tmp_path / "src").exists(), "refused before the source was copied"
    with open(os.path.join(REPO, "roles", "sgl_kernel", "tasks", "install.yml")) as handle:
        install = handle.read()
    assert "import_module(sys.argv[1])" in install and "'{{ sgl_kernel_import_name }}'" not in install


@pytest.mark.parametrize("shape", ["world-writable", "a-link", "not-a-dir"])
def test_wheel_cache_another_user_could_swap_is_refused(tmp_path, build_venv, shape):  # noqa: F811 pylint: disable=redefined-outer-name
    """Issue 12 item 20: the controller's wheel cache is checked before anything is built."""
    venv = os.path.dirname(os.path.dirname(build_venv))
    cache = tmp_path / "cache"
    if shape == "world-writable":
        cache.mkdir()
        os.chmod(str(cache), 0o1777)
    elif shape == "a-link":
        (tmp_path / "elsewhere").mkdir(mode=0o700)
        os.symlink(str(tmp_path / "elsewhere"), str(cache))
    else:
        cache.write_text("x")
    rc, out = run_local(role_vars(tmp_path, venv, sgl_kernel_build_strategy="once", sgl_kernel_wheel_cache=str(cache)))
    assert rc != 0, out[-3000:]
    assert "sgl_kernel_wheel_cache %s on the controller must be a directory" % cache in out, out[-3000:]
    assert not (tmp_path / "src").exists(), "refused before the source was copied"


def test_wheel_cache_default_is_private():
    """Issue 12 item 20: no shared /tmp default."""
    with open(os.path.join(REPO, "roles", "sgl_kernel", "defaults", "main.yml")) as handle:
        defaults = handle.read()
    (line,) = [text for text in defaults.splitlines() if text.startswith("sgl_kernel_wheel_cache:")]
    assert "/tmp" not in line and line.split(":", 1)[1].strip().startswith("~/")


@pytest.mark.parametrize("bad, message", [
    ({"sgl_kernel_venv": "relative/venv"}, "sgl_kernel_venv must be an absolute path"),
    ({"sgl_kernel_subdir": "../../etc"}, "sgl_kernel_subdir must be a relative path inside sgl_kernel_checkout_dir"),
    ({"sgl_kernel_memory_per_thread": "64GB"}, "sgl_kernel_memory_per_thread must be a size above 0 in binary units"),
    ({"sgl_kernel_fetchcontent_sources": {"A B": "relative"}}, "sgl_kernel_fetchcontent_sources must map FetchContent names"),
    ({"sgl_kernel_build_dir": "../../outside"}, "sgl_kernel_build_dir must be a relative path inside the kernel folder"),
    ({"sgl_kernel_min_jobs": 4, "sgl_kernel_max_jobs": 2}, "sgl_kernel_min_jobs is above sgl_kernel_max_jobs"),
    ({"sgl_kernel_target_archs": "sm_12x"}, "sgl_kernel_target_archs must be auto, all or a comma list"),
])
def test_bad_variables_are_named(tmp_path, build_venv, bad, message):  # noqa: F811 pylint: disable=redefined-outer-name
    venv = os.path.dirname(os.path.dirname(build_venv))
    rc, out = run_local(role_vars(tmp_path, venv, **bad))
    assert rc != 0 and message in out, out[-3000:]
    assert "Traceback" not in out
