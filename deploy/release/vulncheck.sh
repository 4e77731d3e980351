#!/usr/bin/env bash
# govulncheck without the internet (issue 29). The Go vulnerability database
# is published as the Go module golang.org/x/vulndb, whose data/osv/ holds
# every report as OSV JSON; its command cmd/indexdb writes the database
# layout govulncheck reads (index/db.json, index/modules.json,
# index/vulns.json, ID/GO-….json). Both come through the Go module proxy,
# pinned below, so the scan is reproducible and needs nothing else.
# govulncheck then reports the vulnerabilities whose vulnerable functions
# Keel's code can reach (exit 3), in the modules go.mod requires and in the
# standard library of the release toolchain (go.mod's toolchain line: a scan
# with an older installed Go reports that Go's fixed vulnerabilities).
#
#   deploy/release/vulncheck.sh [govulncheck args]   # default ./...
#
# VULNDB_VERSION: the vulndb snapshot (newer: go list -m golang.org/x/vulndb@latest).
set -euo pipefail
cd "$(dirname "$0")/../.."
# The release toolchain: go.mod's toolchain line (the Go release with every
# fix the vulnerability database knows of), fetched through the module proxy
# when it is not the one installed; the tests run with the installed one.
GOTOOLCHAIN="$(go mod edit -json | sed -n 's/^[[:space:]]*"Toolchain": "\(.*\)",*$/\1/p')"
export GOTOOLCHAIN="${GOTOOLCHAIN:-local}"
echo "release toolchain: $(go env GOVERSION)"
VULNDB_VERSION="${VULNDB_VERSION:-v0.0.0-20261105234957-e22db6528018}"
GOVULNCHECK_VERSION=v1.9.0
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

src="$(go mod download -json "golang.org/x/vulndb@$VULNDB_VERSION" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
if [ ! -d "$src/data/osv" ]; then
  echo "FAIL: golang.org/x/vulndb@$VULNDB_VERSION has no data/osv" >&2
  exit 1
fi
go run "golang.org/x/vulndb/cmd/indexdb@$VULNDB_VERSION" -vulns "$src/data/osv" -out "$work/db"
echo "vulndb $VULNDB_VERSION: $(ls "$work/db/ID" | grep -c "\.json$") reports, newest $(ls "$src/data/osv" | sort -V | tail -1 | sed 's/\.json$//')"
go run "golang.org/x/vuln/cmd/govulncheck@$GOVULNCHECK_VERSION" -db "file://$work/db" "${@:-./...}"
