# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Real builds on this host, through Ansible (``ansible localhost -m gpufleet.preflight.guarded_build``)."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import fcntl
import glob
import json
import os
import shutil
import subprocess
import sys
import time

import pytest

# tests/tools: the helpers the suites share (proctools.py), also where tests/run-all.sh does not put it on PYTHONPATH
TOOLS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tools")
if TOOLS not in sys.path:
    sys.path.append(TOOLS)

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
PROJECTS = os.path.join(REPO, "tests", "projects")
ANSIBLE = os.path.join(os.path.dirname(sys.executable), "ansible")
ANSIBLE_PLAYBOOK = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
SGL_KERNEL_PLAYBOOK = os.path.join(REPO, "playbooks", "build_sgl_kernel.yml")
BUILD_VENV = os.path.join(REPO, ".tmp", "skbuild-venv")


def ansible_env():
    env = dict(os.environ)
    env.update(
        ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"),
        ANSIBLE_COLLECTIONS_PATH=os.path.join(REPO, ".tmp", "collections"),
        ANSIBLE_STDOUT_CALLBACK="ansible.builtin.minimal",
        ANSIBLE_DEPRECATION_WARNINGS="False",
        ANSIBLE_NOCOLOR="1",
    )
    return env


def module_command(args, check=False):
    argv = [ANSIBLE, "localhost", "-m", "gpufleet.preflight.guarded_build", "-a", json.dumps(args)]
    if check:
        argv.append("--check")
    return argv


def parse_result(output):
    """``localhost | CHANGED => {...}`` (minimal callback) -> the result dict."""
    marker = output.find("localhost | ")
    assert marker >= 0, output
    start = output.index("=> ", marker) + 3
    result = json.JSONDecoder().raw_decode(output[start:])[0]
    # the minimal callback says FAILED! in the header, not in the dict
    result["failed"] = output[marker:start].startswith("localhost | FAILED")
    return result


def run_module(args, check=False, timeout=600):
    proc = subprocess.run(module_command(args, check), env=ansible_env(), stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, universal_newlines=True, timeout=timeout, check=False)
    result = parse_result(proc.stdout)
    result["_output"] = proc.stdout
    return result


def start_module(args):
    """The module in the background (for the lock and kill-midway tests); returns the Popen."""
    return subprocess.Popen(module_command(args), env=ansible_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, universal_newlines=True)


def finish_module(proc, timeout=600):
    out, dummy = proc.communicate(timeout=timeout)
    result = parse_result(out)
    result["_output"] = out
    return result


def wait_for_status(path, predicate, timeout=120):
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            with open(path) as handle:
                status = json.load(handle)
            if predicate(status):
                return status
        except (IOError, OSError, ValueError):
            pass
        time.sleep(0.2)
    raise AssertionError("status %s never matched" % path)


def processes_with(word, zombies=True):
    """Pids whose command line holds ``word`` as one argument (the tests' unique sleep durations); ``zombies``:
    count the ones that have exited and wait to be reaped."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % name, "rb") as handle:
                argv = handle.read().split(b"\0")
            if not zombies:
                with open("/proc/%s/stat" % name) as handle:
                    if handle.read().rsplit(")", 1)[1].split()[0] == "Z":
                        continue
        except (IOError, OSError, IndexError):
            continue
        if word.encode() in argv:
            found.append(int(name))
    return found


def own_memory_cgroup():
    with open("/proc/self/cgroup") as handle:
        for line in handle:
            parts = line.strip().split(":", 2)
            if "memory" in parts[1].split(","):
                return "/sys/fs/cgroup/memory" + parts[2].rstrip("/")
    return None


def build_cgroups(name):
    base = own_memory_cgroup()
    return glob.glob(os.path.join(base, "gpufleet-build-%s-*" % name)) if base else []


@pytest.fixture
def hungry(tmp_path):
    """A fresh copy of the memory-hungry synthetic project."""
    target = str(tmp_path / "hungry")
    shutil.copytree(os.path.join(PROJECTS, "hungry"), target)
    return target


def pytest_collection_modifyitems(config, items):
    base = own_memory_cgroup()
    reason = None
    if os.geteuid() != 0:
        reason = "real builds need root to create memory cgroups"
    elif not base or not os.access(base, os.W_OK):
        reason = "no writable cgroup v1 memory controller"
    elif not shutil.which("cmake") or not shutil.which("ninja") or not shutil.which("cc"):
        reason = "cmake, ninja and a C compiler are needed"
    if reason and os.environ.get("CI") == "true":
        # CI installs everything these builds need: a missing piece there is a failure, never a skip.
        raise pytest.UsageError("tests/build: %s (CI=true: failing instead of skipping)" % reason)
    if reason:
        for item in items:
            item.add_marker(pytest.mark.skip(reason=reason))


# ---------------------------------------------------------------- the sgl-kernel look-alike's wheel and role
@pytest.fixture(scope="module")
def build_venv():
    """A venv with scikit-build-core (the build backend sgl-kernel uses), made once from the package index."""
    python = os.path.join(BUILD_VENV, "bin", "python")
    os.makedirs(os.path.dirname(BUILD_VENV), exist_ok=True)
    # pytest-xdist workers side by side: one makes the venv, the others wait for it
    with open(BUILD_VENV + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not os.path.exists(python):
            subprocess.check_call(["python3", "-m", "venv", BUILD_VENV])
        probe = subprocess.run([python, "-c", "import scikit_build_core"], stderr=subprocess.DEVNULL, check=False)
        if probe.returncode != 0:
            install = subprocess.run([python, "-m", "pip", "install", "-q", "scikit-build-core>=0.10"],
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, check=False)
            if install.returncode != 0:
                pytest.skip("cannot install scikit-build-core: %s" % install.stdout[-500:])
    return python


def role_vars(tmp_path, venv, **more):
    variables = {
        "sgl_kernel_gate": False,           # the shared test host has other tests' OOM kills in its kernel log
        "sgl_kernel_build_deps": False,     # tests/roles covers build_deps; here a prepared venv stands in
        "sgl_kernel_source_type": "controller",
        "sgl_kernel_controller_src": os.path.join(PROJECTS, "mini_sgl_kernel"),
        "sgl_kernel_checkout_dir": str(tmp_path / "src"),
        "sgl_kernel_report_dir": str(tmp_path / "reports"),  # the default, reports/ of the cwd, is the checkout here
        "sgl_kernel_subdir": "",
        "sgl_kernel_venv": venv,
        "sgl_kernel_import_name": "mini_sgl_kernel",
        "sgl_kernel_memory_per_thread": "1GiB",
        "sgl_kernel_poll_interval": 3,
    }
    variables.update(more)
    return variables


def run_local(variables):
    argv = [ANSIBLE_PLAYBOOK, "-i", "localhost,", "-c", "local", "-e", "ansible_python_interpreter=" + sys.executable,
            "-e", __import__("json").dumps(variables), SGL_KERNEL_PLAYBOOK]
    env = ansible_env()
    env.pop("ANSIBLE_STDOUT_CALLBACK")
    proc = subprocess.run(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True,
                          timeout=900, check=False)
    return proc.returncode, proc.stdout
