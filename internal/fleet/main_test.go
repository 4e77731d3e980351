package fleet

import (
	"testing"

	"go.uber.org/goleak"
)

// Every test leaves no goroutine behind: probers end with their endpoint's
// return or the engine's stop.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
