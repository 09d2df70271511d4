#!/bin/sh
# Verifies and scores every unit in this directory without installing:
# binaries come from BIN_DIR (build them first; by default the directory
# cargo puts debug binaries in, wherever CARGO_TARGET_DIR or the workspace
# config sends it), user units see a scratch $HOME whose .cargo/bin links
# to them (where the units expect `cargo install` to have put them), and
# system units are checked on a copy whose ExecStart= points at BIN_DIR.
#   sh systemd/check.sh [BIN_DIR]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
if [ $# -ge 1 ]; then
    bin=$(cd "$1" && pwd)
else
    # Ask cargo where its target directory is rather than assume target/.
    target_dir=$(cd "$here/.." && cargo metadata --format-version 1 --no-deps |
        sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')
    bin=$(cd "${target_dir:?cannot find the cargo target directory}/debug" && pwd)
fi
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
mkdir -p -m 0700 "$scratch/home/.cargo/bin" "$scratch/run" "$scratch/sys"
for b in "$bin"/mosaic-*; do
    if [ -x "$b" ] && [ -f "$b" ]; then
        ln -s "$b" "$scratch/home/.cargo/bin/"
    fi
done
export HOME="$scratch/home" XDG_RUNTIME_DIR="$scratch/run"
status=0
for unit in "$here"/*.service "$here"/*.socket; do
    [ -e "$unit" ] || continue
    name=$(basename "$unit")
    if grep -q '^User=' "$unit"; then
        # A system unit (runs as User=): check it in system mode.
        sed "s#/usr/local/bin/#$bin/#g" "$unit" > "$scratch/sys/$name"
        target="$scratch/sys/$name"; mode=""
    else
        target="$unit"; mode="--user"
    fi
    if systemd-analyze $mode verify "$target"; then
        echo "verify $name: ok"
    else
        echo "verify $name: FAILED"; status=1
    fi
    systemd-analyze $mode security --offline=yes "$target" | tail -n 1
done
exit $status
