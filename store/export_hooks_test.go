package store

// SetTestHook sets the write-step hook (see hooks.go) and returns a func
// that clears it. Only for tests that are not parallel: the hook is
// process-wide.
func SetTestHook(f func(step string) error) (clear func()) {
	testHook.Store(&f)
	return func() { testHook.Store(nil) }
}
