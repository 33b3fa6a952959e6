package boltfile

import (
	"io"
	"os"

	"github.com/strata-go/strata/backend"
)

// The file backend: a name without a URL scheme is a bbolt file's path.
func init() { backend.Register(backend.FileScheme, driver{}) }

// driver opens, builds and atomically writes bbolt files for package
// backend's registry.
type driver struct{}

var (
	_ backend.Builder      = driver{}
	_ backend.AtomicWriter = driver{}
)

// Open implements backend.Driver.
func (driver) Open(path string, o backend.Options) (backend.Backend, error) {
	b, err := Open(path, Options{Create: o.Create, ReadOnly: o.ReadOnly, LockTimeout: o.LockTimeout,
		NoSync: o.NoSync, Mode: o.Mode, Clock: o.Clock})
	if err != nil {
		return nil, err
	}
	return b, nil
}

// Build implements backend.Builder with Build.
func (driver) Build(path string, replace bool, fill func(backend.Backend) error) error {
	return Build(path, Options{}, replace, func(b *Backend) error { return fill(b) })
}

// WriteFileAtomic implements backend.AtomicWriter with WriteFileAtomic.
func (driver) WriteFileAtomic(path string, mode os.FileMode, write func(io.Writer) (int64, error)) (int64, error) {
	return WriteFileAtomic(path, mode, write)
}
