package store_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/cockroachdb/errors"
	"github.com/strata-go/strata/store"
)

func TestOpen_BadOptions(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "x.db")
	if _, err := store.Open(path, store.Options{Create: true, ReadOnly: true}); !errors.Is(err, store.ErrBadOptions) {
		t.Errorf("Create+ReadOnly = %v, want ErrBadOptions", err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("a refused Open created the file")
	}
	// Limits the store cannot honour: an id is a bbolt key (at most
	// bolt.MaxKeySize bytes, less room for a key's prefix).
	if _, err := store.Open(path, store.Options{Create: true, MaxIDBytes: store.MaxIDBytesLimit + 1}); !errors.Is(err, store.ErrBadOptions) {
		t.Errorf("MaxIDBytes over bbolt's key size = %v, want ErrBadOptions", err)
	}
	if _, err := store.Open(path, store.Options{Create: true, MaxEventBytes: 1 << 30}); !errors.Is(err, store.ErrBadOptions) {
		t.Errorf("MaxEventBytes of 1 GiB = %v, want ErrBadOptions", err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("a refused Open created the file")
	}
}
