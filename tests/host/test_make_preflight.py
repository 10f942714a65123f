# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""`make preflight` installs what the controller runs, as README says (issue 39): requirements.txt (ansible-core,
paramiko, jmespath), not requirements-dev.txt's test and lint tools. Read from make's dry run for a new venv: no
install here."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import subprocess

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def dry_run(tmp_path, target):
    run = subprocess.run(["make", "-n", "-C", REPO, "VENV=%s" % (tmp_path / "venv"), target], stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, universal_newlines=True, check=False, timeout=60)
    assert run.returncode == 0, run.stdout
    return run.stdout


def test_make_preflight_installs_only_the_runtime_requirements(tmp_path):
    out = dry_run(tmp_path, "preflight")
    assert "pip install --quiet -r requirements.txt" in out, out
    assert "requirements-dev.txt" not in out, out
    assert "ansible-playbook playbooks/preflight.yml" in out, out
    with open(os.path.join(REPO, "requirements.txt")) as handle:
        wanted = sorted(line.split(">")[0].split("=")[0].strip() for line in handle
                        if line.strip() and not line.startswith("#"))
    assert wanted == ["ansible-core", "jmespath", "paramiko"]


def test_make_setup_still_installs_the_development_requirements(tmp_path):
    assert "pip install --quiet -r requirements-dev.txt" in dry_run(tmp_path, "setup")
