package transcript

// SetBigValue sets the size from which a top-level object of an input that
// can be read again is read member by member, until the test ends.
func SetBigValue(t interface{ Cleanup(func()) }, n int64) {
	old := bigValue
	bigValue = n
	t.Cleanup(func() { bigValue = old })
}
