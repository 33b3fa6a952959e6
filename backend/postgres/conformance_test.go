package postgres_test

import (
	"testing"

	"github.com/strata-go/strata/backend"
	"github.com/strata-go/strata/backend/postgres"
	"github.com/strata-go/strata/internal/pgtest"
	"github.com/strata-go/strata/store/storetest"
)

// TestConformance runs the store's conformance suite on PostgreSQL, each
// test in a schema of its own.
func TestConformance(t *testing.T) {
	pgtest.Server(t)
	urls := map[backend.Backend]string{}
	open := func(t *testing.T, url string, create bool) backend.Backend {
		be, err := postgres.Open(url, postgres.Options{Create: create})
		if err != nil {
			t.Fatal(err)
		}
		urls[be] = url
		t.Cleanup(func() { _ = be.Close() })
		return be
	}
	storetest.Run(t, storetest.Harness{
		New: func(t *testing.T) backend.Backend { return open(t, pgtest.URL(t), true) },
		Reopen: func(t *testing.T, be backend.Backend) backend.Backend {
			return open(t, urls[be], false)
		},
	})
}
