# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A compiler wrapper that holds the memory its source asks for (/* gpufleet-hog: MIB SECONDS */), every page
touched so it is resident and charged to the build's cgroup, then runs the real compiler: argv = COMPILER ARGS...
HOGCC_SCALE multiplies the MiB (a bench sizes the mix to its machine); HOGCC_BURN=1 spins a CPU for the seconds.
"""
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
    block = bytearray(int(mib * 1024 * 1024))
    for index in range(0, len(block), 4096):
        block[index] = 1
    if os.environ.get("HOGCC_BURN") == "1":    # a compile uses a CPU for its time: a -j above the cores pays for it
        end = time.time() + seconds
        while time.time() < end:
            pass
    else:
        time.sleep(seconds)
    del block
    os.execvp(args[0], args)


if __name__ == "__main__":
    main()
