#!/bin/sh
# Cause one real OOM kill: a child in a fresh 64 MiB v1 memory cgroup (under the caller's own) allocates
# 512 MiB. Prints {"pid", "comm", "rc", "cgroup"} as JSON; the cgroup is removed on the way out.
# Usage: oom_once.sh <memory cgroup dir of the caller> <python>
set -eu
parent=$1
python=$2
cg="$parent/gpufleet-test-oomtest-$$-$(od -An -N4 -tx4 /dev/urandom | tr -d ' ')"
mkdir "$cg"
trap 'rmdir "$cg" 2>/dev/null || true' EXIT
echo 67108864 > "$cg/memory.limit_in_bytes"
# shellcheck disable=SC2016
sh -c 'echo $$ > "$1/cgroup.procs"; exec "$2" -c "b = bytearray(512 << 20)"' oom-child "$cg" "$python" &
pid=$!
rc=0
wait "$pid" || rc=$?
oom=$(awk '$1 == "oom_kill" {print $2}' "$cg/memory.oom_control")
comm=$(basename "$python" | cut -c1-15)
printf '{"pid": %s, "comm": "%s", "rc": %s, "oom_kill": %s, "cgroup": "%s"}\n' "$pid" "$comm" "$rc" "${oom:-null}" "${cg#/sys/fs/cgroup/memory}"
