# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Helpers the host tests share: running a module the way Ansible does (``from conftest import run_module``)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import subprocess
import sys
import time

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODULES = os.path.join(REPO, "plugins", "modules")
COLLECTIONS = os.path.join(REPO, ".tmp", "collections")


def run_module(name, args, tmp_path, inside=None, timeout=60):
    """Run plugins/modules/<name>.py the way Ansible does (arguments in a JSON file); ``inside``: a host pid whose
    PID and mount namespaces to enter. Returns ``(result dict, seconds)``."""
    args_file = tmp_path / ("args-%s-%d.json" % (name, time.monotonic_ns()))
    args_file.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": args}))
    argv = [sys.executable, os.path.join(MODULES, name + ".py"), str(args_file)]
    if inside is not None:
        argv = ["nsenter", "-t", str(inside), "-p", "-m", "--"] + argv
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([COLLECTIONS] + [p for p in sys.path if p]))
    started = time.monotonic()
    try:
        done = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                              env=env, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        pytest.fail("%s did not answer within %ss: %s" % (name, timeout, args))
    elapsed = time.monotonic() - started
    try:
        return json.loads(done.stdout), elapsed
    except ValueError:
        pytest.fail("%s gave no JSON (rc %s): %s %s" % (name, done.returncode, done.stdout[-2000:], done.stderr[-2000:]))
