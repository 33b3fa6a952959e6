package store_test

import (
	"path/filepath"
	"testing"

	"github.com/strata-go/strata/backend"
	"github.com/strata-go/strata/backend/boltfile"
	"github.com/strata-go/strata/store/storetest"
)

// TestConformance_Boltfile runs the backends' conformance suite over the
// bbolt file that Open makes: what the suite states of every backend holds
// of the one users open.
func TestConformance_Boltfile(t *testing.T) {
	open := func(t *testing.T, path string, create bool) backend.Backend {
		t.Helper()
		be, err := boltfile.Open(path, boltfile.Options{Create: create, NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		return be
	}
	storetest.Run(t, storetest.Harness{
		New: func(t *testing.T) backend.Backend {
			return open(t, filepath.Join(t.TempDir(), "strata.db"), true)
		},
		Reopen: func(t *testing.T, be backend.Backend) backend.Backend {
			return open(t, be.(*boltfile.Backend).Path(), false)
		},
	})
}
