# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""_xid_catalogue: NVIDIA's Xid catalogue (r590), Xid 154's recovery action and NVLink5 severity read from the message."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.gpufleet.preflight.plugins.module_utils._readiness import _readiness_options as table
from ansible_collections.gpufleet.preflight.plugins.module_utils._readiness import _xid_catalogue as cat

# The codes issue 37 names beyond the 29 known before it.
ISSUE_CODES = [54, 109, 110, 136, 143] + list(range(144, 152)) + list(range(155, 160)) + [162, 163, 164, 165, 168]


@pytest.mark.parametrize("code", ISSUE_CODES)
def test_every_code_the_issue_names_has_a_class_and_an_action(code):
    kind = cat.classify_event({"code": code, "message": "x"})
    assert kind["kind"] in cat.FAIL_ACTIONS + ("ignore",), code
    assert kind["what"] and kind["action"], code


def test_every_class_has_action_words():
    for entry in cat.XID_CATALOGUE.values():
        assert entry[0] in cat.XID_ACTION_WORDS, entry


@pytest.mark.parametrize("code, kind", [
    (13, "restart_app"), (48, "reset_gpu"), (54, "check_mechanicals"), (63, "ignore"), (74, "nvlink"), (79, "reboot"),
    (109, "reset_gpu"), (136, "reset_gpu"), (151, "restart_vm"), (157, "ignore"), (159, "check_uvm"),
    (162, "ignore"), (165, "power_smoothing"), (168, "reboot"), (999, None),
])
def test_class_by_code(code, kind):
    assert cat.classify_event({"code": code, "message": ""})["kind"] == kind
    assert cat.classify_xid(code)[0] == kind


@pytest.mark.parametrize("message, action, kind", [
    ("GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)", "Node Reboot Required", "reboot"),
    ("GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)", "GPU Reset Required", "reset_gpu"),
    ("GPU recovery action changed from 0x0 (None) to 0x2 (OS Reboot)", "OS Reboot", "reboot"),
    ("GPU recovery action changed from 0x1 (GPU Reset Required) to 0x3 (Drain and Reset)", "Drain and Reset",
     "reset_gpu"),
    ("GPU recovery action changed from 0x0 (None) to 0x4 (Drain P2P)", "Drain P2P", "reset_gpu"),
    ("GPU recovery action changed from 0x0 (None) to 0x5 (Drain and Replace)", "Drain and Replace", "contact_support"),
    ("GPU recovery action changed from 0x0 (None) to 0x1 (PF FLR)", "PF FLR", "reset_gpu"),
    ("GPU recovery action changed from 0x2 (Node Reboot Required) to 0x0 (None)", "None", "ignore"),
    ("GPU recovery action changed from 0x0 (None) to 0x9 (Something New)", "Something New", None),
    ("garbled", None, "ignore"),
])
def test_xid_154_reads_the_drivers_recovery_action(message, action, kind):
    assert cat.recovery_action(message) == action
    judged = cat.classify_event({"code": 154, "message": message})
    assert judged["kind"] == kind
    if action and kind not in (None, "ignore"):
        assert action in judged["what"] and judged["action"].startswith("the driver asks")


@pytest.mark.parametrize("message, severity, kind", [
    ("SAW_MVB Nonfatal XC0 i0 Link 0 (0x00000001 0x00000008 0x0 0x0 0x0 0x0)", "nonfatal", "ignore"),
    ("NETIR_LINK_EVT Fatal XC0 i0 Link 00 (0x026001c6 0x0 0x0 0x0 0x0 0x0)", "fatal", "nvlink"),
    ("RLW_REMAP Non-fatal XC0 i0 Link 3 (0x0)", "nonfatal", "ignore"),
    ("no severity word", None, "nvlink"),
])
def test_nvlink5_severity_from_the_message(message, severity, kind):
    assert cat.xid_severity(message) == severity
    assert cat.classify_event({"code": 145, "message": message})["kind"] == kind


def test_the_option_lists_the_catalogues_classes():
    entry = [option for option in table.OPTIONS if option["name"] == "xid_fail_actions"][0]
    assert tuple(entry["choices"]) == cat.FAIL_ACTIONS
    assert tuple(entry["default"]) == cat.DEFAULT_FAIL_ACTIONS
