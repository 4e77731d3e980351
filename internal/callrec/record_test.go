package callrec

import (
	"slices"
	"testing"
	"unsafe"

	"github.com/keelmesh/keel/internal/cache"
	"github.com/keelmesh/keel/internal/structured"
)

// TestZeroRecordHasNoParts: a record starts with no feature part, and its
// readers see the zero values of parts that are absent.
func TestZeroRecordHasNoParts(t *testing.T) {
	var r Record
	if r.Normalization != nil || r.Tier != nil || r.Cache != nil || r.Semantic != nil || r.Structured != nil || r.Fragments != nil || r.PII != nil {
		t.Fatalf("zero record has parts: %+v", r)
	}
	if r.CacheStatus() != "" || r.SemanticStatus() != "" || r.SchemaViolation() || r.Dropped() != nil || r.Structured.Source() != "" {
		t.Errorf("absent parts read as %q %q %v %v %q", r.CacheStatus(), r.SemanticStatus(), r.SchemaViolation(), r.Dropped(), r.Structured.Source())
	}
	if f := Part(r.Fragments); f.Count != 0 || f.Details != nil {
		t.Errorf("Part of an absent part: %+v", f)
	}
	r.Fragments = &Fragments{Count: 3, OK: 2}
	if f := Part(r.Fragments); f.Count != 3 || f.OK != 2 {
		t.Errorf("Part of a present part: %+v", f)
	}
}

// TestRecordSize: the record every call allocates keeps only the parts
// every call has (808 bytes on 64-bit before the split, 552 after).
func TestRecordSize(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) != 8 {
		t.Skip("sizes are for 64-bit platforms")
	}
	if n := unsafe.Sizeof(Record{}); n > 560 {
		t.Errorf("Record is %d bytes, want ≤ 560: a feature's fields belong in its pointer part", n)
	}
}

// TestDrop: dropped parameters are kept once each, in the order first
// dropped; the normalisation part is added only when something was.
func TestDrop(t *testing.T) {
	var r Record
	r.Drop(nil)
	if r.Normalization != nil {
		t.Fatalf("nothing dropped, part %+v", r.Normalization)
	}
	r.Drop([]string{"top_k", "seed"})
	r.Drop([]string{"seed", "temperature"})
	if want := []string{"top_k", "seed", "temperature"}; !slices.Equal(r.Dropped(), want) {
		t.Errorf("dropped %q, want %q", r.Dropped(), want)
	}
	n := r.Normalization
	if r.AddNormalization() != n {
		t.Error("AddNormalization replaced the existing part")
	}
}

// TestAddStructured: the structured part is added once; a part without a
// contract (a fused answer that broke JSON) has no source.
func TestAddStructured(t *testing.T) {
	var r Record
	r.AddStructured().Violation = true
	if !r.SchemaViolation() || r.Structured.Source() != "" {
		t.Errorf("violation %v, source %q", r.SchemaViolation(), r.Structured.Source())
	}
	r.AddStructured().Contract = &structured.Trace{Source: "given"}
	if !r.SchemaViolation() || r.Structured.Source() != "given" {
		t.Errorf("after the contract: violation %v, source %q", r.SchemaViolation(), r.Structured.Source())
	}
}

// TestCachePart: the exact cache's statuses are shared parts (no
// allocation per call); another status gets a part of its own.
func TestCachePart(t *testing.T) {
	for _, s := range []string{cache.Hit, cache.Miss, cache.Bypass} {
		p := CachePart(s)
		if p.Status != s || CachePart(s) != p {
			t.Errorf("%s: part %+v, shared %v", s, p, CachePart(s) == p)
		}
		if n := testing.AllocsPerRun(10, func() { CachePart(s) }); n != 0 {
			t.Errorf("%s: %v allocations", s, n)
		}
	}
	if p := CachePart("other"); p.Status != "other" || p == CachePart("other") {
		t.Errorf("unknown status: %+v", p)
	}
	var r Record
	r.Cache = CachePart(cache.Miss)
	if r.CacheStatus() != cache.Miss {
		t.Errorf("status %q", r.CacheStatus())
	}
}
