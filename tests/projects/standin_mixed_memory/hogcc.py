# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A compiler wrapper that holds the memory its source asks for (/* gpufleet-hog: MIB SECONDS */), every page
touched so it is resident and charged to the build's cgroup, then runs the real compiler: argv = COMPILER ARGS...
HOGCC_SCALE multiplies the MiB (a bench sizes the mix to its machine); HOGCC_BURN=1 spins a CPU for the seconds.
The memory grows over the first HOGCC_RAMP (default 0.5) of the seconds, as a compiler's does (cicc grows for most of
its run; bench/replay.py models the same): 0 takes it all at once.
"""
import mmap
import os
import re
import sys
import time


def main():
    args = sys.argv[1:]
    # the word after the last -c: torch's ninja file says "-c -c $in" (distutils ends its cflags with -c)
    source = next((args[i + 1] for i, a in enumerate(args[:-1]) if a == "-c" and args[i + 1] != "-c"), None)
    mib, seconds = 0, 0.0
    if source:
        with open(source) as handle:
            found = re.search(r"gpufleet-hog:\s*([0-9.]+)\s+([0-9.]+)", handle.read())
        if found:
            mib, seconds = float(found.group(1)) * float(os.environ.get("HOGCC_SCALE", "1")), float(found.group(2))
    start, ramp = time.time(), seconds * float(os.environ.get("HOGCC_RAMP", "0.5"))
    burn = os.environ.get("HOGCC_BURN") == "1"    # a compile uses a CPU for its time: a -j above the cores pays for it

    def until(moment):
        while time.time() < moment:
            if not burn:
                time.sleep(max(moment - time.time(), 0))

    # anonymous mmap: its pages become resident as they are touched (bytearray(n) zeroes - touches - them all at once)
    size = int(mib * 1024 * 1024)
    block = mmap.mmap(-1, max(size, 1))
    steps = max(1, int(ramp / 0.05))
    for step in range(steps):   # touch the pages a slice at a time: resident (and charged) as the ramp goes
        for index in range(step * size // steps // 4096 * 4096, (step + 1) * size // steps, 4096):
            block[index] = 1
        until(start + ramp * (step + 1) / steps)
    until(start + seconds)
    block.close()
    os.execvp(args[0], args)


if __name__ == "__main__":
    main()
