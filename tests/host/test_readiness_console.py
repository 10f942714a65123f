# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A failed readiness task on the console (issue 20 item 3): the failed checks and their fixes, not kilobytes of facts
and policy (28 KB before), each cause said once (issue 27 item 4: 2-6 KB); -v shows the complete result."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import subprocess

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# more memory than any machine: always fails, on that check alone - the compilers another test stage runs on this
# machine meanwhile are allowed (they failed build_processes too and lengthened the message past the bound, in CI)
ARGS = json.dumps({"profiles": [], "min_available_memory": "100TiB", "max_build_processes": 100000})


def adhoc(*extra, **kwargs):
    # ansible-core 2.19 imports DSA, which cryptography 51 warns of in every process: not this collection's output
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_COLLECTIONS_PATH=os.path.join(REPO, ".tmp", "collections"), PYTHONWARNINGS="ignore:DSA is deprecated")
    argv = [os.path.join(REPO, ".venv", "bin", "ansible"), "localhost", "-c", "local", "-m",
            "gpufleet.preflight.readiness", "-a", kwargs.get("args", ARGS)] + list(extra)
    proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, cwd=REPO, timeout=300,
                          check=False)
    return proc.returncode, proc.stdout.decode("utf-8", "replace")


def test_failed_verdict_names_checks_and_fixes_without_facts_or_policy():
    rc, out = adhoc()
    assert rc == 2, out
    assert "available_memory" in out and "lower preflight_min_available_memory" in out
    assert '"policy"' not in out and "gpufleet_memory" not in out and "ansible_facts" not in out
    assert len(out) < 1500, len(out)
    assert out.count("lower preflight_min_available_memory") == 2, out   # the error line and msg, nothing else


def test_a_gpu_less_node_says_its_nvidia_smi_sentence_once():
    """Here (no NVIDIA driver) six GPU checks fail for one reason: one sentence, in the error line and msg."""
    rc, out = adhoc(args=json.dumps({"profiles": ["gpu"], "max_build_processes": 100000}))
    if "nvidia-smi not found" not in out:
        pytest.skip("this machine has nvidia-smi")
    assert rc == 2, out
    assert out.count("nvidia-smi not found") == 2, out
    assert "gpu_count, compute_capability, ecc_errors" in out and len(out) < 2000, (len(out), out)


def test_verbose_shows_everything():
    rc, out = adhoc("-v")
    assert rc == 2
    assert '"policy"' in out and "gpufleet_memory" in out


def test_a_failure_message_of_several_checks_keeps_each_sentence_whole(tmp_path):
    """Issue 39: `make preflight`'s failure message, said to list every failed check, cut each cause at 300
    characters (a recent OOM kill's sentence, with its cgroup path and the fix at its end, is about 400)."""
    sentence = "a fleet-specific rule explained at length, " * 10 + "and the fix at the very end: call the fleet team"
    custom = [{"name": "fleet_rule", "query": "memory.effective.available_bytes", "min": 10 ** 18, "message": sentence}]
    argv = [os.path.join(REPO, ".venv", "bin", "ansible-playbook"), "playbooks/preflight.yml",
            "-e", "preflight_report_dir=%s" % tmp_path, "-e", "preflight_min_available_memory=100TiB",
            "-e", json.dumps({"preflight_profiles": [], "preflight_custom_checks": custom,
                              "preflight_max_build_processes": 100000})]
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_COLLECTIONS_PATH=os.path.join(REPO, ".tmp", "collections"))
    proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, cwd=REPO, timeout=300,
                          check=False)
    out = proc.stdout.decode("utf-8", "replace")
    assert proc.returncode == 2, out
    fatal = [line for line in out.splitlines() if line.startswith("fatal: [localhost]")]
    assert len(fatal) == 1 and "lower preflight_min_available_memory" in fatal[0], out
    assert len(sentence) > 400 and sentence in fatal[0], fatal[0]
