package config

import (
	"os"
	"testing"
)

// BenchmarkParse is Parse on the full example configuration, the largest
// seed of FuzzParse: its cost per execution bounds how much the fuzzer can
// try in CI's few seconds.
func BenchmarkParse(b *testing.B) {
	data, err := os.ReadFile("testdata/full.yaml")
	if err != nil {
		b.Fatal(err)
	}
	b.Setenv("VLLM_API_KEY", "k") // the one variable full.yaml requires
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(data, "full.yaml"); err != nil {
			b.Fatal(err)
		}
	}
}
