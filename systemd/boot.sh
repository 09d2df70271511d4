#!/bin/sh
# Boots a real systemd as PID 1 of new PID, mount, cgroup, UTS, IPC and
# network namespaces, on a private root, with this directory's user units
# installed for root and nothing else started: the stage for
# tests/tests/systemd_boot.rs (docs/operations.md, "The units under a real
# systemd"). Needs root. Runs in the foreground until that systemd exits
# (`systemctl poweroff` inside, or SIGKILL to its PID 1 from outside).
#
#   sh systemd/boot.sh SCRATCH BIN_DIR
#
# SCRATCH: an empty directory; a tmpfs is mounted on it (in the new mount
#   namespace only) holding the overlay's upper layer, so nothing the booted
#   system writes reaches the real filesystem.
# BIN_DIR: the built binaries, bind-mounted read-only at /opt/mosaic-bin.
#
# The private root is an overlay over / (its lower layer is the root
# filesystem alone, without /proc, /sys, /dev, /run or /tmp submounts): the
# booted systemd's tmpfiles and units see and change only the overlay. Its
# default unit is mosaic-boot.target, which pulls in nothing, so none of the
# image's services start. Its cgroups live under a cgroup made for this boot
# (the cgroup namespace's root), removed when that systemd has exited; the
# path is printed on the first line, `cgroup: PATH`.
set -eu

if [ "${1:-}" != "--inner" ]; then
    scratch=$(cd "$1" && pwd)
    bin=$(cd "$2" && pwd)
    here=$(cd "$(dirname "$0")" && pwd)
    # A cgroup of its own in the unified hierarchy, entered before the
    # cgroup namespace is made, so the booted systemd's cgroups go under it.
    v2=$(findmnt -n -t cgroup2 -o TARGET | head -n 1)
    [ -n "$v2" ] || { echo "no cgroup2 hierarchy mounted" >&2; exit 1; }
    own=$(sed -n 's/^0:://p' /proc/self/cgroup)
    cg="$v2${own%/}/mosaic-boot-$$"
    mkdir "$cg"
    echo "cgroup: $cg"
    echo $$ > "$cg/cgroup.procs"
    status=0
    unshare --pid --fork --mount --mount-proc --cgroup --uts --ipc --net \
        sh "$here/boot.sh" --inner "$scratch" "$bin" "$here" || status=$?
    # Everything in the namespaces is gone with its PID 1: leave the cgroup
    # and remove what the booted systemd left in it, deepest first.
    echo $$ > "$v2${own%/}/cgroup.procs"
    find "$cg" -depth -type d -exec rmdir {} + || status=1
    exit $status
fi

scratch=$2 bin=$3 units=$4
mount --make-rprivate /
mount -t tmpfs -o mode=0700 mosaic-boot "$scratch"
mkdir "$scratch/upper" "$scratch/work" "$scratch/root"
mount -t overlay mosaic-boot -o "lowerdir=/,upperdir=$scratch/upper,workdir=$scratch/work" \
    "$scratch/root"
r=$scratch/root

mkdir -p "$r/opt/mosaic-bin"
mount --bind "$bin" "$r/opt/mosaic-bin"
mount -o remount,bind,ro "$r/opt/mosaic-bin"

# The default unit: nothing but itself.
cat > "$r/etc/systemd/system/mosaic-boot.target" <<'EOF'
[Unit]
Description=Mosaic units under test (nothing else)
DefaultDependencies=no
EOF

# Root's user units and binaries, where the units expect `cargo install`
# to have put them; the data root the user unit leaves writable.
mkdir -p "$r/root/.config/systemd/user" "$r/root/.cargo/bin"
for u in "$units"/*.service; do
    grep -q '^User=' "$u" || cp "$u" "$r/root/.config/systemd/user/"
done
for b in mosaic-bus mosaic-proofd mosaic-leased mosaic-human-cli mosaic-tester-cli; do
    ln -sf "/opt/mosaic-bin/$b" "$r/root/.cargo/bin/$b"
done
mkdir -p -m 0700 "$r/root/.local/share/mosaic"

# sysfs and a cgroup2 mount of this namespace's root before systemd starts,
# so it runs the unified hierarchy under the cgroup made above and touches
# no v1 hierarchy.
mount -t proc proc "$r/proc"
mount -t sysfs sysfs "$r/sys"
mount -t cgroup2 cgroup2 "$r/sys/fs/cgroup"

mkdir -p "$r/oldroot"
cd "$r"
pivot_root . oldroot
umount -l /oldroot
rmdir /oldroot
exec env -i container=mosaic-boot PATH=/usr/sbin:/usr/bin:/sbin:/bin \
    /lib/systemd/systemd --unit=mosaic-boot.target --log-target=console --show-status=no
