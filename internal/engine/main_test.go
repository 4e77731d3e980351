package engine

import (
	"testing"

	"go.uber.org/goleak"
)

// Every test leaves no goroutine behind: hedges, drained losers and
// probers all end with their call or the Engine.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
