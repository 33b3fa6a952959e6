package postgres

import "github.com/strata-go/strata/backend"

// PostgreSQL's schemes: a postgres:// or postgresql:// URL.
func init() {
	for _, s := range schemes {
		backend.Register(s, driver{})
	}
}

// driver opens PostgreSQL databases for package backend's registry.
type driver struct{}

// Open implements backend.Driver.
func (driver) Open(url string, o backend.Options) (backend.Backend, error) {
	b, err := Open(url, Options{Create: o.Create, ReadOnly: o.ReadOnly, LockTimeout: o.LockTimeout, NoSync: o.NoSync})
	if err != nil {
		return nil, err
	}
	return b, nil
}
