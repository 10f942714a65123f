# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function
__metaclass__ = type

"""Real systemd + cgroup v2 test nodes: Debian VMs under QEMU (TCG), reached over ssh on loopback.

    up()      build (or take from the cache) one image per release and boot one VM from each, side by
              side; returns when every VM answers ssh. Its progress is in <run dir>/state.json.
    up(background=True)  the same in a detached process (tests/run-all.sh starts it first thing).
    wait()    block until a background up() is done; its state, or VMError with the reason.
    down()    stop every VM of the run dir (by pidfile) and record their peak host memory.

Images: tests/vm/build-image.sh (cached in /var/cache/gpufleet-vm/<release>-<key>/). Each VM boots a
qcow2 overlay of its release's base, in the run dir ($GPUFLEET_VM_RUN_DIR, default <repo>/.tmp/vm/run),
with sshd forwarded to 127.0.0.1:<free port>. Stdlib only; needs root, qemu-system-x86_64, qemu-img.
"""

import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(os.path.dirname(HERE))
BUILD_IMAGE = os.path.join(HERE, "build-image.sh")

# name, release: the two nodes of the stage
NODES = (("deb12", "bookworm"), ("deb13", "trixie"))
MEMORY_MIB = int(os.environ.get("GPUFLEET_VM_MEMORY_MIB", "1536"))
CPUS = int(os.environ.get("GPUFLEET_VM_CPUS", "2"))
# TCG translation cache (QEMU defaults to 1 GiB, most of a VM's host memory)
TB_MIB = int(os.environ.get("GPUFLEET_VM_TB_MIB", "256"))
IMAGE_TIMEOUT = 1200
BOOT_TIMEOUT = 600
QEMU_NAME_PREFIX = "gpufleet-vm-"


class VMError(Exception):
    """A VM could not be built, booted or reached; the message says why."""


def run_dir():
    return os.environ.get("GPUFLEET_VM_RUN_DIR", os.path.join(REPO_ROOT, ".tmp", "vm", "run"))


def state_path():
    return os.path.join(run_dir(), "state.json")


def read_state():
    try:
        with open(state_path()) as handle:
            return json.load(handle)
    except (IOError, OSError, ValueError):
        return None


_STATE_LOCK = threading.Lock()


def write_state(state):
    with _STATE_LOCK:
        tmp = state_path() + ".tmp"
        with open(tmp, "w") as handle:
            json.dump(state, handle, indent=2, sort_keys=True)
        os.rename(tmp, state_path())


def missing_prerequisites():
    """Why this machine cannot run the VM stage ([] when it can)."""
    reasons = []
    if os.geteuid() != 0:
        reasons.append("the VM stage needs root (debootstrap, the image cache in /var/cache)")
    for tool in ("qemu-system-x86_64", "qemu-img", "debootstrap", "mkfs.ext4", "ssh", "ssh-keygen"):
        if not shutil.which(tool) and not os.path.exists(os.path.join("/usr/sbin", tool)):
            reasons.append("%s is not installed (tests/system-deps.sh installs it)" % tool)
    return reasons


def free_port():
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
    finally:
        sock.close()


def control_path(node):
    """The node's ssh master socket: a short path (sockets have a length limit) unique to run dir and port."""
    digest = hashlib.sha1(run_dir().encode()).hexdigest()[:8]
    directory = os.path.join(tempfile.gettempdir(), "gpufleet-vm-%s" % digest)
    if not os.path.isdir(directory):
        os.makedirs(directory, 0o700, exist_ok=True)
    return os.path.join(directory, "%s-%d" % (node["name"], node["port"]))


def _ssh_options(node):
    return ["-i", node["key"], "-p", str(node["port"]), "-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes",
            "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR",
            "-o", "ConnectTimeout=10", "-o", "ControlPath=%s" % control_path(node)]


def ssh_base(node):
    """ssh argv for one command on the node, through its master connection when one is up (a key exchange
    under TCG costs seconds); without one, ssh connects directly."""
    if node.get("boot_seconds") is not None and not os.path.exists(control_path(node)):
        # started detached, all output to /dev/null: a ControlPersist master that inherited our pipes would
        # keep subprocess.run waiting for it
        subprocess.run(["ssh"] + _ssh_options(node) + ["-o", "ControlMaster=yes", "-o", "ControlPersist=600", "-f",
                                                       "-N", "root@127.0.0.1"],
                       stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60,
                       check=False)
    return ["ssh"] + _ssh_options(node) + ["-o", "ControlMaster=no", "root@127.0.0.1"]


def ssh(node, command, timeout=120, stdin=None):
    """Run a shell command on a VM; CompletedProcess with text stdout/stderr. Never our own stdin: ssh makes the
    stdin it is given non-blocking, and a shared one stays so for the ansible runs after it ("Ansible requires
    blocking IO on stdin")."""
    feed = {"input": stdin} if stdin is not None else {"stdin": subprocess.DEVNULL}
    return subprocess.run(ssh_base(node) + [command], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, timeout=timeout, check=False, **feed)


def end_master(node):
    if os.path.exists(control_path(node)):
        subprocess.run(["ssh", "-o", "ControlPath=%s" % control_path(node), "-O", "exit", "root@127.0.0.1"],
                       stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=30,
                       check=False)


def qemu_pid(node):
    try:
        with open(node["pidfile"]) as handle:
            pid = int(handle.read().strip())
        with open("/proc/%d/cmdline" % pid, "rb") as handle:
            if (QEMU_NAME_PREFIX + node["name"]).encode() not in handle.read():
                return None
        return pid
    except (IOError, OSError, ValueError):
        return None


def qemu_memory(pid):
    """(VmRSS, VmHWM) of a QEMU process in bytes."""
    values = {}
    try:
        with open("/proc/%d/status" % pid) as handle:
            for line in handle:
                if line.startswith(("VmRSS:", "VmHWM:")):
                    values[line.split(":")[0]] = int(line.split()[1]) * 1024
    except (IOError, OSError):
        pass
    return values.get("VmRSS"), values.get("VmHWM")


def _log(message):
    sys.stderr.write("[vm %s] %s\n" % (time.strftime("%H:%M:%S", time.gmtime()), message))
    sys.stderr.flush()


def build_image(release, log_path):
    started = time.time()
    with open(log_path, "w") as log:
        proc = subprocess.run(["nice", "-n", "5", BUILD_IMAGE, release], stdout=subprocess.PIPE, stderr=log,
                              universal_newlines=True, timeout=IMAGE_TIMEOUT, check=False)
    if proc.returncode != 0:
        with open(log_path) as handle:
            tail = handle.read()[-2000:]
        raise VMError("image %s: build-image.sh failed (rc %d): %s" % (release, proc.returncode, tail))
    image_dir = proc.stdout.strip().splitlines()[-1]
    info = {}
    with open(os.path.join(image_dir, "build-info")) as handle:
        for line in handle:
            key, _sep, value = line.strip().partition("=")
            info[key] = value
    return image_dir, info, time.time() - started


def boot(name, release, image_dir):
    """Start one VM from image_dir (detached); its node dict."""
    base = run_dir()
    overlay = os.path.join(base, name + ".qcow2")
    if os.path.exists(overlay):
        os.unlink(overlay)
    subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", "-F", "qcow2", "-b",
                    os.path.join(image_dir, "base.qcow2"), overlay], check=True)
    key = os.path.join(base, name + ".id_ed25519")
    shutil.copyfile(os.path.join(image_dir, "id_ed25519"), key)
    os.chmod(key, 0o600)
    node = {
        "name": name, "release": release, "image": image_dir, "overlay": overlay, "key": key,
        "port": free_port(), "pidfile": os.path.join(base, name + ".pid"),
        "console": os.path.join(base, name + ".console.log"), "machine_id": uuid.uuid4().hex,
    }
    argv = [
        "nice", "-n", "5", "qemu-system-x86_64", "-name", QEMU_NAME_PREFIX + name,
        "-nodefaults", "-display", "none", "-accel", "tcg,thread=multi,tb-size=%d" % TB_MIB, "-m", str(MEMORY_MIB), "-smp", str(CPUS),
        "-kernel", os.path.join(image_dir, "vmlinuz"), "-initrd", os.path.join(image_dir, "initrd.img"),
        "-append", "root=/dev/vda rw console=ttyS0 quiet systemd.machine_id=%s systemd.hostname=%s"
                   % (node["machine_id"], name),
        "-drive", "file=%s,if=virtio,format=qcow2,cache=unsafe" % overlay,
        "-netdev", "user,id=n0,hostfwd=tcp:127.0.0.1:%d-:22" % node["port"],
        "-device", "virtio-net-pci,netdev=n0,romfile=",
        "-serial", "file:" + node["console"], "-monitor", "none",
        "-daemonize", "-pidfile", node["pidfile"],
    ]
    node["boot_started"] = time.time()
    proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True,
                          timeout=60, check=False)
    if proc.returncode != 0:
        raise VMError("%s: qemu failed to start (rc %d): %s" % (name, proc.returncode, proc.stdout.strip()))
    return node


def wait_for_ssh(node, timeout=BOOT_TIMEOUT):
    deadline = node["boot_started"] + timeout
    last = ""
    while time.time() < deadline:
        if qemu_pid(node) is None:
            raise VMError("%s: QEMU exited while booting; console tail: %s" % (node["name"], console_tail(node)))
        try:
            proc = ssh(node, "systemctl is-system-running --wait >/dev/null 2>&1; cat /proc/uptime", timeout=120)
            if proc.returncode == 0:
                node["boot_seconds"] = round(time.time() - node["boot_started"], 1)
                node["guest_uptime_seconds"] = float(proc.stdout.split()[0])
                return node
            last = proc.stderr.strip()
        except subprocess.TimeoutExpired:
            last = "ssh timed out"
        time.sleep(3)
    raise VMError("%s: no ssh on 127.0.0.1:%d after %ds (%s); console tail: %s"
                  % (node["name"], node["port"], timeout, last, console_tail(node)))


def console_tail(node, chars=1500):
    try:
        with open(node["console"], errors="replace") as handle:
            return handle.read()[-chars:]
    except (IOError, OSError):
        return "(no console log)"


def _bring_up_one(name, release, state):
    entry = state["nodes"][name]
    try:
        entry["phase"] = "image"
        write_state(state)
        image_dir, info, image_seconds = build_image(release, os.path.join(run_dir(), "image-%s.log" % release))
        entry.update(image=image_dir, image_seconds=round(image_seconds, 1), image_info=info, phase="booting")
        write_state(state)
        _log("%s: image ready in %.0fs (%s), booting" % (name, image_seconds, image_dir))
        node = boot(name, release, image_dir)
        entry.update(node)
        write_state(state)
        wait_for_ssh(node)
        entry.update(node, phase="ready")
        _log("%s: ssh on 127.0.0.1:%d after %.0fs" % (name, node["port"], node["boot_seconds"]))
    except Exception as exc:  # pylint: disable=broad-except
        entry.update(phase="failed", error=str(exc))
        _log("%s: FAILED: %s" % (name, exc))
    write_state(state)


def up(background=False):
    """Build and boot every node; with background=True in a detached process (returns at once)."""
    os.makedirs(run_dir(), exist_ok=True)
    down(quiet=True)
    problems = missing_prerequisites()
    if problems:
        write_state({"status": "failed", "error": "; ".join(problems), "nodes": {}})
        raise VMError("; ".join(problems))
    if background:
        log = open(os.path.join(run_dir(), "up.log"), "w")
        proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), "up"], stdout=log, stderr=log,
                                stdin=subprocess.DEVNULL, start_new_session=True, cwd=REPO_ROOT)
        write_state({"status": "starting", "up_pid": proc.pid, "started": time.time(), "nodes": {}})
        return proc.pid
    state = {"status": "starting", "up_pid": os.getpid(), "started": time.time(),
             "nodes": dict((name, {"name": name, "release": release, "phase": "queued"}) for name, release in NODES)}
    write_state(state)
    threads = [threading.Thread(target=_bring_up_one, args=(name, release, state)) for name, release in NODES]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    failed = ["%s: %s" % (n, e.get("error")) for n, e in sorted(state["nodes"].items()) if e["phase"] != "ready"]
    state["up_seconds"] = round(time.time() - state["started"], 1)
    state["status"] = "failed" if failed else "ready"
    if failed:
        state["error"] = "; ".join(failed)
    write_state(state)
    if failed:
        raise VMError(state["error"])
    return state


def _pid_alive(pid):
    try:
        os.kill(pid, 0)
        with open("/proc/%d/status" % pid) as handle:
            return "\nState:\tZ" not in handle.read()
    except (OSError, IOError):
        return False


def wait(timeout=IMAGE_TIMEOUT + BOOT_TIMEOUT):
    """Wait for the run dir's up() to finish; its state (raises VMError when it failed or was never started)."""
    deadline = time.time() + timeout
    while True:
        state = read_state()
        if state is None:
            raise VMError("no VM run in %s (start one with tests/vm/vmlib.py up)" % run_dir())
        if state["status"] == "ready":
            return state
        if state["status"] == "failed":
            raise VMError(state.get("error", "VM start failed"))
        if not _pid_alive(state.get("up_pid", 0)):
            state = read_state()
            if state["status"] not in ("ready", "failed"):
                raise VMError("the VM start process (pid %s) died; see %s"
                              % (state.get("up_pid"), os.path.join(run_dir(), "up.log")))
            continue
        if time.time() > deadline:
            raise VMError("VMs not ready after %ds: %s" % (timeout, json.dumps(state.get("nodes"))))
        time.sleep(2)


def down(quiet=False):
    """Stop the run's background starter and every VM (by pidfile); records peak host memory per VM."""
    state = read_state()
    if not state:
        return None
    upid = state.get("up_pid")
    if upid and upid != os.getpid() and _pid_alive(upid):
        try:
            os.killpg(upid, signal.SIGTERM)  # the starter leads its own session: builds and boots go too
        except OSError:
            pass
    for entry in state.get("nodes", {}).values():
        if "pidfile" not in entry:
            continue
        if entry.get("port"):
            end_master(entry)
        pid = qemu_pid(entry)
        if pid is None:
            continue
        rss, hwm = qemu_memory(pid)
        entry.update(host_rss_bytes=rss, host_peak_rss_bytes=hwm)
        os.kill(pid, signal.SIGTERM)
        for dummy in range(100):
            if not _pid_alive(pid):
                break
            time.sleep(0.1)
        else:
            os.kill(pid, signal.SIGKILL)
        entry["phase"] = "stopped"
        if not quiet:
            _log("%s: stopped (host RSS %s MiB, peak %s MiB)" % (entry["name"], (rss or 0) >> 20, (hwm or 0) >> 20))
        try:
            os.unlink(entry["overlay"])
        except OSError:
            pass
    state["status"] = "stopped" if state.get("status") == "ready" else state.get("status")
    write_state(state)
    return state


def main(argv):
    usage = "usage: vmlib.py up [--background] | wait | down | status"
    if not argv:
        print(usage, file=sys.stderr)
        return 2
    try:
        if argv[0] == "up":
            result = up(background="--background" in argv[1:])
            if isinstance(result, int):
                print("VMs starting in the background (pid %d); log: %s" % (result, os.path.join(run_dir(), "up.log")))
            else:
                print(json.dumps(result, indent=2, sort_keys=True))
        elif argv[0] == "wait":
            print(json.dumps(wait(), indent=2, sort_keys=True))
        elif argv[0] == "down":
            down()
        elif argv[0] == "status":
            print(json.dumps(read_state(), indent=2, sort_keys=True))
        else:
            print(usage, file=sys.stderr)
            return 2
    except VMError as exc:
        print("vm: %s" % exc, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
