//go:build !unix

package pgtest

import "testing"

// Cluster is a PostgreSQL server of one test's own; on unix only.
type Cluster struct {
	// URL is the server's postgres database, as the postgres user.
	URL string
}

// StartCluster skips t: a server of the test's own is started on unix
// only.
func StartCluster(t testing.TB) *Cluster {
	t.Helper()
	t.Skip("pgtest: a PostgreSQL server of the test's own is started on unix only")
	return nil
}

// Restart does nothing: StartCluster skips.
func (c *Cluster) Restart() error { return nil }
