package rollout

import "testing"

// The config's rollout defaults to full for 100 %, and its stage decodes
// only to a stage Validate accepts, naming the allowed ones otherwise.
func TestConfig(t *testing.T) {
	forty, over := 40, 101
	for _, tt := range []struct {
		name    string
		c       Config
		want    Rollout
		wantErr string
	}{
		{name: "zero is full for everyone", c: Config{}, want: Rollout{Stage: StageFull, Percent: 100}},
		{name: "stage alone is for everyone", c: Config{Stage: StageHedging}, want: Rollout{Stage: StageHedging, Percent: 100}},
		{name: "percent alone is full", c: Config{Percent: &forty}, want: Rollout{Stage: StageFull, Percent: 40}},
		{name: "percent over 100", c: Config{Percent: &over}, want: Rollout{Stage: StageFull, Percent: 101}, wantErr: "rollout percent 101: want 0-100"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.c.Rollout(); got != tt.want {
				t.Errorf("Rollout() = %+v, want %+v", got, tt.want)
			}
			err := tt.c.Validate()
			if (err == nil) != (tt.wantErr == "") || err != nil && err.Error() != tt.wantErr {
				t.Errorf("Validate() = %v, want %q", err, tt.wantErr)
			}
		})
	}
	for _, tt := range []struct{ in, wantErr string }{
		{in: "monitor"}, {in: "hedging"}, {in: "full"}, {in: ""},
		{in: "half", wantErr: `expected monitor, hedging or full, got "half"`},
		{in: "Full", wantErr: `expected monitor, hedging or full, got "Full"`},
	} {
		s := Stage("kept")
		err := s.UnmarshalText([]byte(tt.in))
		switch {
		case tt.wantErr == "" && (err != nil || string(s) != tt.in):
			t.Errorf("UnmarshalText(%q) = %q, %v", tt.in, s, err)
		case tt.wantErr != "" && (err == nil || err.Error() != tt.wantErr || s != "kept"):
			t.Errorf("UnmarshalText(%q) = %q, %v; want %q and the stage kept", tt.in, s, err, tt.wantErr)
		}
	}
}
