package main

import (
	"encoding/json"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// Release builds may set these with -ldflags "-X main.version=v1.2.3
// -X main.commit=<sha> -X main.date=<RFC 3339>"; each one set overrides what
// the Go toolchain recorded in the binary (runtime/debug.ReadBuildInfo).
// Builds with -buildvcs=false (CI's GOFLAGS), from a source archive or
// through `go install module@version` record no commit, and the date is the
// commit's, never the time of the build, so that two builds of one commit
// are identical.
var (
	version string
	commit  string
	date    string
)

// buildInfo is what `keel version` reports.
type buildInfo struct {
	// Version is the module version: "v1.2.3" from `go install
	// github.com/keelmesh/keel/cmd/keel@v1.2.3`, "(devel)" from a checkout.
	Version string `json:"version"`
	// Commit is the VCS revision, "" when none was recorded.
	Commit string `json:"commit"`
	// Modified reports uncommitted changes in the checkout built.
	Modified bool `json:"modified"`
	// Date is the commit's time (RFC 3339), "" when none was recorded.
	Date string `json:"date"`
	// GoVersion is the toolchain that built the binary.
	GoVersion string `json:"go_version"`
	// Platform is GOOS/GOARCH.
	Platform string `json:"platform"`
	// Trimpath reports a -trimpath build (no local file paths inside).
	Trimpath bool `json:"trimpath"`
	// CGO reports CGO_ENABLED=1 (the release image is built with 0).
	CGO bool `json:"cgo"`
}

// readBuild reads what the toolchain recorded (bi; nil when the binary has
// none) and applies the -X overrides.
func readBuild(bi *debug.BuildInfo, version, commit, date string) buildInfo {
	b := buildInfo{GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if bi != nil {
		b.Version = bi.Main.Version
		b.GoVersion = bi.GoVersion
		var goos, goarch string
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				b.Commit = s.Value
			case "vcs.time":
				b.Date = s.Value
			case "vcs.modified":
				b.Modified = s.Value == "true"
			case "-trimpath":
				b.Trimpath = s.Value == "true"
			case "CGO_ENABLED":
				b.CGO = s.Value == "1"
			case "GOOS":
				goos = s.Value
			case "GOARCH":
				goarch = s.Value
			}
		}
		if goos != "" && goarch != "" {
			b.Platform = goos + "/" + goarch
		}
	}
	if version != "" {
		b.Version = version
	}
	if commit != "" {
		b.Commit, b.Modified = commit, false
	}
	if date != "" {
		b.Date = date
	}
	if b.Version == "" {
		b.Version = "(unknown)"
	}
	return b
}

// writeText prints b for people; "unknown" says what was not recorded.
func (b buildInfo) writeText(w io.Writer) error {
	commit := b.Commit
	switch {
	case commit == "":
		commit = "unknown (built without VCS information: -buildvcs=false, a source archive or go install)"
	case b.Modified:
		commit += " (with uncommitted changes)"
	}
	date := b.Date
	if date == "" {
		date = "unknown"
	}
	_, err := fmt.Fprintf(w, "keel %s\ncommit:    %s\ndate:      %s\ngo:        %s %s\ntrimpath:  %t\ncgo:       %t\n",
		b.Version, commit, date, b.GoVersion, b.Platform, b.Trimpath, b.CGO)
	return err
}

func versionCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the version, commit, date and toolchain this binary was built from",
		Long: `Print what this binary was built from: the module version, the VCS commit
and its time (or the values a release build set with -ldflags -X
main.version=, main.commit=, main.date=), the Go toolchain and platform,
and whether it was built with -trimpath and cgo. "go version -m keel"
shows the same build information and every module compiled in.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			bi, ok := debug.ReadBuildInfo()
			if !ok {
				bi = nil
			}
			b := readBuild(bi, version, commit, date)
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(b)
			}
			return b.writeText(cmd.OutOrStdout())
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}
