# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A real process named with ANSI escapes and a bell on a real node (issue 12 item 11): every report stays
readable -- JUnit parses, the console shows no escape sequence -- and a valid JMESPath custom check with a
function around a path reaches the node (item 14)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
from xml.etree import ElementTree

from fleetlib import REPO_ROOT, run_playbook

PLAYBOOK = os.path.join(REPO_ROOT, "playbooks", "preflight.yml")
HOSTILE = "ninja\x1b[31m\x07"


def test_control_characters_in_a_process_name_never_reach_a_report_raw(fleet, tmp_path):
    node = fleet.nodes[0]
    pid = node.spawn_orphan(HOSTILE)
    result = run_playbook(PLAYBOOK, fleet.inventory_path, extra_vars={
        "preflight_hosts": node.name,
        "preflight_profiles": [],
        "preflight_min_available_memory": "1MiB",
        "preflight_build_process_names": ["ninja*"],
        "preflight_custom_checks": [{"name": "no_build", "query": "length(build_processes.processes)", "max": 0}],
        "preflight_report_dir": str(tmp_path),
    })
    output = result.stdout + result.stderr
    assert "Traceback" not in output and "unknown subset" not in output, output[-3000:]
    assert "\x1b" not in result.stdout and "\x07" not in result.stdout, repr(result.stdout[-2000:])
    assert "ninja\\x1b[31m\\x07 (pid %d, orphaned" % pid in result.stdout, result.stdout[-3000:]

    suites = ElementTree.parse(str(tmp_path / "preflight.xml")).getroot()  # not well-formed before
    failures = dict((case.get("name"), case.find("failure")) for case in suites.iter("testcase"))
    assert "ninja\\x1b[31m\\x07" in failures["build_processes"].get("message")
    assert failures["no_build"] is not None and "is 1, expected <= 0" in failures["no_build"].get("message")
    for name in ("preflight.md", "preflight.json"):
        text = (tmp_path / name).read_text()
        assert "\x1b" not in text and "\x07" not in text, name
