package structured

import (
	"container/list"
	"fmt"
	"reflect"
	"sync"
	"testing"
)

func newReadings() *readings {
	return &readings{lru: list.New(), byKey: map[[32]byte]*list.Element{}}
}

// A prompt is read once, whatever the number of calls that carry it, and
// the kept reading is the readers' own: keys, a keyless demand, nothing.
func TestReadingsKeptPerPrompt(t *testing.T) {
	r := newReadings()
	for _, sys := range []string{
		"Answer in JSON with the keys `title`, `summary` and `tags`.",
		"仅输出 JSON，包含两个字段：question 和 answer。",
		"Respond only in JSON.",
		"You are a friendly assistant. Be brief.",
	} {
		want, wantOK := ExtractConstraints(sys)
		if !wantOK {
			want, wantOK = ExtractJSONDemand(sys)
		}
		before := r.misses
		for i := range 3 {
			imp, ok := r.read(sys)
			if ok != wantOK || !reflect.DeepEqual(imp, want) {
				t.Fatalf("%q, read %d: %+v %v; the readers give %+v %v", sys, i, imp, ok, want, wantOK)
			}
		}
		if got := r.misses - before; got != 1 {
			t.Errorf("%q read %d times for 3 calls, want once", sys, got)
		}
	}
}

// The cache holds at most maxReadings prompts, dropping the least recently
// used: a prompt in use stays.
func TestReadingsBounded(t *testing.T) {
	r := newReadings()
	hot := "Reply with JSON holding `verdict` and `reason`."
	r.read(hot)
	for i := range 2 * maxReadings {
		r.read(fmt.Sprintf("Prompt %d: answer in JSON with the keys `a%d` and `b`.", i, i))
		if i%100 == 0 {
			r.read(hot)
		}
	}
	if n := r.lru.Len(); n != maxReadings || len(r.byKey) != maxReadings {
		t.Fatalf("%d entries (%d keys), want %d", n, len(r.byKey), maxReadings)
	}
	misses := r.misses
	r.read(hot)
	if r.misses != misses {
		t.Error("the prompt in use was dropped")
	}
	r.read("Prompt 0: answer in JSON with the keys `a0` and `b`.")
	if r.misses != misses+1 {
		t.Error("the least recently used prompt was kept")
	}
}

// Calls with one prompt at once share one cache safely (run with -race).
func TestReadingsConcurrent(t *testing.T) {
	r := newReadings()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 50 {
				imp, ok := r.read(fmt.Sprintf("Return JSON with `k%d` and `v`.", (g+i)%10))
				if !ok || len(imp.Required) == 0 {
					t.Errorf("no reading: %+v %v", imp, ok)
					return
				}
			}
		})
	}
	wg.Wait()
	if r.misses < 10 || r.misses > 10*8 {
		t.Errorf("%d readings for 10 prompts", r.misses)
	}
}

// BenchmarkReadingsHit is the per-call cost of reading a repeated
// JSON-heavy system prompt (the reading kept), beside
// BenchmarkExtractConstraints* (a prompt read afresh).
func BenchmarkReadingsHit(b *testing.B) {
	r := newReadings()
	sys := "You are an invoice parser. Return a JSON object with the fields invoice_number, date, vendor, total (a number) and currency. No prose."
	r.read(sys)
	b.ReportAllocs()
	for b.Loop() {
		r.read(sys)
	}
}
