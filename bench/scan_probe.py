# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Run inside a test node by bench/process_scan.py: time the /proc scan in-process and the seed's pipeline.

Prints one JSON object.  Its own command line names no build tool, so the seed's ``ps aux | grep``
cannot count it (the words live in this file, not in argv).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), ".tmp", "collections"))

from ansible_collections.gpufleet.preflight.plugins.module_utils._facts._processes import collect_build_processes  # noqa: E402

SEED_GREP = 'ps aux | grep -E "cmake|ninja|cc1plus|nvcc" | grep -v grep | wc -l'


def main(repeat):
    scan_seconds, grep_seconds, scan_counts, grep_counts, scanned = [], [], [], [], []
    by_name = {}
    for _round in range(repeat):
        started = time.perf_counter()
        facts = collect_build_processes()
        scan_seconds.append(time.perf_counter() - started)
        scan_counts.append(facts["count"])
        scanned.append(facts["scanned"])
        by_name = facts["by_name"]

        started = time.perf_counter()
        out = subprocess.run(["sh", "-c", SEED_GREP], stdout=subprocess.PIPE, check=True).stdout
        grep_seconds.append(time.perf_counter() - started)
        grep_counts.append(int(out.strip()))
    json.dump({"scan_seconds": scan_seconds, "grep_seconds": grep_seconds, "scan_counts": scan_counts,
               "grep_counts": grep_counts, "scanned": scanned, "by_name": by_name}, sys.stdout)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 5)
