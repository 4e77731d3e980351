package keys

import (
	"context"
	"time"
)

// Ledger keeps every key's accounting windows where all of a fleet's
// replicas see them (Redis: internal/store/redis), so that a key's limits
// hold across replicas, not per replica. Reserve makes the same test as a
// lone Manager (see Manager) on the fleet's counters and reserves in the
// same atomic step; Settle replaces a reservation by what the call used
// (its tokens counted in the minute of now, its cost in the reservation's
// day and month).
// A reservation not settled by its Deadline (a replica that died with the
// call in flight) is released by the next Reserve of its key.
//
// Implementations must be safe for concurrent use. When a Ledger call
// fails, the Manager admits and settles on its own counters until the
// Ledger answers again (each replica then enforces the limits alone).
type Ledger interface {
	Reserve(ctx context.Context, r Reservation) (Usage, error)
	Settle(ctx context.Context, r Reservation, now time.Time, tokens int, costNano int64) error
}

// Reservation is one call's reservation against its key's windows.
type Reservation struct {
	// ID names the reservation; unique per call.
	ID    string
	KeyID string
	// Minute is the Unix minute of the requests and tokens counters; Day
	// and Month the spend windows (DayWindow, MonthWindow) of Now.
	Minute     int64
	Day, Month string
	Now        time.Time
	Deadline   time.Time
	// Tokens and NanoUSD are the call's estimate.
	Tokens  int
	NanoUSD int64
	// The key's limits (0: none); budgets in nano-dollars.
	RPM, TPM               int
	DailyNano, MonthlyNano int64
}

// Usage is the fleet's counters of a key as Reserve read them, before
// its reservation; Admitted says whether the reservation was made.
type Usage struct {
	Admitted bool
	// Reqs and Tokens are the minute's settled requests and tokens;
	// ResTokens and ResNano what calls in flight reserved.
	Reqs, Tokens, ResTokens int
	DayNano, MonthNano      int64
	ResNano                 int64
}

// DefaultReservationTTL is how long a reservation in a Ledger outlives its
// call at most: a call still running after it no longer holds its
// estimate against the limits.
const DefaultReservationTTL = 15 * time.Minute
