package postgres_test

import (
	"strings"
	"testing"

	"github.com/strata-go/strata/backend"
	"github.com/strata-go/strata/backend/postgres"
	"github.com/strata-go/strata/internal/pgtest"
	"github.com/strata-go/strata/store"
)

// A PostgreSQL URL is known by its scheme in any case, by IsURL as by the
// backend registry, and opens the database.
func TestIsURL_AnyCase(t *testing.T) {
	pg, err := backend.Lookup("postgres://h/db")
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]bool{
		"postgres://u@h/db":   true,
		"postgresql://u@h/db": true,
		"POSTGRES://u@h/db":   true,
		"PostgreSQL://u@h/db": true,
		"postgres.db":         false,
		"/tmp/postgres://x":   false,
		"mysql://h/db":        false,
		"host=h dbname=db":    false,
	} {
		if got := postgres.IsURL(name); got != want {
			t.Errorf("IsURL(%q) = %v, want %v", name, got, want)
		}
		d, err := backend.Lookup(name)
		if got := err == nil && d == pg; got != want {
			t.Errorf("the registry's driver of %q is PostgreSQL's: %v, IsURL: %v", name, got, want)
		}
	}
	url := pgtest.URL(t)
	i := strings.Index(url, "://")
	if i < 0 {
		t.Skip("the test server is given in pgx's key=value form")
	}
	for _, scheme := range []string{"POSTGRES", "PostgreSQL"} {
		db, err := store.Open(scheme+url[i:], store.Options{Create: true})
		if err != nil {
			t.Fatalf("open %s://…: %v", scheme, err)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
