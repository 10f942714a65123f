#!/bin/sh
# System packages the tests need (CI runs this as root on Debian/Ubuntu; `make system-deps`).
# Idempotent: installs only what is missing, runs `apt-get update` at most once.
# To add a package: one line "<command or file that proves it is there> <package>" below.
set -eu

# probe          package
REQUIRED="
/usr/sbin/sshd   openssh-server
ssh              openssh-client
ssh-keygen       openssh-client
unshare          util-linux
free             procps
tini             tini
dumb-init        dumb-init
/usr/include/numa.h libnuma-dev
shellcheck       shellcheck
qemu-system-x86_64 qemu-system-x86
qemu-img         qemu-utils
debootstrap      debootstrap
mkfs.ext4        e2fsprogs
chromium         chromium
ccache           ccache
redis-server     redis-server
strings          binutils
slurmctld        slurm-wlm
slurmd           slurm-wlm
munged           munge
prometheus-node-exporter prometheus-node-exporter
nsenter          util-linux
ip               iproute2
"

missing=""
echo "$REQUIRED" | {
    while read -r probe package; do
        [ -n "$probe" ] || continue
        case "$probe" in
            /*) [ -e "$probe" ] && continue ;;
            *) command -v "$probe" >/dev/null 2>&1 && continue ;;
        esac
        case " $missing " in *" $package "*) ;; *) missing="$missing $package" ;; esac
    done
    if [ -z "$missing" ]; then
        echo "system-deps: all present"
        exit 0
    fi
    if [ "$(id -u)" -ne 0 ]; then
        echo "system-deps: missing:$missing (run as root to install)" >&2
        exit 1
    fi
    echo "system-deps: installing$missing"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update
    # shellcheck disable=SC2086
    apt-get install -y --no-install-recommends $missing
}
