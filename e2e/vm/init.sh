#!/bin/busybox sh
# PID 1 of an e2e test VM (e2e/vm/vm.ts builds the initramfs around it). The machine's own root,
# shared read-only over 9p, is the VM's root under a tmpfs overlay, so every write stays in the
# VM; Debian's modules are found by the kernel's own modprobe calls. It runs one test file and
# writes its TAP to the second serial port, then powers off.
# Arguments (the kernel's command line after --): the repository root, the test file, TAP_TIMEOUT
# in seconds, and "true" under CI or "-".
set -u
repo=$1 file=$2 tap_timeout=$3 ci=$4
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
exec > /dev/console 2>&1
# fd 3 is the TAP stream to the host, kept open across the moves of /dev below.
stty -F /dev/ttyS1 raw -echo
exec 3> /dev/ttyS1
# qemu's isa-debug-exit device: a byte written to port 0xf4 ends qemu with a status not 0, which
# fails the host's subtest however much TAP came before.
exit_failed() {
  exec 3>&-
  port=/dev/port
  [ -e "$port" ] || port=/root/dev/port
  printf '\001' | dd of="$port" bs=1 seek=244 count=1 2>/dev/null
  poweroff -f
}
fail() {
  echo "# the test VM could not start: $*" >&3
  exit_failed
}
# Where the VM got to, on the console (which the host shows when the file fails): a VM that hangs
# before its test prints any TAP says at which step.
stage() {
  # /proc moves under /root once the root is mounted.
  up=$(cat /proc/uptime /root/proc/uptime 2>/dev/null | head -n 1)
  echo "podnet-vm: $* (${up%% *} s after boot)"
}
stage "init started"
for module in /modules/*.ko; do insmod "$module" || fail "insmod $module"; done
mkdir -p /host /upper /root
mount -t 9p -o trans=virtio,version=9p2000.L,ro,cache=loose,msize=512000 host /host || fail "mount the host's root over 9p"
mount -t tmpfs -o size=1g upper /upper || fail "mount the overlay's tmpfs"
mkdir -p /upper/data /upper/work
mount -t overlay -o lowerdir=/host,upperdir=/upper/data,workdir=/upper/work root /root || fail "mount the overlay"
stage "the machine's root mounted over 9p"
# The kernel runs /bin/modprobe of this initramfs to load a module (a link kind, nftables); both
# it and the tests' root see the package's modules under the running release.
release=$(uname -r)
modules=$(cat /modules.path)
mkdir -p "/lib/modules/$release" "/root/lib/modules/$release"
mount --bind "/host$modules" "/lib/modules/$release" || fail "bind the modules"
mount --bind "/host$modules" "/root/lib/modules/$release" || fail "bind the modules into the root"
echo /bin/modprobe > /proc/sys/kernel/modprobe
for d in proc sys dev; do mount --move "/$d" "/root/$d"; done
mount -t tmpfs tmp /root/tmp
mount -t tmpfs run /root/run
mkdir -p /root/dev/pts /root/dev/shm
mount -t devpts devpts /root/dev/pts
mount -t tmpfs shm /root/dev/shm
chroot /root ip link set lo up || fail "set lo up"
env="PATH=$repo/node_modules/.bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# The test's stderr goes to the console, which the host keeps in a file beside the VM.
stage "starting $file"
chroot /root /usr/bin/env -i -C "$repo" "$env" HOME=/root "TAP_TIMEOUT=$tap_timeout" "CI=${ci#-}" node "$file" >&3
status=$?
stage "$file exited with status $status"
if [ "$status" -ne 0 ]; then
  echo "# $file exited with status $status in the test VM" >&3
  exit_failed
fi
# Closing the port waits until what the test wrote has left it: the plan is in its last lines.
exec 3>&-
poweroff -f
