package semcache

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

func randomUnit(r *rand.Rand, dims int) []float32 {
	v := make([]float32, dims)
	for i := range v {
		v[i] = float32(r.NormFloat64())
	}
	return unit(v...)
}

// BenchmarkNearest: one lookup in a space of n entries of 1536 dimensions
// (text-embedding-3-small's size).
func BenchmarkNearest(b *testing.B) {
	for _, n := range []int{100, 10000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			r := rand.New(rand.NewPCG(1, 2))
			x, _ := New[int](Config{MaxEntries: n}, nil)
			for i := range n {
				x.Add("s", randomUnit(r, 1536), i)
			}
			q := randomUnit(r, 1536)
			b.ReportAllocs()
			for b.Loop() {
				x.Nearest("s", q)
			}
		})
	}
}
