//go:build race

package structured

// raceEnabled reports a build with the race detector, under which the
// scorer's eight leave-one-corpus-out fits are too slow to run.
const raceEnabled = true
