package boltfile_test

import (
	"path/filepath"
	"testing"

	"github.com/strata-go/strata/backend"
	"github.com/strata-go/strata/backend/boltfile"
	"github.com/strata-go/strata/store/storetest"
)

// TestConformance runs the store's conformance suite on bbolt files.
func TestConformance(t *testing.T) {
	paths := map[backend.Backend]string{}
	open := func(t *testing.T, path string, create bool) backend.Backend {
		be, err := boltfile.Open(path, boltfile.Options{Create: create, NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		paths[be] = path
		t.Cleanup(func() { _ = be.Close() })
		return be
	}
	storetest.Run(t, storetest.Harness{
		New: func(t *testing.T) backend.Backend { return open(t, filepath.Join(t.TempDir(), "strata.db"), true) },
		Reopen: func(t *testing.T, be backend.Backend) backend.Backend {
			return open(t, paths[be], false)
		},
	})
}
