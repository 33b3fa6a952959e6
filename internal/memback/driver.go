package memback

import (
	"sync"

	"github.com/cockroachdb/errors"

	"github.com/strata-go/strata/backend"
)

// Scheme is the memory backend's URL scheme: store.Open("mem://NAME")
// opens the database NAME of this process, as a test's binary links it in
// by importing this package.
const Scheme = "mem"

// The memory backend registers itself as every backend does: a package and
// a registration are all a backend needs.
func init() { backend.Register(Scheme, driver{}) }

var (
	namedMu sync.Mutex
	named   = map[string]*Backend{} // the handle each name was last opened as
)

type driver struct{}

// Open implements backend.Driver: a name opened before is reopened (its
// state as the last handle opened on it has it; one handle at a time), a
// new name is created when o.Create is set and is backend.ErrNotExist
// otherwise.
func (driver) Open(name string, o backend.Options) (backend.Backend, error) {
	namedMu.Lock()
	defer namedMu.Unlock()
	b := named[name]
	switch {
	case b != nil:
		b = b.Reopen()
	case o.Create:
		b = New()
	default:
		return nil, errors.Wrapf(backend.ErrNotExist, "memback: %s", name)
	}
	named[name] = b
	return b, nil
}
