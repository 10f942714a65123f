# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Controller side, pure: NVIDIA's Xid catalogue (class and documented action per code), Xid 154's recovery action
read from its own message, and the NVSwitch SXid classes the ``sxid`` check reads (issue 37 item 1).

Source: NVIDIA, "Xid Errors" (docs.nvidia.com/deploy/xid-errors/), "Analyzing Xid Errors with the Xid Catalog"
(docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html), Table 1 "Xids", as published for the r590 driver
branch: per code its mnemonic, description, "Resolution Bucket (Immediate Action)" and "(Investigatory Action)". The
class below is the immediate bucket, lower-cased (RESTART_BM is ``reboot``, WORKFLOW_NVLINK_ERR and
WORKFLOW_NVLINK5_ERR are ``nvlink``); codes the catalogue gives no bucket (162-168) carry the class their documented
text implies and that text as the action. Verify against the driver branch you run.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

# code -> (class, what it is [, the catalogue's own action text]). Codes not listed are unclassified: they fail only
# when named in fatal_xids. Xids 56, 57, 58, 65, 73, 81 are "Unused" on Ampere and later (CONTACT_SUPPORT if seen).
XID_CATALOGUE = {
    13: ("restart_app", "graphics engine exception (usually the application's own fault)"),
    31: ("restart_app", "GPU memory page fault (usually the application's own fault)"),
    43: ("restart_app", "GPU stopped processing (the application hit an error)"),
    45: ("restart_app", "preemptive cleanup after an earlier error"),
    48: ("reset_gpu", "double-bit ECC error"),
    54: ("check_mechanicals", "auxiliary power is not connected to the GPU board (SILENT_RUNNING_PWR_REDUCED_CLOCKING)",
         "check the GPU's auxiliary power cables and connectors (reseat them), then reboot; contact support if it stays"),
    56: ("contact_support", "display engine error (unused on Ampere and later)"),
    57: ("contact_support", "error programming the video memory interface (unused on Ampere and later)"),
    58: ("contact_support", "unstable video memory interface (unused on Ampere and later)"),
    62: ("reset_gpu", "internal micro-controller halt"),
    63: ("ignore", "GPU memory remapping event (row remapping recorded; reset to apply)"),
    64: ("reset_gpu", "GPU memory remapping failure"),
    65: ("contact_support", "video processor exception (unused on Ampere and later)"),
    68: ("restart_app", "NVDEC0 exception"),
    69: ("restart_app", "graphics engine class error"),
    73: ("contact_support", "NVENC2 error (unused on Ampere and later)"),
    74: ("nvlink", "NVLink error (WORKFLOW_NVLINK_ERR: the link, or the device at its far end)"),
    79: ("reboot", "GPU has fallen off the bus"),
    80: ("restart_app", "corrupted data sent to the GPU"),
    81: ("contact_support", "VGA subsystem error (unused on Ampere and later)"),
    92: ("ignore", "high single-bit ECC error rate"),
    94: ("restart_app", "contained memory error (only the application that touched it is affected; reset when convenient)"),
    95: ("reset_gpu", "uncontained memory error"),
    109: ("reset_gpu", "context switch timeout (ROBUST_CHANNEL_CTXSW_TIMEOUT_ERROR)"),
    110: ("reset_gpu", "security fault (SEC_FAULT_ERROR)",
          "revert recent hardware changes and cold-reset (power-cycle) the node; if it stays, contact the vendor"),
    119: ("reset_gpu", "GSP RPC timeout"),
    120: ("reset_gpu", "GSP error"),
    136: ("reset_gpu", "NVLink link training failed (ALI_TRAINING_FAIL)",
          "reset the GPU; if it recurs, investigate the link's signal integrity (cable, connector, baseboard)"),
    140: ("reset_gpu", "unrecovered ECC error"),
    143: ("reset_gpu", "GPU initialization error (GPU_INIT_ERROR)"),
    144: ("nvlink", "NVLink5 SAW error (NVLINK_SAW_ERROR)"),
    145: ("nvlink", "NVLink5 RLW error (NVLINK_RLW_ERROR)"),
    146: ("nvlink", "NVLink5 TLW error (NVLINK_TLW_ERROR)"),
    147: ("nvlink", "NVLink5 TREX error (NVLINK_TREX_ERROR)"),
    148: ("nvlink", "NVLink5 NVLPW_CTRL error (NVLINK_NVLPW_CTRL_ERROR)"),
    149: ("nvlink", "NVLink5 NETIR error (NVLINK_NETIR_ERROR)"),
    150: ("nvlink", "NVLink5 MSE error (NVLINK_MSE_ERROR)"),
    151: ("restart_vm", "confidential-computing key rotation error (ROBUST_CHANNEL_KEY_ROTATION_ERROR)"),
    154: ("ignore", "GPU recovery action changed (GPU_RECOVERY_ACTION_CHANGED): the driver's action for the Xids beside it"),
    155: ("reset_gpu", "NVLink link down flagged as intentional (NVLINK_SW_DEFINED_ERROR)",
          "reset the GPU; then investigate what took the link down (software or a user's request)"),
    156: ("reset_gpu", "resource retirement event (RESOURCE_RETIREMENT_EVENT)"),
    157: ("ignore", "resource retirement failure: no repair resources left (RESOURCE_RETIREMENT_FAILURE)",
          "workloads may still run but the same Xid may return; contact support"),
    158: ("reset_gpu", "GPU fatal timeout (GPU_FATAL_TIMEOUT)"),
    159: ("check_uvm", "C2C CHI non-data error (ROBUST_CHANNEL_CHI_NON_DATA_ERROR), on a C2C-linked GPU",
          "check the UVM / C2C path (nvidia-uvm messages beside it); the report may be sympathetic to another fault"),
    162: ("ignore", "power smoothing hardware circuitry re-engaged (PSHC_REENGAGED)"),
    163: ("power_smoothing", "power smoothing hardware circuitry disengaged (PSHC_DISENGAGED)",
          "no GPU reset required: resolve the thermal events to get power smoothing back; if it was disabled by a "
          "timeout, reload the driver or reset the GPU"),
    164: ("power_smoothing", "power smoothing hardware circuitry: low lifetime reached (PSHC_LOW_LIFETIME)",
          "monitor power swings; plan to replace the GPU if power smoothing is needed (it will be disabled soon)"),
    165: ("power_smoothing", "power smoothing hardware circuitry: lifetime exhausted (PSHC_ZERO_LIFETIME)",
          "power smoothing is disabled and power swings will occur: replace the GPU if they are not acceptable"),
    168: ("reboot", "reduced GPU memory capacity: errors in the write-protected region (REDUCED_GPU_MEMORY_CAPACITY)",
          "enable ECC (row remapping) or reboot so the driver shifts the write-protected region"),
}

XID_ACTION_WORDS = {
    "reset_gpu": "reset the GPU (`nvidia-smi -r -i N`, the GPU drained) or reboot",
    "reboot": "reboot the node; if it recurs, reseat the GPU or open an RMA",
    "contact_support": "hardware fault: drain the node and open an RMA with the GPU's serial",
    "restart_app": "the application's own error: restart it",
    "check_mechanicals": "check the GPU's power cables and seating, then reboot",
    "nvlink": "NVLink fault: reset the GPU (the Xid 154 beside it names the driver's action); if it recurs check the "
              "link, the NVSwitch tray and cabling (`nvidia-smi nvlink -e`)",
    "restart_vm": "restart the VM (confidential computing), or reset the GPU on bare metal",
    "check_uvm": "check nvidia-uvm and the C2C link (Grace-Blackwell), then reset the GPU",
    "power_smoothing": "power smoothing is degraded: check GPU thermals and plan a GPU replacement",
    "ignore": "informational: no action on its own",
}

# The classes xid_fail_actions may name (the readiness option's choices), in the order the docs list them.
FAIL_ACTIONS = ("reset_gpu", "reboot", "contact_support", "restart_app", "check_mechanicals", "nvlink", "restart_vm",
                "check_uvm", "power_smoothing")
DEFAULT_FAIL_ACTIONS = ("reset_gpu", "reboot", "contact_support", "check_mechanicals", "nvlink", "restart_vm",
                        "check_uvm")

# Xid 154's message: "GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)"; the values the
# catalogue lists: None, Drain P2P, Drain and Reset, GPU Reset Required, Node Reboot Required (older drivers print
# "OS Reboot", consumer boards "PF FLR"). -> (class, hint).
_RECOVERY_RE = re.compile(r"recovery action changed from .*?\bto\s+(?:0x[0-9a-fA-F]+\s*)?\(([^)]{1,80})\)")
RECOVERY_ACTION_CLASSES = (
    (re.compile(r"replace", re.I), "contact_support", "the driver asks to drain the node and replace the GPU (RMA)"),
    (re.compile(r"reboot", re.I), "reboot", "the driver asks for a node reboot"),
    (re.compile(r"drain and reset", re.I), "reset_gpu", "the driver asks to drain the GPU's work, then reset it"),
    (re.compile(r"drain p2p", re.I), "reset_gpu", "the driver asks to drain peer-to-peer (NVLink) work, then reset the GPU"),
    (re.compile(r"reset|flr", re.I), "reset_gpu", "the driver asks for a GPU reset (`nvidia-smi -r -i N`)"),
    (re.compile(r"^none$", re.I), "ignore", "the driver's recovery action is back to None"),
)

# NVLink5 Xids (144-150) print their severity: "144, SAW_MVB Nonfatal XC0 i0 Link 0 (...)" or "... Fatal ...". The
# catalogue's subcode table gives non-fatal rows the IGNORE bucket and fatal rows RESET_GPU.
_SEVERITY_RE = re.compile(r"\b(Non-?fatal|Fatal)\b", re.I)
NVLINK5_XIDS = frozenset(range(144, 151))


def recovery_action(message):
    """Xid 154's message -> the action text it names (``Node Reboot Required``), or None."""
    match = _RECOVERY_RE.search(message or "")
    return match.group(1).strip() if match else None


def xid_severity(message):
    """``fatal`` / ``nonfatal`` from an NVLink5 Xid's message, or None when it says neither."""
    match = _SEVERITY_RE.search(message or "")
    if not match:
        return None
    return "fatal" if match.group(1).lower() == "fatal" else "nonfatal"


def classify_xid(code):
    """An Xid code -> (class, description) from the catalogue, ``(None, None)`` when unclassified."""
    entry = XID_CATALOGUE.get(code)
    return (entry[0], entry[1]) if entry else (None, None)


def classify_event(xid):
    """One Xid event (code, message) -> ``dict(kind, what, action)``: the catalogue's class and action, refined by
    what the message says (Xid 154's recovery action; an NVLink5 Xid's Fatal/Nonfatal)."""
    code = xid.get("code")
    message = xid.get("message") or ""
    entry = XID_CATALOGUE.get(code)
    kind, what = (entry[0], entry[1]) if entry else (None, None)
    action = entry[2] if entry and len(entry) > 2 else XID_ACTION_WORDS.get(kind)
    if code == 154:
        wanted = recovery_action(message)
        for pattern, cls, hint in RECOVERY_ACTION_CLASSES:
            if wanted and pattern.search(wanted):
                return dict(kind=cls, what="GPU recovery action %s" % wanted, action=hint, recovery_action=wanted)
        return dict(kind="ignore" if wanted is None else None, what=what, action=action, recovery_action=wanted)
    if code in NVLINK5_XIDS:
        severity = xid_severity(message)
        if severity == "nonfatal":
            return dict(kind="ignore", what="%s, non-fatal" % what, action="non-fatal NVLink5 error: no action on "
                        "its own (the catalogue's IGNORE rows); watch for a fatal one or an Xid 154")
        if severity == "fatal":
            return dict(kind="nvlink", what="%s, fatal" % what, action=action)
    return dict(kind=kind, what=what, action=action)


# NVSwitch SXids: the Fabric Manager User Guide ("NVSwitch Errors", docs.nvidia.com/datacenter/tesla/
# fabric-manager-user-guide/) prints them as "nvidia-nvswitchN: SXid (PCI:<bus>): <code>, <Fatal|Non-fatal>, <text>";
# a fatal SXid brings down the NVSwitch's links and the GPUs' NVLink traffic through it: reset the GPUs and the
# NVSwitch (a node reboot on HGX baseboards), and open a support case when it recurs; non-fatal ones are counted
# and reported but need no action on their own.
SXID_ACTION = ("the NVSwitch reported a fatal error: drain the node, stop Fabric Manager, reset the GPUs and NVSwitches "
               "(or reboot the node), start Fabric Manager; open a support case if it recurs")
