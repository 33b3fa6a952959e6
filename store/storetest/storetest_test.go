package storetest_test

import (
	"testing"

	"github.com/strata-go/strata/backend"
	"github.com/strata-go/strata/internal/memback"
	"github.com/strata-go/strata/store/storetest"
)

// The suite against the in-memory reference backend: what it states is the
// protocol's, not bbolt's.
func TestMemory(t *testing.T) {
	storetest.Run(t, storetest.Harness{
		New:    func(*testing.T) backend.Backend { return memback.New() },
		Reopen: func(_ *testing.T, be backend.Backend) backend.Backend { return be.(*memback.Backend).Reopen() },
	})
}
