package server

import (
	"testing"

	"go.uber.org/goleak"
)

// Every test leaves no goroutine behind: connections the body limits cut,
// dripping clients, meshes and test servers all end with their test.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
