# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Stub GPUs: a per-node nvidia-smi replaying captured Blackwell output (or another recorded scenario), for the
fleet tests and bench/."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from fleet_base import REPO_ROOT


STUB = os.path.join(REPO_ROOT, "tests", "fleet", "stubs", "nvidia-smi")
BLACKWELL = os.path.join(REPO_ROOT, "tests", "unit", "plugins", "module_utils", "fixtures", "gpus", "rtx_pro_6000_x8")
SBIN = "/usr/local/sbin"


def blackwell_rows():
    with open(os.path.join(BLACKWELL, "query-gpu.csv")) as handle:
        lines = [line for line in handle.read().splitlines() if line.strip()]
    return lines[0], lines[1:]


def install_gpus(node, rows=None, hang=False, scenario=None, files=None):
    """The stub as /usr/local/sbin/nvidia-smi on this node only, with its replay files beside it.

    ``scenario``: another fixture folder (tests/unit/.../fixtures/gpus/<name>) replayed whole instead of the
    Blackwell one; ``files``: {name: text} written over it (a changed ``q.txt``, a ``sleep-q`` that hangs a probe).
    """
    with open(STUB) as handle:
        node.put_stub(SBIN + "/nvidia-smi", handle.read())
    data = SBIN + "/nvidia-smi.d/"
    if scenario:
        folder = os.path.join(os.path.dirname(BLACKWELL), scenario)
        for name in sorted(os.listdir(folder)):
            with open(os.path.join(folder, name)) as handle:
                node.put_stub(data + name, handle.read(), 0o644)
        node.put_stub(data + "compute-apps.csv", "", 0o644)
        for tool in ("dcgmi", "nvbandwidth", "all_reduce_perf"):   # the active tests' stand-ins, answering from data
            with open(os.path.join(os.path.dirname(STUB), tool)) as handle:
                node.put_stub(SBIN + "/" + tool, handle.read())
    else:
        header, healthy = blackwell_rows()
        node.put_stub(data + "query-gpu.csv", "\n".join([header] + (healthy if rows is None else rows)) + "\n", 0o644)
        node.put_stub(data + "compute-apps.csv", "", 0o644)
        with open(os.path.join(BLACKWELL, "version.txt")) as handle:
            node.put_stub(data + "version.txt", handle.read(), 0o644)
    for name, text in sorted((files or {}).items()):
        node.put_stub(data + name, text, 0o644)
    if hang:
        node.put_stub(data + "hang", "", 0o644)
