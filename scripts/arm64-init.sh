#!/bin/busybox sh
# arm64-init: /init of the arm64 test machine's initramfs (arm64-vm.sh
# builds it). Loads the modules the image and the share need, mounts the
# root image at /newroot and the host's folder (hz.share= on the kernel's
# command line) at the same path inside it, finishes debootstrap's second
# stage if the image still has it to do, runs the job (hz.job=, a shell
# script in the share) chrooted into the image, writes its exit status to
# JOB.status and powers the machine off.
/bin/busybox --install -s /bin
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev

while read -r module; do
  insmod "/modules/$module" || echo "arm64-init: insmod $module failed"
done </modules/order

share=
job=
for arg in $(cat /proc/cmdline); do
  case $arg in
  hz.share=*) share=${arg#hz.share=} ;;
  hz.job=*) job=${arg#hz.job=} ;;
  esac
done

stop() {
  echo "arm64-init: $*"
  poweroff -f
}

# The disk may show up a moment after its driver loads.
for _ in 1 2 3 4 5 6 7 8 9 10; do
  [ -b /dev/vda ] && break
  sleep 1
done
mount -t ext4 /dev/vda /newroot || stop "cannot mount the root image"
mkdir -p "/newroot$share"
mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144 share \
  "/newroot$share" || stop "cannot mount the share $share"
mount -t proc proc /newroot/proc
mount -t sysfs sysfs /newroot/sys
mount -t devtmpfs devtmpfs /newroot/dev
mkdir -p /newroot/dev/pts /newroot/dev/shm
mount -t devpts devpts /newroot/dev/pts
mount -t tmpfs tmpfs /newroot/dev/shm
mount -t tmpfs tmpfs /newroot/tmp

if [ -x /newroot/debootstrap/debootstrap ]; then
  chroot /newroot /debootstrap/debootstrap --second-stage ||
    stop "debootstrap's second stage failed"
  chroot /newroot apt-get clean
fi

chroot /newroot /usr/bin/env -i HOME=/root TERM=dumb LANG=C.UTF-8 \
  PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  /bin/sh -c "cd '$share' && . '$job'"
echo $? >"/newroot$job.status"
sync
umount "/newroot$share"
# (debootstrap's second stage unmounts some of them itself)
umount /newroot/tmp /newroot/dev/shm /newroot/dev/pts /newroot/dev \
  /newroot/sys /newroot/proc 2>/dev/null
umount /newroot
poweroff -f
