package sqlite

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/keelmesh/keel/internal/callrec"
	"github.com/keelmesh/keel/internal/llm"
)

// BenchmarkObserve is the hot-path cost of the request log: RequestDone on
// the request's goroutine. "enqueue" holds the writer so that every call
// takes the enqueue path (the queue is sized to b.N); "live" runs the writer
// against a real file, so calls beyond its pace take the drop path.
func BenchmarkObserve(b *testing.B) {
	rec := hedged()
	b.Run("enqueue", func(b *testing.B) {
		gate := make(chan struct{})
		l, err := open(Config{Path: filepath.Join(b.TempDir(), "r.db"), QueueSize: b.N + 1}, hooks{gate: gate, discard: true})
		if err != nil {
			b.Fatal(err)
		}
		defer l.Close()
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			l.RequestDone(rec)
		}
		b.StopTimer()
		if l.Dropped() != 0 {
			b.Fatalf("dropped %d", l.Dropped())
		}
	})
	b.Run("live-parallel", func(b *testing.B) {
		l, err := Open(Config{Path: filepath.Join(b.TempDir(), "r.db")})
		if err != nil {
			b.Fatal(err)
		}
		defer l.Close()
		b.ReportAllocs()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				l.RequestDone(rec)
			}
		})
		b.StopTimer()
		b.ReportMetric(float64(l.Dropped())/float64(b.N), "dropped/op")
	})
}

// BenchmarkSustained5k offers 5,000 Records per second for 2 s to a real
// database file, timing every RequestDone, then waits for the writer. It
// reports the hot-path p50/p99, the rows written per second of wall time
// (requests + attempts; the run is paced, so this is the offered rate when
// the writer keeps up) and drops. Run with -benchtime=1x.
func BenchmarkSustained5k(b *testing.B) {
	const rate, run = 5000, 2 * time.Second
	rec := hedged()
	for range b.N {
		l, err := Open(Config{Path: filepath.Join(b.TempDir(), "r.db")})
		if err != nil {
			b.Fatal(err)
		}
		total := int(rate * run.Seconds())
		lat := make([]time.Duration, 0, total)
		start := time.Now()
		for sent := 0; sent < total; {
			due := min(total, int(time.Since(start).Seconds()*rate)+1)
			for ; sent < due; sent++ {
				t := time.Now()
				l.RequestDone(rec)
				lat = append(lat, time.Since(t))
			}
			time.Sleep(time.Millisecond)
		}
		if err := l.Flush(context.Background()); err != nil {
			b.Fatal(err)
		}
		wall := time.Since(start)
		if err := l.Close(); err != nil {
			b.Fatal(err)
		}
		slices.Sort(lat)
		rows := float64(l.Written()) * float64(1+len(rec.Attempts))
		b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds()), "p50-ns")
		b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds()), "p99-ns")
		b.ReportMetric(float64(l.Written())/wall.Seconds(), "req/s")
		b.ReportMetric(rows/wall.Seconds(), "rows/s")
		b.ReportMetric(float64(l.Dropped()), "dropped")
	}
}

// BenchmarkWriterCapacity is the writer's unpaced throughput: 50,000 Records
// queued while it is held, then released and timed until all are written.
func BenchmarkWriterCapacity(b *testing.B) {
	const n = 50000
	rec := hedged()
	for range b.N {
		gate := make(chan struct{})
		l, err := open(Config{Path: filepath.Join(b.TempDir(), "r.db"), QueueSize: n}, hooks{gate: gate})
		if err != nil {
			b.Fatal(err)
		}
		for range n {
			l.RequestDone(rec)
		}
		start := time.Now()
		close(gate)
		if err := l.Flush(context.Background()); err != nil {
			b.Fatal(err)
		}
		d := time.Since(start)
		l.Close()
		b.ReportMetric(n/d.Seconds(), "req/s")
		b.ReportMetric(n*float64(1+len(rec.Attempts))/d.Seconds(), "rows/s")
	}
}

// BenchmarkWrite is the writer's CPU per Record: b.N Records written in
// batches of DefaultBatchSize to a real file through write, the code path of
// the writer goroutine (held here, so that it competes for nothing). Each
// Record is the hedged call: one requests row and three attempts rows.
// cpu-ns/op is the process's CPU time per Record (wall time also counts the
// waits for checkpoint fsyncs, and the machine may be shared).
func BenchmarkWrite(b *testing.B) {
	rec := hedged()
	gate := make(chan struct{})
	l, err := open(Config{Path: filepath.Join(b.TempDir(), "r.db")}, hooks{gate: gate})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	batch := make([]*callrec.Record, DefaultBatchSize)
	for i := range batch {
		batch[i] = rec
	}
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	cpu := cpuTime()
	for n := b.N; n > 0; n -= len(batch) {
		if err := l.write(ctx, batch[:min(n, len(batch))]); err != nil {
			b.Fatal(err)
		}
	}
	cpu = cpuTime() - cpu
	b.StopTimer()
	if cpu > 0 {
		b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
	}
	if got := l.Written(); got != uint64(b.N) {
		b.Fatalf("written %d, want %d", got, b.N)
	}
}

// BenchmarkWriteRandomIDs is BenchmarkWrite with each Record's request id
// random, as served ids are (96 random bits): an index on the id made every
// insert land at a random place of its B-tree (40.9 µs of CPU per Record
// against 19.3 with one id; 19–21 µs without the index, migration 5).
func BenchmarkWriteRandomIDs(b *testing.B) {
	gate := make(chan struct{})
	l, err := open(Config{Path: filepath.Join(b.TempDir(), "r.db")}, hooks{gate: gate})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	recs := make([]callrec.Record, DefaultBatchSize)
	batch := make([]*callrec.Record, DefaultBatchSize)
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	cpu := cpuTime()
	for n := b.N; n > 0; n -= len(batch) {
		for i := range batch {
			recs[i] = *hedged()
			var x [12]byte
			rand.Read(x[:])
			recs[i].RequestID = "mesh_" + hex.EncodeToString(x[:])
			batch[i] = &recs[i]
		}
		if err := l.write(ctx, batch[:min(n, len(batch))]); err != nil {
			b.Fatal(err)
		}
	}
	cpu = cpuTime() - cpu
	b.StopTimer()
	if cpu > 0 {
		b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
	}
}

// plain is the Record of a plain call started at s, as keel serve logs one
// at 50 clients in front of keel sim (bench/compare.py): one attempt,
// served by the first endpoint, a random request id.
func plain(s time.Time) callrec.Record {
	var x [12]byte
	rand.Read(x[:])
	return callrec.Record{
		Call: callrec.Call{RequestID: "mesh_" + hex.EncodeToString(x[:]), Start: s, Duration: 3 * time.Millisecond,
			Format: llm.FormatAnthropic, Model: "sim-sonnet"},
		Route: callrec.Route{PrimaryModel: "sim-sonnet",
			ServedBy: "sim-sonnet/us-east/sim-anthropic", ServedModel: "sim-sonnet", ServedRegion: "us-east", ServedProvider: "sim-anthropic",
			Attempts: []callrec.Attempt{{Endpoint: "sim-sonnet/us-east/sim-anthropic", Model: "sim-sonnet", Region: "us-east", Kind: "primary",
				Outcome: "ok", Status: 200, Start: s.Add(50 * time.Microsecond), End: s.Add(2900 * time.Microsecond), Bytes: 382, Winner: true,
				InputTokens: 3, OutputTokens: 16, Cost: 0.000249}}},
		Result: callrec.Result{Status: 200, Usage: llm.Usage{InputTokens: 3, OutputTokens: 16}, Cost: 0.000249},
	}
}

// BenchmarkWritePlain is the writer's CPU per plain call (plain, making
// each Record included): the request log's cost per call in keel serve,
// less the queue and the collector's share.
func BenchmarkWritePlain(b *testing.B) {
	gate := make(chan struct{})
	l, err := open(Config{Path: filepath.Join(b.TempDir(), "r.db")}, hooks{gate: gate})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	recs := make([]callrec.Record, DefaultBatchSize)
	batch := make([]*callrec.Record, DefaultBatchSize)
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	cpu := cpuTime()
	start := time.Now()
	for n := b.N; n > 0; n -= len(batch) {
		// Start times increase, as served calls' do: the time index
		// appends.
		for i := range recs {
			start = start.Add(time.Microsecond)
			recs[i] = plain(start)
			batch[i] = &recs[i]
		}
		if err := l.write(ctx, batch[:min(n, len(batch))]); err != nil {
			b.Fatal(err)
		}
	}
	cpu = cpuTime() - cpu
	b.StopTimer()
	if cpu > 0 {
		b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
	}
	if got := l.Written(); got != uint64(b.N) {
		b.Fatalf("written %d, want %d", got, b.N)
	}
}
