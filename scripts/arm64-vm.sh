#!/usr/bin/env bash
# arm64-vm: an arm64 Debian machine under qemu-system-aarch64, for the
# tests that need a real arm64 kernel (the per-CPU caches need rseq, which
# qemu-user does not implement). Everything comes from Debian's archive:
# the kernel (linux-image-*-arm64), busybox-static for the first minutes of
# boot, and a root filesystem that debootstrap unpacks here and finishes
# inside the machine on its first boot. Built once into DIR and kept there.
#
# Usage: arm64-vm.sh image DIR
#          build the machine in DIR unless DIR/ready says it is built
#        arm64-vm.sh run DIR SHARE SCRIPT [ARGS...]
#          boot it with the host folder SHARE mounted at the same path in
#          the guest, run `sh SCRIPT ARGS...` there (as root, in SHARE),
#          power off; exits with the script's status. The root filesystem
#          is started from the image each time (writes are thrown away).
# Environment: ARM64_VM_CPUS (2), ARM64_VM_MEMORY (4G), ARM64_VM_TIMEOUT
# (seconds for one run, 7200).
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
SUITE=bookworm
MIRROR=http://deb.debian.org/debian
# What the guest needs beyond a minimal Debian: ctest (cmake), python3 and
# procps for the tests' scripts and programs, libtsan2 for the
# ThreadSanitizer builds, the profiler's unwinder and google-pprof (which
# reads symbols with binutils), man for the manual pages' test. The image
# is built again when this list changes (DIR/ready holds it).
GUEST_PACKAGES=cmake,python3,procps,libtsan2,libunwind8,google-perftools,binutils,man-db,time,file
# Modules the first boot loads before it can mount anything: virtio
# transports, the disk, ext4 (and the crc32c it checks its metadata with)
# and 9p (the share).
MODULES="virtio_mmio virtio_pci virtio_blk crc32c_generic ext4 9pnet_virtio 9p"

die() {
  echo "arm64-vm: $*" >&2
  exit 1
}

# Download one arm64 package of Debian's archive into the current folder.
download() {
  apt-get download "$1:arm64" >/dev/null 2>&1 || {
    apt-get update -qq && apt-get download "$1:arm64"
  } || die "cannot download $1:arm64"
}

# The kernel package's name, as the linux-image-arm64 metapackage says.
kernel_package() {
  apt-cache depends linux-image-arm64:arm64 2>/dev/null |
    awk '/Depends: linux-image-[0-9]/ { sub(/:arm64$/, "", $2); print $2; exit }'
}

# A module's dependencies (its .modinfo "depends=" line), then itself: the
# order insmod needs. $1: the modules' folder, $2: a module name.
module_order() {
  local root=$1 name=$2 file deps d
  file=$(find "$root" -name "$name.ko" -o -name "${name//_/-}.ko" | head -1)
  [ -n "$file" ] || return 0 # built into the kernel
  deps=$(tr '\0' '\n' <"$file" | sed -n 's/^depends=//p' | tr ',' ' ')
  for d in $deps; do module_order "$root" "$d"; done
  echo "$file"
}

# The kernel and its modules into $DIR/kernel, vmlinuz at $DIR/vmlinuz.
build_kernel() {
  local pkg
  dpkg --print-foreign-architectures | grep -qx arm64 || {
    dpkg --add-architecture arm64
    apt-get update -qq
  }
  pkg=$(kernel_package)
  [ -n "$pkg" ] || { apt-get update -qq; pkg=$(kernel_package); }
  [ -n "$pkg" ] || die "no arm64 kernel package in the archive"
  (cd "$DIR/debs" && download "$pkg")
  rm -rf "$DIR/kernel"
  dpkg-deb -x "$DIR"/debs/"$pkg"_*.deb "$DIR/kernel"
  cp "$DIR"/kernel/boot/vmlinuz-* "$DIR/vmlinuz"
}

# The initramfs: busybox, the modules above, and arm64-init.sh as its
# init (it mounts the image and the share and runs the job in the image).
build_initrd() {
  local root=$DIR/initrd m f
  rm -rf "$root"
  mkdir -p "$root"/{bin,dev,proc,sys,newroot,modules}
  ls "$DIR"/debs/busybox-static_*.deb >/dev/null 2>&1 ||
    (cd "$DIR/debs" && download busybox-static)
  dpkg-deb -x "$DIR"/debs/busybox-static_*.deb "$DIR/busybox"
  cp "$DIR/busybox/bin/busybox" "$root/bin/busybox"
  : >"$root/modules/order"
  for m in $MODULES; do
    for f in $(module_order "$DIR/kernel/lib/modules" "$m"); do
      grep -qx "${f##*/}" "$root/modules/order" && continue
      cp "$f" "$root/modules/"
      echo "${f##*/}" >>"$root/modules/order"
    done
  done
  cp "$HERE/arm64-init.sh" "$root/init"
  chmod +x "$root/init"
  (cd "$root" && find . | cpio -o -H newc --quiet | gzip -1) >"$DIR/initrd.gz"
}

# The root filesystem: debootstrap's first stage here (downloads and
# unpacks), into an ext4 image; the second stage (configuring the
# packages) runs in the machine on its first boot.
build_rootfs() {
  local root=$DIR/rootfs
  rm -rf "$root" "$DIR/rootfs.img"
  debootstrap --arch=arm64 --foreign --variant=minbase \
    --include="$GUEST_PACKAGES" "$SUITE" "$root" "$MIRROR"
  mkfs.ext4 -q -L hzroot -d "$root" "$DIR/rootfs.img" 3G
  rm -rf "$root"
}

# qemu-system-aarch64 with the image (read-write only for the first boot)
# and SHARE; the guest runs JOB (a file in SHARE) and writes its status
# next to it. $1: "persist" or "snapshot". No network (-nic none): the
# guest needs none, and the virt machine's default NIC would need its
# boot ROM (efi-virtio.rom), which is in ipxe-qemu, a package
# qemu-system-arm only recommends (install-deps.sh installs none of those).
boot() {
  local mode=$1 share=$2 job=$3 drive
  drive="file=$DIR/rootfs.img,format=raw,if=none,id=root"
  [ "$mode" = snapshot ] && drive="$drive,snapshot=on"
  timeout --foreground "${ARM64_VM_TIMEOUT:-7200}" \
    qemu-system-aarch64 -machine virt -cpu neoverse-n1 \
    -smp "${ARM64_VM_CPUS:-2}" -m "${ARM64_VM_MEMORY:-4G}" -nographic \
    -no-reboot -nic none -kernel "$DIR/vmlinuz" -initrd "$DIR/initrd.gz" \
    -append "console=ttyAMA0 panic=-1 quiet hz.share=$share hz.job=$job" \
    -drive "$drive" -device virtio-blk-device,drive=root \
    -fsdev "local,id=share,path=$share,security_model=none" \
    -device virtio-9p-device,fsdev=share,mount_tag=share \
    </dev/null
}

# Boot with JOB's lines as the guest's script; its status.
run_job() {
  local mode=$1 share=$2 job=$3
  rm -f "$job.status"
  boot "$mode" "$share" "$job" || echo "arm64-vm: qemu stopped: $?" >&2
  [ -s "$job.status" ] || die "the machine stopped before the job ended"
  return "$(cat "$job.status")"
}

image() {
  [ "$(cat "$DIR/ready" 2>/dev/null)" = "$GUEST_PACKAGES" ] && return 0
  [ -f "$DIR/ready" ] && rm -f "$DIR/ready" "$DIR/rootfs.img"
  mkdir -p "$DIR/debs"
  command -v qemu-system-aarch64 >/dev/null || die "qemu-system-arm missing"
  command -v debootstrap >/dev/null || die "debootstrap missing"
  # Each part is kept once built; the initramfs is quick to build again.
  [ -f "$DIR/vmlinuz" ] || build_kernel
  build_initrd
  [ -f "$DIR/rootfs.img" ] || build_rootfs
  local job=$DIR/first-boot
  echo 'exit 0' >"$job"
  echo "arm64-vm: first boot: debootstrap's second stage (several minutes)"
  run_job persist "$DIR" "$job" || die "the first boot failed"
  echo "$GUEST_PACKAGES" >"$DIR/ready"
}

run() {
  local share job
  build_initrd # quick: keeps it in step with arm64-init.sh
  share=$(realpath "$1")
  shift
  job=$(mktemp "$share/.arm64-job.XXXXXX")
  trap 'rm -f "$job" "$job.status"' RETURN
  printf '%q ' sh "$@" >"$job"
  echo >>"$job"
  run_job snapshot "$share" "$job"
}

[ $# -ge 2 ] || die "usage: arm64-vm.sh image DIR | run DIR SHARE SCRIPT [ARGS...]"
cmd=$1
DIR=$(realpath -m "$2")
shift 2
case $cmd in
image) image ;;
run)
  [ -f "$DIR/ready" ] || die "no machine in $DIR: arm64-vm.sh image $DIR"
  [ $# -ge 2 ] || die "run needs SHARE and SCRIPT"
  run "$@"
  ;;
*) die "unknown command $cmd" ;;
esac
