package main

import (
	"bytes"
	"encoding/json"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

func TestReadBuild(t *testing.T) {
	vcs := &debug.BuildInfo{
		GoVersion: "go1.26.8",
		Main:      debug.Module{Path: "github.com/keelmesh/keel", Version: "(devel)"},
		Settings: []debug.BuildSetting{
			{Key: "-trimpath", Value: "true"},
			{Key: "CGO_ENABLED", Value: "0"},
			{Key: "GOARCH", Value: "arm64"},
			{Key: "GOOS", Value: "linux"},
			{Key: "vcs", Value: "git"},
			{Key: "vcs.revision", Value: "6cb3057e0a1f"},
			{Key: "vcs.time", Value: "2026-12-07T06:40:00Z"},
			{Key: "vcs.modified", Value: "true"},
		},
	}
	// go install …@v1.2.0 with -buildvcs=false: no vcs.* settings.
	installed := &debug.BuildInfo{
		GoVersion: "go1.26.8",
		Main:      debug.Module{Path: "github.com/keelmesh/keel", Version: "v1.2.0"},
		Settings:  []debug.BuildSetting{{Key: "-buildvcs", Value: "false"}, {Key: "CGO_ENABLED", Value: "1"}},
	}
	here := runtime.GOOS + "/" + runtime.GOARCH
	for _, tc := range []struct {
		name                  string
		bi                    *debug.BuildInfo
		version, commit, date string
		want                  buildInfo
	}{
		{"checkout with vcs", vcs, "", "", "", buildInfo{Version: "(devel)", Commit: "6cb3057e0a1f", Modified: true, Date: "2026-12-07T06:40:00Z", GoVersion: "go1.26.8", Platform: "linux/arm64", Trimpath: true}},
		{"no vcs information", installed, "", "", "", buildInfo{Version: "v1.2.0", GoVersion: "go1.26.8", Platform: here, CGO: true}},
		{"ldflags override", installed, "v1.2.1", "abcdef", "2026-12-01T00:00:00Z", buildInfo{Version: "v1.2.1", Commit: "abcdef", Date: "2026-12-01T00:00:00Z", GoVersion: "go1.26.8", Platform: here, CGO: true}},
		{"override clears modified", vcs, "", "feedbeef", "", buildInfo{Version: "(devel)", Commit: "feedbeef", Date: "2026-12-07T06:40:00Z", GoVersion: "go1.26.8", Platform: "linux/arm64", Trimpath: true}},
		{"no build information", nil, "", "", "", buildInfo{Version: "(unknown)", GoVersion: runtime.Version(), Platform: here}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := readBuild(tc.bi, tc.version, tc.commit, tc.date); got != tc.want {
				t.Errorf("(-got +want)\n-%+v\n+%+v", got, tc.want)
			}
		})
	}
}

func TestVersionText(t *testing.T) {
	for _, tc := range []struct {
		name string
		b    buildInfo
		want string
	}{
		{"release", buildInfo{Version: "v1.2.0", Commit: "6cb3057", Date: "2026-12-07T06:40:00Z", GoVersion: "go1.26.8", Platform: "linux/amd64", Trimpath: true},
			"keel v1.2.0\ncommit:    6cb3057\ndate:      2026-12-07T06:40:00Z\ngo:        go1.26.8 linux/amd64\ntrimpath:  true\ncgo:       false\n"},
		{"no vcs", buildInfo{Version: "(devel)", GoVersion: "go1.26.8", Platform: "linux/amd64"},
			"keel (devel)\ncommit:    unknown (built without VCS information: -buildvcs=false, a source archive or go install)\ndate:      unknown\ngo:        go1.26.8 linux/amd64\ntrimpath:  false\ncgo:       false\n"},
		{"modified", buildInfo{Version: "(devel)", Commit: "6cb3057", Modified: true, Date: "d", GoVersion: "g", Platform: "p"},
			"keel (devel)\ncommit:    6cb3057 (with uncommitted changes)\ndate:      d\ngo:        g p\ntrimpath:  false\ncgo:       false\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := tc.b.writeText(&b); err != nil {
				t.Fatal(err)
			}
			if b.String() != tc.want {
				t.Errorf("(-got +want)\n-%s\n+%s", b.String(), tc.want)
			}
		})
	}
}

// TestVersionCommand runs `keel version --json` in this test binary, whose
// build information the toolchain recorded as it does for keel's.
func TestVersionCommand(t *testing.T) {
	root := rootCmd()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetArgs([]string{"version", "--json"})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	var got buildInfo
	dec := json.NewDecoder(&out)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&got); err != nil {
		t.Fatalf("version --json: %v", err)
	}
	if got.GoVersion != runtime.Version() || got.Platform != runtime.GOOS+"/"+runtime.GOARCH || got.Version == "" {
		t.Errorf("version --json = %+v; want go %s on %s/%s", got, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	}

	root = rootCmd()
	out.Reset()
	root.SetOut(&out)
	root.SetArgs([]string{"version"})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out.String(), "keel ") || !strings.Contains(out.String(), "\ngo:        "+runtime.Version()) {
		t.Errorf("version:\n%s", out.String())
	}
}
