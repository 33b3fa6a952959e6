package postgres

// RoundTrips returns the round trips the backend's transactions have made
// to the server since it was opened (each pipeline sent, and each ROLLBACK
// of a transaction that ends without a commit).
func (b *Backend) RoundTrips() int64 { return b.trips.Load() }

// TableNames returns the name of every table of the schema.
func TableNames() []string { return tableNames() }
