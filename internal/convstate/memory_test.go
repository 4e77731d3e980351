package convstate_test

import (
	"testing"

	"github.com/keelmesh/keel/internal/convstate"
	"github.com/keelmesh/keel/internal/convstate/convstatetest"
)

func TestMemoryBackend(t *testing.T) {
	convstatetest.Run(t, func(_ *testing.T, b convstate.Bounds) convstate.Backend { return convstate.NewMemory(b) })
}
