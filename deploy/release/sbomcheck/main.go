// Command sbomcheck checks a CycloneDX JSON SBOM of Keel's module graph
// (deploy/release/sbom.sh writes it): that it is CycloneDX JSON naming the
// keel module, and that each module given as path@version (the direct
// requirements of go.mod) is one of its components with that version and a
// pkg:golang purl.
//
//	go run ./deploy/release/sbomcheck keel.cdx.json github.com/goccy/go-yaml@v1.19.2 ...
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
)

// bom holds the parts of a CycloneDX document checked here
// (https://cyclonedx.org/docs/1.5/json/).
type bom struct {
	BOMFormat   string `json:"bomFormat"`
	SpecVersion string `json:"specVersion"`
	Metadata    struct {
		Component component `json:"component"`
	} `json:"metadata"`
	Components []component `json:"components"`
}

type component struct {
	Type    string `json:"type"`
	Name    string `json:"name"`
	Version string `json:"version"`
	PURL    string `json:"purl"`
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: sbomcheck SBOM.json [module@version ...]")
		os.Exit(2)
	}
	data, err := os.ReadFile(os.Args[1])
	if err == nil {
		var n int
		n, err = check(data, "github.com/keelmesh/keel", os.Args[2:])
		if err == nil {
			fmt.Printf("ok   %s: CycloneDX, %d components, all %d direct requirements present\n", os.Args[1], n, len(os.Args)-2)
			return
		}
	}
	fmt.Fprintln(os.Stderr, "sbomcheck:", err)
	os.Exit(1)
}

// purlOf reports whether purl is the package URL of module path@version,
// with or without qualifiers (cyclonedx-gomod adds ?goarch=…&goos=…&type=module).
func purlOf(purl, path, version string) bool {
	rest, ok := strings.CutPrefix(purl, "pkg:golang/"+path+"@"+version)
	return ok && (rest == "" || strings.HasPrefix(rest, "?"))
}

// check returns the number of components, or every problem found.
func check(data []byte, main string, required []string) (int, error) {
	var b bom
	if err := json.Unmarshal(data, &b); err != nil {
		return 0, fmt.Errorf("not JSON: %w", err)
	}
	var errs []error
	if b.BOMFormat != "CycloneDX" || b.SpecVersion == "" {
		errs = append(errs, fmt.Errorf("bomFormat %q specVersion %q: not a CycloneDX document", b.BOMFormat, b.SpecVersion))
	}
	if b.Metadata.Component.Name != main {
		errs = append(errs, fmt.Errorf("metadata.component.name %q, want %s", b.Metadata.Component.Name, main))
	}
	have := map[string]component{}
	for _, c := range b.Components {
		have[c.Name] = c
	}
	for _, r := range required {
		path, version, ok := strings.Cut(r, "@")
		if !ok {
			return 0, fmt.Errorf("%q: want module@version", r)
		}
		c, found := have[path]
		switch {
		case !found:
			errs = append(errs, fmt.Errorf("direct requirement %s is not a component", path))
		case c.Version != version:
			errs = append(errs, fmt.Errorf("%s: component version %s, go.mod requires %s", path, c.Version, version))
		case !purlOf(c.PURL, path, version):
			errs = append(errs, fmt.Errorf("%s: purl %q", path, c.PURL))
		}
	}
	return len(b.Components), errors.Join(errs...)
}
