package structured

// The compile semaphore exists before any test's synctest bubble starts: a
// channel made lazily inside one bubble cannot be used from another (the
// runtime aborts with "select on synctest channel from outside bubble"),
// and engine and root tests compile schemas in many bubbles.
func init() { setCompileSlots(DefaultLimits().MaxConcurrentCompiles) }
