# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""hogcc.py's CPU-bound twin for bench/replay_standin.py: holds the MiB its source asks for
(/* gpufleet-hog: MIB SECONDS */, every page touched) and spends SECONDS of its own CPU time (a busy loop, not a
sleep: compiles share the cores as cicc does), then runs the real compiler: argv = COMPILER ARGS..."""
import os
import re
import sys
import time


def main():
    args = sys.argv[1:]
    source = next((args[i + 1] for i, a in enumerate(args[:-1]) if a == "-c"), None)
    mib, seconds = 0.0, 0.0
    if source:
        with open(source) as handle:
            found = re.search(r"gpufleet-hog:\s*([0-9.]+)\s+([0-9.]+)", handle.read())
        if found:
            mib, seconds = float(found.group(1)), float(found.group(2))
    block = bytearray(int(mib * 1024 * 1024))
    for index in range(0, len(block), 4096):
        block[index] = 1
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass
    del block
    os.execvp(args[0], args)


if __name__ == "__main__":
    main()
