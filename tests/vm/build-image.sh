#!/usr/bin/env bash
# Build (or find in the cache) a bootable Debian test-node image for the VM stage.
#
#   tests/vm/build-image.sh RELEASE        # bookworm | trixie; prints the image directory
#
# The image is made from Debian's packages by debootstrap (no loop device, no chroot-time network):
# a minbase rootfs with systemd, sshd, python3, a kernel and the packages in tests/vm/packages.txt,
# root's authorized key from an ed25519 key generated for this image, systemd-networkd on DHCP,
# units a test node does not need masked, a small initrd (MODULES=list: virtio + ext4), then
# `mkfs.ext4 -d` into a raw file converted to a qcow2 base. The kernel and initrd are copied beside
# it so QEMU boots them directly (-kernel/-initrd), no boot loader.
#
# Cached OUTSIDE the clone in $GPUFLEET_VM_CACHE (default /var/cache/gpufleet-vm)/<release>-<key>/,
# <key> a hash of this script, packages.txt and the release: a second run finds `ready` there and
# returns at once. A half-built image never carries `ready`; concurrent builders of one key serialise
# on a lock. Mirror: $GPUFLEET_VM_MIRROR, else the Debian archive this machine's apt sources use.
# Needs root, debootstrap, mkfs.ext4 (e2fsprogs >= 1.43), qemu-img, ssh-keygen.
set -euo pipefail

RELEASE=${1:?usage: $0 RELEASE}
HERE=$(cd "$(dirname "$0")" && pwd)
CACHE=${GPUFLEET_VM_CACHE:-/var/cache/gpufleet-vm}
IMAGE_SIZE=${GPUFLEET_VM_IMAGE_SIZE:-3G}
log() { printf '[vm-image %s %s] %s\n' "$RELEASE" "$(date -u +%H:%M:%S)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

case "$RELEASE" in bookworm|trixie) ;; *) die "unknown release $RELEASE (bookworm or trixie)" ;; esac
[ "$(id -u)" -eq 0 ] || die "building VM images needs root (debootstrap)"
for tool in debootstrap mkfs.ext4 qemu-img ssh-keygen; do
  command -v "$tool" >/dev/null || die "$tool is not installed (tests/system-deps.sh installs it)"
done

key=$( { cat "$HERE/build-image.sh" "$HERE/packages.txt"; echo "$RELEASE"; } | sha256sum | cut -c1-12)
dir=$CACHE/$RELEASE-$key
if [ -f "$dir/ready" ]; then
  log "cached: $dir"
  echo "$dir"
  exit 0
fi

# The Debian archive apt uses here: the first deb source (one-line or deb822) that is not a
# security or updates archive and whose URI ends in /debian.
apt_mirror() {
  local f
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [ -r "$f" ] || continue
    awk '$1 == "deb" { for (i = 2; i <= NF; i++) if ($i ~ /^(https?|ftp):\/\//) { print $i; break } }' "$f"
  done
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -r "$f" ] || continue
    awk 'BEGIN { RS = ""; FS = "\n" }
         { types = ""; uris = ""; enabled = 1
           for (i = 1; i <= NF; i++) {
             if ($i ~ /^Types:/) types = $i
             if ($i ~ /^URIs:/) { uris = $i; sub(/^URIs:[ \t]*/, "", uris) }
             if ($i ~ /^Enabled:[ \t]*no/) enabled = 0 }
           if (enabled && types ~ /(^|[ \t])deb([ \t]|$)/) { split(uris, u, /[ \t]+/); print u[1] } }' "$f"
  done
}
mirror=${GPUFLEET_VM_MIRROR:-$(apt_mirror | sed 's#/*$##' | grep -E '/debian$' | head -n1 || true)}
[ -n "$mirror" ] || die "no Debian archive in /etc/apt/sources.list*; set GPUFLEET_VM_MIRROR to one"

mkdir -p "$CACHE"
exec 9>"$CACHE/.lock-$RELEASE-$key"
flock 9
if [ -f "$dir/ready" ]; then  # built by whoever held the lock before us
  echo "$dir"
  exit 0
fi

work=$CACHE/.build-$RELEASE-$key
rootfs=$work/rootfs
cleanup() {
  for m in dev/pts dev proc sys; do mountpoint -q "$rootfs/$m" 2>/dev/null && umount -l "$rootfs/$m"; done
  rm -rf "$work"
}
trap cleanup EXIT
cleanup
mkdir -p "$work"

include=$(awk -v r="$RELEASE" '!/^#/ && NF == 2 && ($1 == "*" || $1 == r) { print $2 }' "$HERE/packages.txt" | paste -sd, -)
log "debootstrap from $mirror (include: $include)"
start=$(date +%s)
debootstrap --variant=minbase --include="$include" "$RELEASE" "$rootfs" "$mirror" >"$work/debootstrap.log" 2>&1 \
  || { tail -n 30 "$work/debootstrap.log" >&2; die "debootstrap failed"; }
debootstrap_seconds=$(( $(date +%s) - start ))
log "debootstrap done in ${debootstrap_seconds}s"

# ssh: a key for this image; root logs in with it, nothing else
ssh-keygen -q -t ed25519 -N '' -C "gpufleet-vm-$RELEASE-$key" -f "$work/id_ed25519"
install -d -m 700 "$rootfs/root/.ssh"
install -m 600 "$work/id_ed25519.pub" "$rootfs/root/.ssh/authorized_keys"
printf 'PasswordAuthentication no\nUseDNS no\n' >"$rootfs/etc/ssh/sshd_config.d/gpufleet-test.conf"

# network: DHCP from QEMU's user-mode network on whatever the NIC is called
cat >"$rootfs/etc/systemd/network/80-gpufleet-dhcp.network" <<'EOF'
[Match]
Name=en* eth*

[Network]
DHCP=ipv4
EOF
systemctl --root="$rootfs" enable systemd-networkd.service >/dev/null 2>&1
# root is given on the kernel command line; hostname and machine id too (one image, many nodes)
echo '/dev/vda / ext4 rw,errors=remount-ro 0 1' >"$rootfs/etc/fstab"
: >"$rootfs/etc/machine-id"
rm -f "$rootfs/var/lib/dbus/machine-id"
echo localhost >"$rootfs/etc/hostname"
# units a test node does not need and that cost boot time under TCG
for unit in e2scrub_reap.service e2scrub_all.timer apt-daily.timer apt-daily-upgrade.timer dpkg-db-backup.timer \
            man-db.timer fstrim.timer logrotate.timer systemd-timesyncd.service getty@tty1.service \
            systemd-networkd-wait-online.service systemd-pstore.service; do
  systemctl --root="$rootfs" mask "$unit" >/dev/null 2>&1 || true
done

# a small initrd: only what finds a virtio disk with ext4 on it (36 MB -> ~7 MB, 40 s less to boot under TCG)
sed -i 's/^MODULES=.*/MODULES=list/' "$rootfs/etc/initramfs-tools/initramfs.conf"
printf '%s\n' virtio_pci virtio_blk virtio_net ext4 >>"$rootfs/etc/initramfs-tools/modules"
mount -t proc proc "$rootfs/proc"
mount -t sysfs sys "$rootfs/sys"
mount --bind /dev "$rootfs/dev"
chroot "$rootfs" update-initramfs -u -k all >"$work/initramfs.log" 2>&1 \
  || { tail -n 20 "$work/initramfs.log" >&2; die "update-initramfs failed"; }
umount "$rootfs/dev" "$rootfs/sys" "$rootfs/proc"

# no apt lists or package cache, docs, translations, or drivers no VM has (about a third of the image)
rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/* \
       "$rootfs"/usr/share/doc/* "$rootfs"/usr/share/man/* "$rootfs"/usr/share/locale/* "$rootfs"/usr/share/info/*
for modules in "$rootfs"/lib/modules/*/kernel; do
  rm -rf "$modules"/sound "$modules"/drivers/{gpu,media,infiniband,staging,bluetooth,net/wireless,net/ethernet,usb,scsi,iio} \
         "$modules"/net/{wireless,mac80211,bluetooth}
done
for version in "$rootfs"/lib/modules/*; do chroot "$rootfs" depmod "$(basename "$version")"; done

mkdir -p "$work/image"
cp -L "$rootfs/vmlinuz" "$work/image/vmlinuz"
cp -L "$rootfs/initrd.img" "$work/image/initrd.img"
chmod 644 "$work/image/vmlinuz" "$work/image/initrd.img"
mv "$work/id_ed25519" "$work/id_ed25519.pub" "$work/image/"
mkfs.ext4 -q -F -L gpufleet-root -d "$rootfs" "$work/root.raw" "$IMAGE_SIZE" >&2
qemu-img convert -f raw -O qcow2 "$work/root.raw" "$work/image/base.qcow2"
rm -f "$work/root.raw"
{
  echo "release=$RELEASE"
  echo "key=$key"
  echo "mirror=$mirror"
  echo "debootstrap_seconds=$debootstrap_seconds"
  echo "build_seconds=$(( $(date +%s) - start ))"
  echo "kernel=$(basename "$(readlink "$rootfs/vmlinuz")")"
  echo "built=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
} >"$work/image/build-info"
rm -rf "$dir"
mv "$work/image" "$dir"
touch "$dir/ready"
# images of this release built by an older script or package list are of no more use
for old in "$CACHE/$RELEASE"-*; do
  [ "$old" = "$dir" ] || rm -rf "$old"
done
log "built $dir in $(( $(date +%s) - start ))s ($(du -sh "$dir" | cut -f1))"
echo "$dir"
