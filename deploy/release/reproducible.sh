#!/usr/bin/env bash
# Reproducible build check (issue 29): builds cmd/keel twice with the
# release flags (the Dockerfile's: static, -trimpath, -ldflags '-s -w', plus
# the commit and its date stamped with -X for `keel version`) from two copies
# of the source in different directories, with two different build caches
# (the second empty, so nothing is reused) and different output paths, and
# requires the two binaries to be byte-identical. Then checks what
# `keel version` reports of the binary.
#
#   deploy/release/reproducible.sh            # from anywhere in the repository
#
# Prints the binary's SHA-256 and size. Exits 1 when the builds differ.
set -euo pipefail
cd "$(dirname "$0")/../.."
# The release toolchain: go.mod's toolchain line (the Go release with every
# fix the vulnerability database knows of), fetched through the module proxy
# when it is not the one installed; the tests run with the installed one.
GOTOOLCHAIN="$(go mod edit -json | sed -n 's/^[[:space:]]*"Toolchain": "\(.*\)",*$/\1/p')"
export GOTOOLCHAIN="${GOTOOLCHAIN:-local}"
echo "release toolchain: $(go env GOVERSION)"
work="$(mktemp -d)"
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT

commit="$(git rev-parse HEAD)"
date="$(git log -1 --format=%cI HEAD)"
# The same flags for both builds; -buildvcs=false because the copies are not
# checkouts (the commit comes in through -X instead).
export CGO_ENABLED=0
flags=(-trimpath -buildvcs=false -ldflags "-s -w -X main.commit=$commit -X main.date=$date")

copy() { # dest: the tracked files of the working tree
  mkdir -p "$1"
  git ls-files -z --cached --others --exclude-standard | grep -zv '^deploy/helm/chartest/' |
    tar --null -T - -cf - | tar -xf - -C "$1"
}
copy "$work/a/src"
copy "$work/elsewhere/b/src"

build() { # srcdir gocache out
  (cd "$1" && GOCACHE="$2" go build "${flags[@]}" -o "$3" ./cmd/keel)
}
start=$SECONDS
build "$work/a/src" "$(go env GOCACHE)" "$work/a/keel"
first=$((SECONDS - start))
start=$SECONDS
build "$work/elsewhere/b/src" "$work/elsewhere/gocache" "$work/elsewhere/out/keel"
second=$((SECONDS - start))

if ! cmp "$work/a/keel" "$work/elsewhere/out/keel"; then
  echo "FAIL: two builds of $commit differ" >&2
  exit 1
fi
sum="$(sha256sum "$work/a/keel" | cut -d' ' -f1)"
echo "ok   two builds byte-identical: sha256 $sum, $(stat -c %s "$work/a/keel") bytes (builds ${first}s and ${second}s, the second with an empty cache)"

# keel version reports the stamped commit and date and the -trimpath build.
out="$("$work/a/keel" version)"
echo "$out"
for want in "commit:    $commit" "date:      $date" "trimpath:  true" "cgo:       false" "go:        $(go env GOVERSION)"; do
  if ! grep -qF -- "$want" <<<"$out"; then
    echo "FAIL: keel version does not say \"$want\"" >&2
    exit 1
  fi
done
# No path of the build machine is inside the binary.
if grep -qaF -- "$work" "$work/a/keel"; then
  echo "FAIL: the binary contains the build directory $work" >&2
  exit 1
fi
echo "ok   keel version reports the commit, its date, the toolchain and -trimpath"
