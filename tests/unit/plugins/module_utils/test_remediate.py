# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The remediation ladder's hands (issue 38 item 2) against the project's stand-in nvidia-smi, run as a process: the
compute processes read again, ``nvidia-smi -r -i N`` only for an idle GPU and once per kernel line, check mode doing
and writing nothing, a reboot refused where Slurm is not used. The real slurmctld side is tests/scheduler."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import multiprocessing
import os
import shutil
import signal
import subprocess
import time

from ansible_collections.gpufleet.preflight.plugins.module_utils._facts._gpus import parse_query_gpu
from ansible_collections.gpufleet.preflight.plugins.module_utils._node_check import _remediate, _remediation

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
STUB = os.path.join(ROOT, "fleet", "stubs", "nvidia-smi")  # tests/fleet/stubs: the fleet's stand-in
FIXTURE = os.path.join(HERE, "fixtures", "gpus", "rtx_pro_6000_x8")


def stub_dir(tmp_path, apps=""):
    folder = tmp_path / "smi"
    shutil.copytree(FIXTURE, str(folder))
    (folder / "compute-apps.csv").write_text(apps)
    return folder


def runner(folder):
    def run(argv, timeout, data=None, env=None):
        proc = subprocess.run(argv, input=None if data is None else data.encode(), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, timeout=timeout, env=dict(os.environ, GPUFLEET_STUB_DIR=str(folder)),
                              check=False)
        return proc.returncode, proc.stdout.decode(), proc.stderr.decode()
    return run


def facts_of(folder, age=60):
    text = (folder / "query-gpu.csv").read_text().splitlines()
    fields = text[0].split(": ", 1)[1].split(",")
    devices = parse_query_gpu("\n".join(text[1:]), fields)
    xids = [dict(code=48, pci="0000:1b:00", age_seconds=age, message="Xid 48")]
    return {"gpus": {"devices": devices}, "kernel_events": {"xids": xids, "window_seconds": 86400}}


def ladder(tmp_path, folder, check_mode=False, slurm_on=False, smi=STUB, **settings):
    verdict = dict(checks=[{"name": "fatal_xid", "status": "failed"}], facts=facts_of(folder))
    ctx = dict(run=runner(folder), slurm_run=None, find=lambda name: None, smi=smi, slurm_on=slurm_on,
               check_mode=check_mode, log=lambda line: None)
    settings = _remediation.validate(dict(dict(enabled=True, reset_classes=["reset_gpu"]), **settings))
    return _remediate.run_ladder(settings, verdict, "node1", ctx, str(tmp_path))


def resets(folder):
    path = folder / "resets.log"
    return path.read_text().splitlines() if path.exists() else []


def test_busy_gpus_as_nvidia_smi_says_now(tmp_path):
    folder = stub_dir(tmp_path)
    facts = facts_of(folder)
    uuid = facts["gpus"]["devices"][0]["uuid"]
    (folder / "compute-apps.csv").write_text("%s, 4242, python3, 1024\n" % uuid)
    assert _remediate.busy_gpus(runner(folder), STUB, facts) == {0: "pid 4242 (python3)"}
    (folder / "compute-apps-exit-code").write_text("15")
    busy = _remediate.busy_gpus(runner(folder), STUB, facts)
    assert sorted(busy) == list(range(8)) and "unknown processes" in busy[0], busy


def test_a_reset_once_per_kernel_line_and_check_mode_does_nothing(tmp_path):
    folder = stub_dir(tmp_path)
    said = ladder(tmp_path, folder, check_mode=True)
    assert said == ["remediation: Xid 48 (double-bit ECC error): reset_gpu: class reset_gpu: reset GPU 0; would reset "
                    "GPU 0 (nvidia-smi -r -i 0)"], said
    assert resets(folder) == []
    assert not (tmp_path / "remediation-node1.json").exists()
    said = ladder(tmp_path, folder)
    assert resets(folder) == ["-r -i 0"] and "GPU 0 reset: GPU 00000000:1B:00.0 was successfully reset." in said[0], said
    again = ladder(tmp_path, folder)
    assert resets(folder) == ["-r -i 0"] and "already acted on (reset_gpu)" in again[0], again
    history = _remediation.read_history(str(tmp_path / "remediation-node1.json"))
    assert [(h["step"], h["state"]) for h in history] == [("reset_gpu", "done"), ("none", "none")], history


def test_a_busy_gpu_is_not_reset_and_the_reason_is_kept_once(tmp_path):
    folder = stub_dir(tmp_path)
    uuid = facts_of(folder)["gpus"]["devices"][0]["uuid"]
    (folder / "compute-apps.csv").write_text("%s, 4242, python3, 1024\n" % uuid)
    for _run in range(3):
        said = ladder(tmp_path, folder)
    assert resets(folder) == [] and "no reset while GPU 0 is in use by pid 4242 (python3)" in said[0], said
    history = _remediation.read_history(str(tmp_path / "remediation-node1.json"))
    assert len(history) == 1 and history[0]["state"] == "none", history


def test_a_reboot_only_through_slurm(tmp_path):
    folder = stub_dir(tmp_path)
    started = time.time()
    for _run in range(3):
        said = ladder(tmp_path, folder, reset_classes=[], reboot_classes=["reset_gpu"])
    assert "not rebooted: Slurm is not used in this mode" in said[0], said
    history = _remediation.read_history(str(tmp_path / "remediation-node1.json"))
    assert len(history) == 1 and history[0]["state"] == "refused" and history[0]["at"] >= started, history


# nvidia-smi whose reset never ends (a wedged GPU): the run that started it is then killed, as slurmd kills a
# HealthCheckProgram past its time
HANGING_RESET = """#!/bin/sh
case " $* " in *" -r "*) echo "$*" >> "$GPUFLEET_STUB_DIR/resets.log"; echo $$ > "$GPUFLEET_STUB_DIR/reset.pid"; exec sleep 60 ;; esac
exec %s "$@"
"""


def test_a_run_killed_mid_reset_leaves_its_record_and_the_next_run_does_not_reset_again(tmp_path):
    folder = stub_dir(tmp_path)
    smi = tmp_path / "nvidia-smi"
    smi.write_text(HANGING_RESET % STUB)
    smi.chmod(0o755)
    child = multiprocessing.get_context("fork").Process(target=ladder, args=(tmp_path, folder), kwargs=dict(smi=str(smi)))
    child.start()
    deadline = time.monotonic() + 20
    while not (folder / "reset.pid").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    try:
        assert resets(folder) == ["-r -i 0"]
        os.kill(child.pid, signal.SIGKILL)
        child.join(10)
    finally:
        os.kill(int((folder / "reset.pid").read_text()), signal.SIGKILL)
    history = _remediation.read_history(str(tmp_path / "remediation-node1.json"))
    assert [(h["step"], h["state"]) for h in history] == [("reset_gpu", "started")], history
    again = ladder(tmp_path, folder)
    assert resets(folder) == ["-r -i 0"] and "already acted on (reset_gpu)" in again[0], again


def test_no_step_is_taken_when_its_record_cannot_be_written(tmp_path):
    folder = stub_dir(tmp_path)
    state_dir = "/proc/self"   # a real directory where no file can be made, even by root: read as empty, never written
    verdict = dict(checks=[{"name": "fatal_xid", "status": "failed"}], facts=facts_of(folder))
    ctx = dict(run=runner(folder), slurm_run=None, find=lambda name: None, smi=STUB, slurm_on=False, check_mode=False,
               log=lambda line: None)
    settings = _remediation.validate(dict(enabled=True, reset_classes=["reset_gpu"]))
    said = _remediate.run_ladder(settings, verdict, "node1", ctx, str(state_dir))
    assert resets(folder) == [], said
    assert "not reset gpu: the history that keeps it from repeating cannot be written" in said[0], said
