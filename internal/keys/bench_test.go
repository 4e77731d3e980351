package keys

import (
	"context"
	"testing"
	"time"
)

// BenchmarkKeyCheck is what a virtual key adds to a call: finding the key
// (SHA-256 of the secret, a map lookup), admitting the call against its
// model list, rpm, tpm and budgets (estimating the prompt, one mutex) and
// settling it.
func BenchmarkKeyCheck(b *testing.B) {
	m, err := Open(context.Background(), Options{Store: &memStore{}, Require: true, Price: nil, Now: time.Now})
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	_, secret, _ := m.Create(context.Background(), Spec{Limits: Limits{Models: []string{"m", "n"}, RPM: 1 << 30, TPM: 1 << 30, DailyUSD: 1e9, MonthlyUSD: 1e9}})
	r := withKey(secret)
	req := request("m", 200, 256)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		c, ae := m.Authenticate(r)
		if ae != nil {
			b.Fatal(ae)
		}
		settle, ae := c.Admit(context.Background(), req)
		if ae != nil {
			b.Fatal(ae)
		}
		settle(0.001, 300)
	}
}

// BenchmarkKeyCheckParallel is BenchmarkKeyCheck from every core on one
// key: the key's mutex is the shared point.
func BenchmarkKeyCheckParallel(b *testing.B) {
	m, err := Open(context.Background(), Options{Store: &memStore{}, Require: true, Now: time.Now})
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	_, secret, _ := m.Create(context.Background(), Spec{Limits: Limits{RPM: 1 << 30, DailyUSD: 1e9}})
	req := request("m", 200, 256)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		r := withKey(secret)
		for pb.Next() {
			c, _ := m.Authenticate(r)
			settle, ae := c.Admit(context.Background(), req)
			if ae != nil {
				b.Error(ae)
				return
			}
			settle(0.001, 300)
		}
	})
}
