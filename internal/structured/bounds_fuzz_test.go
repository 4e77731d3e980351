package structured

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
)

// FuzzPrescan: the pre-scan never panics; what it accepts and is valid JSON
// comes back as exactly json.Compact's bytes (the cache key depends on it);
// and a scan that accepts invalid JSON leaves the rejection to the compiler,
// which must give ErrSchema.
func FuzzPrescan(f *testing.F) {
	for _, c := range hostileCases() {
		if len(c.schema) <= 4<<10 {
			f.Add(c.schema)
		}
	}
	f.Add("{ \"type\" :\t\"object\" ,\n \"properties\" : { \"a b\" : { \"enum\" : [ 1 , \"\\\" x\" ] } } }")
	lim := Limits{MaxDepth: 8, MaxBytes: 4 << 10}.withDefaults()
	f.Fuzz(func(t *testing.T, schema string) {
		canon, err := prescan([]byte(schema), lim)
		if err != nil {
			var le *LimitError
			if !errors.As(err, &le) && !errors.Is(err, ErrSchema) {
				t.Fatalf("prescan error %v is neither a *LimitError nor ErrSchema", err)
			}
			return
		}
		if json.Valid([]byte(schema)) {
			var want bytes.Buffer
			if err := json.Compact(&want, []byte(schema)); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(canon, want.Bytes()) {
				t.Fatalf("prescan(%q) = %q, want json.Compact's %q", schema, canon, want.Bytes())
			}
			return
		}
		if _, err := compile(canon); !errors.Is(err, ErrSchema) {
			t.Fatalf("invalid JSON %q passed the scan and compiled: %v", schema, err)
		}
	})
}
