package policy

import (
	"testing"

	"go.uber.org/goleak"
)

// Every test leaves no goroutine behind: hedges and drained losers end
// with their pass.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
