# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The remediation ladder's first step (issue 38 item 2): a log bundle kept on the node, ``nvidia-bug-report``-style.

What a person (or the vendor) needs after the node has moved on: the verdict and each check's message
(``verdict.json``, ``README.txt``), every fact the check gathered (``facts.json``), the kernel's own lines it read
(``kernel.txt``: OOM kills, Xid and SXid events with their times) and the GPU probes' output as parsed
(``probes.json``). One ``gpufleet-bundle-<node>-<UTC time>.tar.gz`` per not-ready verdict, mode 0600 in a 0700
directory, the newest ``keep`` kept; check mode writes and removes nothing and says what it would. Pure functions
first; ``write`` at the bottom.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import io
import json
import os
import re
import tarfile
import time

PREFIX = "gpufleet-bundle-"
SUFFIX = ".tar.gz"
_NAME = re.compile(r"gpufleet-bundle-[A-Za-z0-9._-]+-\d{8}T\d{6}Z\.tar\.gz\Z")


def bundle_name(node, when):
    """``gpufleet-bundle-gpu1-20261204T221500Z.tar.gz`` (the node's name made file-safe, UTC)."""
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", str(node or "node"))[:64] or "node"
    return "%s%s-%s%s" % (PREFIX, safe, time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(when)), SUFFIX)


def kernel_lines(facts):
    """The kernel's lines the check read, oldest first: ``<time> OOM kill: <message>``, ``<time> Xid 79 (<pci>):
    <message>``, ``<time> SXid <code> (<switch>): <message>``."""
    events = (facts or {}).get("kernel_events") or {}
    lines = []
    for event in events.get("oom_kills") or []:
        lines.append((str(event.get("time") or ""), "OOM kill: %s" % event.get("message", "")))
    for event in events.get("xids") or []:
        lines.append((str(event.get("time") or ""), "Xid %s (%s): %s" % (event.get("code"), event.get("pci"),
                                                                         event.get("message", ""))))
    for event in events.get("sxids") or []:
        lines.append((str(event.get("time") or ""), "SXid %s (%s): %s" % (
            event.get("code"), event.get("switch") or event.get("pci"), event.get("message", ""))))
    return ["%s %s" % pair for pair in sorted(lines)]


def contents(node, ready, checks, facts, when):
    """[(file name, bytes)] of one bundle -- pure."""
    failed = [c for c in checks or [] if c.get("status") in ("failed", "unknown")]
    readme = ["gpufleet.preflight log bundle", "node: %s" % node,
              "when: %s" % time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(when)),
              "verdict: %s" % ("ready" if ready else "not ready"), ""]
    readme += ["%s %s: %s" % (c.get("status"), c.get("name"), c.get("message", "")) for c in failed]
    readme += ["", "verdict.json: every check; facts.json: every fact gathered; kernel.txt: the kernel's lines read; "
               "probes.json: the GPU probes, parsed"]
    gpus = (facts or {}).get("gpus") or {}
    return [("README.txt", ("\n".join(readme) + "\n").encode("utf-8", "replace")),
            ("verdict.json", _dump(dict(node=node, ready=bool(ready), checks=checks or []))),
            ("facts.json", _dump(facts or {})),
            ("kernel.txt", ("\n".join(kernel_lines(facts)) + "\n").encode("utf-8", "replace")),
            ("probes.json", _dump(gpus.get("probes") or {}))]


def _dump(value):
    return (json.dumps(value, indent=1, sort_keys=True, default=str) + "\n").encode("utf-8")


def to_prune(names, keep):
    """Our bundles beyond the newest ``keep`` (others' files never), oldest first."""
    ours = sorted(name for name in names if _NAME.match(name))
    return ours[:max(len(ours) - int(keep), 0)]


def tar_bytes(items, when):
    """The bundle as gzip'd tar bytes (members 0600, owned by nobody in particular)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, data in items:
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.mode = len(data), int(when), 0o600
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def write(directory, node, items, keep=10, check_mode=False, when=None):
    """Write one bundle and prune the oldest beyond ``keep``: dict(path, changed, pruned, message).

    The directory is made 0700 when missing; the file is created with O_EXCL | O_NOFOLLOW, mode 0600 (never over
    another file). Check mode: nothing written or removed."""
    when = time.time() if when is None else when
    path = os.path.join(directory, bundle_name(node, when))
    existing = os.listdir(directory) if os.path.isdir(directory) else []
    pruned = to_prune(existing + [os.path.basename(path)], keep)
    if check_mode:
        return dict(path=path, changed=True, pruned=pruned, message="(check mode, nothing written) would keep %s%s"
                    % (path, "; would remove %d older" % len(pruned) if pruned else ""))
    if not os.path.isdir(directory):
        os.makedirs(directory, 0o700)
    data = tar_bytes(items, when)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
    for name in pruned:
        try:
            os.unlink(os.path.join(directory, name))
        except OSError:
            pass
    return dict(path=path, changed=True, pruned=pruned, message="kept %s (%d bytes)%s" % (
        path, len(data), "; removed %d older" % len(pruned) if pruned else ""))
