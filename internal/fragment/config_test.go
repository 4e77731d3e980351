package fragment

import "testing"

// An unset list_quorum is DefaultListQuorum; a set one, 0 included (the
// plain union), is kept.
func TestConfigQuorum(t *testing.T) {
	zero, q := 0.0, 0.8
	for _, tt := range []struct {
		name string
		c    Config
		want float64
	}{
		{name: "unset", c: Config{}, want: DefaultListQuorum},
		{name: "zero keeps the union", c: Config{ListQuorum: &zero}, want: 0},
		{name: "set", c: Config{ListQuorum: &q}, want: 0.8},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.c.Quorum(); got != tt.want {
				t.Errorf("Quorum() = %v, want %v", got, tt.want)
			}
		})
	}
}
