package resilience

import (
	"errors"
	"math"
	"testing"
	"time"
)

func TestValveConfigValidate(t *testing.T) {
	tests := []struct {
		name    string
		cfg     ValveConfig
		wantErr string // "" means valid
	}{
		{name: "zero value is valid", cfg: ValveConfig{}},
		{name: "threshold 0 is the default", cfg: ValveConfig{Threshold: 0}},
		{name: "threshold 1", cfg: ValveConfig{Threshold: 1}},
		{name: "all fields set", cfg: ValveConfig{Disabled: true, Threshold: 0.2, Window: 10 * time.Second, MinRequests: 5, Hold: time.Minute}},
		{name: "threshold above 1", cfg: ValveConfig{Threshold: 1.5}, wantErr: "expected a number between 0 and 1, got 1.5: invalid config"},
		{name: "negative threshold", cfg: ValveConfig{Threshold: -0.1}, wantErr: "expected a number between 0 and 1, got -0.1: invalid config"},
		{name: "NaN threshold", cfg: ValveConfig{Threshold: math.NaN()}, wantErr: "expected a number between 0 and 1, got NaN: invalid config"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil || err.Error() != tt.wantErr {
				t.Fatalf("Validate() (-got +want):\n-%v\n+%s", err, tt.wantErr)
			}
			if !errors.Is(err, ErrInvalidConfig) {
				t.Errorf("Validate() = %v, does not wrap ErrInvalidConfig", err)
			}
		})
	}
}

func TestValveConfigWithDefaults(t *testing.T) {
	def := ValveConfig{Threshold: 0.05, Window: time.Minute, MinRequests: 50, Hold: 30 * time.Second}
	tests := []struct {
		name string
		cfg  ValveConfig
		want ValveConfig
	}{
		{name: "zero value", want: def},
		{name: "negative durations", cfg: ValveConfig{Window: -time.Second, Hold: -time.Second}, want: def},
		{name: "set fields kept", cfg: ValveConfig{Disabled: true, Threshold: 0.2, Window: 10 * time.Second, MinRequests: -1, Hold: time.Minute},
			want: ValveConfig{Disabled: true, Threshold: 0.2, Window: 10 * time.Second, MinRequests: -1, Hold: time.Minute}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.cfg.WithDefaults(); got != tt.want {
				t.Errorf("WithDefaults() (-got +want):\n-%+v\n+%+v", got, tt.want)
			}
		})
	}
}
