# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function
__metaclass__ = type

"""Fixtures for the VM stage: real systemd + cgroup v2 nodes (Debian 12 and 13 under QEMU TCG).

- ``vms``: the session's two VMs (``deb12`` bookworm with git, ``deb13`` trixie without), booted by
  ``tests/vm/vmlib.py`` -- reused when tests/run-all.sh started them in the background, else started
  here -- and stopped at the end of the session. ``vms.nodes["deb12"].run("cmd")`` runs over ssh;
  ``vms.adhoc(pattern, module, args)`` runs a collection module through ``ansible`` and returns
  ``{host: result}``; ``vms.inventory`` is the YAML inventory (127.0.0.1:<port>, relaxed host keys).

Without root or QEMU the tests skip with the reason -- except when CI=true, where they fail.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

import pytest
import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tools"))
import vmlib  # noqa: E402 pylint: disable=wrong-import-position
from needs import require  # noqa: E402 pylint: disable=wrong-import-position

ANSIBLE = os.path.join(vmlib.REPO_ROOT, ".venv", "bin", "ansible")
ANSIBLE_PLAYBOOK = os.path.join(vmlib.REPO_ROOT, ".venv", "bin", "ansible-playbook")
TIMINGS = {}
# the hungry project (tests/projects/hungry) as the VM tests build it, in a directory root owns: guarded_build refuses
# a build directory others can write to (/tmp)
HUNGRY = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "projects", "hungry")
HUNGRY_CMD = ("cmake -S . -B build -G Ninja -DHOG_MIB={mib} -DHOG_SECONDS={seconds} -DHOG_STEPS={steps} -DHOG_RAMP={ramp} "
              "&& cmake --build build")
WORK = "/srv/build"


class Node:
    def __init__(self, entry):
        self.entry = entry
        self.name = entry["name"]
        self.release = entry["release"]
        self.port = entry["port"]

    def run(self, command, timeout=180, check=False, stdin=None):
        proc = vmlib.ssh(self.entry, command, timeout=timeout, stdin=stdin)
        if check and proc.returncode != 0:
            raise AssertionError("%s: `%s` exited %d: %s%s"
                                 % (self.name, command, proc.returncode, proc.stdout, proc.stderr))
        return proc

    def out(self, command, timeout=180):
        return self.run(command, timeout=timeout, check=True).stdout

    def put_file(self, path, content, mode=0o755):
        proc = self.run("cat > %s && chmod %o %s" % (path, mode, path), stdin=content)
        assert proc.returncode == 0, "%s: cannot write %s: %s" % (self.name, path, proc.stderr)

    def put_tree(self, local_dir, remote_dir):
        """Copy a local directory to the node (tar over ssh), replacing what was there."""
        tar = subprocess.run(["tar", "-C", local_dir, "-cf", "-", "."], stdout=subprocess.PIPE, check=True)
        unpack = "rm -rf %s && mkdir -p %s && tar -C %s -xf -" % (remote_dir, remote_dir, remote_dir)
        proc = subprocess.run(vmlib.ssh_base(self.entry) + [unpack],
                              input=tar.stdout, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120,
                              check=False)
        assert proc.returncode == 0, proc.stderr

    def kmsg_mark(self, label):
        """Write a marker line into the node's kernel log; kernel_lines_since(marker) reads what follows."""
        marker = "gpufleet-vm-test %s %d" % (label, time.time() * 1000)
        self.out("echo '%s' > /dev/kmsg" % marker)
        return marker

    def kernel_lines_since(self, marker):
        lines = self.out("dmesg").splitlines()
        for index, line in enumerate(lines):
            if marker in line:
                return lines[index + 1:]
        raise AssertionError("%s: kernel log marker %r not found" % (self.name, marker))


class VMs:
    def __init__(self, state):
        self.state = state
        self.nodes = dict((name, Node(entry)) for name, entry in state["nodes"].items())
        self.calls = 0
        self.control_dir = tempfile.mkdtemp(prefix="gpufleet-vm-ssh-")  # short: ControlPath has a length limit
        self.inventory = os.path.join(vmlib.run_dir(), "inventory.yml")
        hosts = {}
        for name, node in sorted(self.nodes.items()):
            hosts[name] = {"ansible_host": "127.0.0.1", "ansible_port": node.port,
                           "ansible_ssh_private_key_file": node.entry["key"]}
        inventory = {"all": {"hosts": hosts, "vars": {
            "ansible_user": "root",
            "ansible_python_interpreter": "/usr/bin/python3",
            # the VMs' host keys change with every image: relaxed, and the masters in our own dir
            "ansible_ssh_args": "-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o IdentitiesOnly=yes "
                                "-o ControlMaster=auto -o ControlPersist=60s -o ControlPath=%s/%%C" % self.control_dir,
            "ansible_ssh_timeout": 30,
        }}}
        with open(self.inventory, "w") as handle:
            yaml.safe_dump(inventory, handle, default_flow_style=False, sort_keys=True)

    def env(self):
        env = dict(os.environ)
        env.update({
            "ANSIBLE_CONFIG": os.path.join(vmlib.REPO_ROOT, "ansible.cfg"),
            "ANSIBLE_COLLECTIONS_PATH": os.path.join(vmlib.REPO_ROOT, ".tmp", "collections"),
            "ANSIBLE_STDOUT_CALLBACK": "ansible.builtin.minimal",
            "ANSIBLE_NOCOLOR": "1", "ANSIBLE_FORCE_COLOR": "0", "ANSIBLE_DEPRECATION_WARNINGS": "0",
            "ANSIBLE_HOST_KEY_CHECKING": "0",
        })
        return env

    def adhoc(self, pattern, module, args=None, extra_vars=None, timeout=900):
        """Run a module on the VMs through `ansible`; {host: result dict} with `_status` (SUCCESS, CHANGED, FAILED...)."""
        argv = [ANSIBLE, pattern, "-i", self.inventory, "-m", module]
        if args is not None:
            argv += ["-a", json.dumps(args)]
        if extra_vars:
            argv += ["-e", json.dumps(extra_vars)]
        started = time.time()
        proc = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              universal_newlines=True, env=self.env(), cwd=vmlib.REPO_ROOT, timeout=timeout, check=False)
        # every run's output stays in the run dir for a failure's post-mortem
        self.calls += 1
        with open(os.path.join(vmlib.run_dir(), "ansible-%03d-%s.log" % (self.calls, module.split(".")[-1])), "w") as log:
            log.write(" ".join(argv) + "\n" + proc.stdout)
        results = parse_minimal(proc.stdout)
        for result in results.values():
            result["_seconds"] = time.time() - started
        expected = [name for name in self.nodes if pattern in ("all", name) or name in pattern.split(":")]
        missing = [name for name in expected if name not in results]
        assert not missing, "no result for %s from %s:\n%s" % (missing, " ".join(argv), proc.stdout[-4000:])
        return results

    def playbook(self, path, extra_vars=None, limit=None, timeout=900):
        argv = [ANSIBLE_PLAYBOOK, "-i", self.inventory, path]
        if extra_vars:
            argv += ["-e", json.dumps(extra_vars)]
        if limit:
            argv += ["--limit", limit]
        env = self.env()
        env["ANSIBLE_STDOUT_CALLBACK"] = "ansible.builtin.default"
        return subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              universal_newlines=True, env=env, cwd=vmlib.REPO_ROOT, timeout=timeout, check=False)

    def close(self):
        for entry in os.listdir(self.control_dir):
            subprocess.run(["ssh", "-o", "ControlPath=%s" % os.path.join(self.control_dir, entry), "-O", "exit", "vm"],
                           stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        shutil.rmtree(self.control_dir, ignore_errors=True)


def on_every_node(nodes, check):
    """``check(name, node)`` on each node, by name; every node's failed assertion collected and reported together, so
    one broken VM does not hide what the others show."""
    problems = []
    for name, node in sorted(nodes.items()):
        try:
            check(name, node)
        except AssertionError as exc:
            problems.append("%s: %s" % (name, exc))
    assert not problems, "\n".join(problems)


def parse_minimal(output):
    """`host | STATUS => {json}` lines of the minimal callback -> {host: result}."""
    results = {}
    decoder = json.JSONDecoder()
    for match in re.finditer(r"^(\S+) \| (SUCCESS|CHANGED|FAILED|UNREACHABLE)!? => ", output, re.M):
        result = decoder.raw_decode(output[match.end():])[0]
        result["_status"] = match.group(2)
        results[match.group(1)] = result
    return results


def _require_vms():
    problems = vmlib.missing_prerequisites()
    if not os.path.exists(ANSIBLE):
        problems.append("%s missing (make setup)" % ANSIBLE)
    require("VM tests", problems)


def _running_state():
    """The state of VMs already up or coming up in the run dir (tests/run-all.sh's background start)."""
    state = vmlib.read_state()
    if not state:
        return None
    if state.get("status") == "starting" and vmlib._pid_alive(state.get("up_pid", 0)):  # pylint: disable=protected-access
        return state
    if state.get("status") == "ready" and all(vmlib.qemu_pid(e) for e in state["nodes"].values()):
        return state
    return None


@pytest.fixture(scope="session")
def vms():
    _require_vms()
    started = time.time()
    try:
        if _running_state():
            state = vmlib.wait()
            TIMINGS["wait_for_background_start_seconds"] = time.time() - started
        else:
            state = vmlib.up()
    except vmlib.VMError as exc:
        vmlib.down(quiet=True)
        pytest.fail("the test VMs did not come up: %s" % exc, pytrace=False)
    TIMINGS["vms_up_seconds_total"] = state.get("up_seconds", 0)
    for name, entry in state["nodes"].items():
        TIMINGS["%s_image_seconds" % name] = entry.get("image_seconds", 0)
        TIMINGS["%s_boot_to_ssh_seconds" % name] = entry.get("boot_seconds", 0)
    fleet = VMs(state)
    yield fleet
    fleet.close()
    if os.environ.get("GPUFLEET_VM_KEEP") != "1":
        final = vmlib.down(quiet=True) or {"nodes": {}}
        for name, entry in final["nodes"].items():
            if entry.get("host_peak_rss_bytes"):
                TIMINGS["%s_host_peak_rss_mib" % name] = entry["host_peak_rss_bytes"] / 1048576.0


def pytest_terminal_summary(terminalreporter):
    if TIMINGS:
        terminalreporter.write_sep("-", "gpufleet test VM timings")
        for key in sorted(TIMINGS):
            terminalreporter.write_line("%s: %.1f" % (key, TIMINGS[key]))
