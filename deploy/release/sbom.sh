#!/usr/bin/env bash
# A CycloneDX SBOM of Keel's module graph (issue 29), made by
# cyclonedx-gomod (pinned, through the Go module proxy) from go.mod and the
# module cache: every module with its version, SHA-256 hash, package URL and
# detected licence, the test-only ones (chromedp, goleak) included and marked
# by scope, and the standard library of the release toolchain. Then checks
# it (deploy/release/sbomcheck): CycloneDX JSON naming the keel module, with
# every direct requirement of go.mod at its required version.
#
#   deploy/release/sbom.sh [OUT]    # default: keel.cdx.json in a temporary directory, removed after
set -euo pipefail
cd "$(dirname "$0")/../.."
GOTOOLCHAIN="$(go mod edit -json | sed -n 's/^[[:space:]]*"Toolchain": "\(.*\)",*$/\1/p')"
export GOTOOLCHAIN="${GOTOOLCHAIN:-local}"
CYCLONEDX_GOMOD_VERSION=v1.10.0
out="${1:-}"
if [ -z "$out" ]; then
  tmp="$(mktemp -d)"
  trap 'rm -rf "$tmp"' EXIT
  out="$tmp/keel.cdx.json"
fi
go run "github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod@$CYCLONEDX_GOMOD_VERSION" \
  mod -json -test -std -licenses -output "$out" . 2> >(grep -v 'no licenses detected\|failed to determine version of main module' >&2)
direct="$(go list -m -f '{{if not .Indirect}}{{if not .Main}}{{.Path}}@{{.Version}}{{end}}{{end}}' all)"
# shellcheck disable=SC2086 # one argument per requirement
go run ./deploy/release/sbomcheck "$out" $direct
