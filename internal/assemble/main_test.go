package assemble

import (
	"testing"

	"go.uber.org/goleak"
)

// Every mesh a test builds stops what it started when closed: the request
// log's writer, the shadow pool, the key refresher, the write-behind
// conversations.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
