#!/usr/bin/env bash
# fetch_wheels.sh [RELEASE]: download the wheels of benchmarks/gpu/wheels.txt and wheels-RELEASE.txt (Python 3.12,
# manylinux x86_64, no dependencies resolved: the lists are complete) into .whl/gpu/, and SGLang RELEASE's own wheel
# into .whl/, for the GPU machine, which has no package index. RELEASE: 0.5.11 (default) or 0.5.23; .whl
# holds one release at a time (another's wheels are removed first). A package in wheels-RELEASE.txt replaces its line in
# wheels.txt; its "#slim PACKAGE PREFIX..." lines drop members of wheels too large to carry whole (slim_wheel.py). Run from anywhere, on a machine that reaches PyPI.
# .whl/ is git-ignored and is what a device call carries (carry: [".whl"]); everything carried, the working tree
# included, must stay under 64 MiB.
set -euo pipefail
release="${1:-0.5.11}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
dest="$root/.whl/gpu"
extra="$root/benchmarks/gpu/wheels-$release.txt"
[ -f "$extra" ] || { echo "fetch_wheels: no $extra (releases: 0.5.11, 0.5.23)" >&2; exit 2; }
if [ -f "$root/.whl/release" ] && [ "$(cat "$root/.whl/release")" != "$release" ]; then
    rm -rf "$dest" "$root"/.whl/sglang-*.whl
fi
mkdir -p "$dest"
echo "$release" > "$root/.whl/release"
plat=(--platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform any)
opts=(--no-deps --only-binary=:all: --python-version 3.12 --implementation cp "${plat[@]}")
pip="${PIP:-python3 -m pip}"

pins=$(mktemp)
trap 'rm -f "$pins"' EXIT
names() { grep -vE '^\s*(#|$)' "$@" | sed 's/==.*//' | tr 'A-Z-' 'a-z_'; }
grep -vE '^\s*(#|$)' "$root/benchmarks/gpu/wheels.txt" | grep -viwFf <(names "$extra") > "$pins" || true
grep -vE '^\s*(#|$)' "$extra" >> "$pins"
# shellcheck disable=SC2086
$pip download -q "${opts[@]}" -d "$dest" -r "$pins"
if ! ls "$root"/.whl/sglang-"$release"-*.whl >/dev/null 2>&1; then
    # shellcheck disable=SC2086
    $pip download -q "${opts[@]}" --platform manylinux_2_34_x86_64 -d "$root/.whl" "sglang==$release"
fi
{ grep -E '^#slim ' "$extra" || true; } | while read -r _ package prefixes; do  # (0.5.11 slims nothing)
    for wheel in "$dest/$package"-*.whl "$root/.whl/$package"-*.whl; do
        # shellcheck disable=SC2086
        if [ -f "$wheel" ]; then python3 "$root/benchmarks/gpu/slim_wheel.py" "$wheel" $prefixes; fi
    done
done

# exactly one wheel per listed package, nothing else (two versions of one package stop the install)
want=$(wc -l < "$pins")
have=$(find "$dest" -maxdepth 1 -name '*.whl' | wc -l)
if [ "$have" != "$want" ]; then
    echo "fetch_wheels: $have wheels in $dest for $want listed packages; remove stale ones and rerun" >&2
    exit 1
fi
echo "fetch_wheels: $have wheels in $dest ($(du -sh "$dest" | cut -f1)); .whl in all: $(du -sh "$root/.whl" | cut -f1)"
tree=$(cd "$root" && { git ls-files -z; git ls-files -z -o --exclude-standard; } | { xargs -0 du -cb 2>/dev/null || true; } | awk '/total$/ {s += $1} END {print s}')
carry=$(du -sb "$root/.whl" | cut -f1)
echo "fetch_wheels: working tree $((tree / 1048576)) MiB + .whl $((carry / 1048576)) MiB = $(((tree + carry) / 1048576)) MiB of the 64 MiB a device call may carry"
