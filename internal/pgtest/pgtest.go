// Package pgtest gives a test a PostgreSQL schema of its own on the
// server that STRATA_TEST_POSTGRES names, dropped when the test ends. With
// the variable unset, the test is skipped with a message that names it.
//
// .ci/run starts a throwaway server and sets the variable; docs/postgres.md
// says how to do the same by hand. A test that restarts its server starts
// one of its own instead (StartCluster, with the programs BinEnv names).
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

// Env is the environment variable that names the test server: a
// postgres:// URL of a database the tests may create schemas in.
const Env = "STRATA_TEST_POSTGRES"

// BinEnv is the environment variable that names the directory of
// PostgreSQL's programs (initdb, pg_ctl). A test that restarts its server
// starts a server of its own with them (StartCluster), so that no other
// test loses its connections: the server STRATA_TEST_POSTGRES names is
// shared by the tests of every package, which go test runs at once.
const BinEnv = "STRATA_TEST_PGBIN"

// Server returns the URL of the test server, or skips t.
func Server(t testing.TB) string {
	t.Helper()
	base := os.Getenv(Env)
	if base == "" {
		t.Skipf("%s is unset: PostgreSQL tests skipped (docs/postgres.md says how to run them)", Env)
	}
	return base
}

// URL creates a schema of its own for t on the test server (skipping t
// when there is none) and returns the server's URL with search_path set
// to it. The schema and everything in it is dropped when t ends.
func URL(t testing.TB) string {
	t.Helper()
	base := Server(t)
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := "strata_test_" + hex.EncodeToString(b[:])
	Exec(t, base, `CREATE SCHEMA `+schema)
	t.Cleanup(func() {
		ctx := context.Background()
		conn, err := pgx.Connect(ctx, base)
		if err != nil {
			t.Errorf("pgtest: dropping schema %s: %v", schema, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, `DROP SCHEMA `+schema+` CASCADE`); err != nil {
			t.Errorf("pgtest: dropping schema %s: %v", schema, err)
		}
	})
	return WithSchema(t, base, schema)
}

// WithSchema returns base with search_path set to schema.
func WithSchema(t testing.TB, base, schema string) string {
	t.Helper()
	return WithParam(t, base, "search_path", schema)
}

// WithParam returns u with connection parameter key set to value.
func WithParam(t testing.TB, u, key, value string) string {
	t.Helper()
	if !strings.HasPrefix(u, "postgres://") && !strings.HasPrefix(u, "postgresql://") {
		return u + " " + key + "=" + value // pgx's key=value form
	}
	pu, err := url.Parse(u)
	if err != nil {
		t.Fatalf("pgtest: %s: %v", Env, err)
	}
	q := pu.Query()
	q.Set(key, value)
	pu.RawQuery = q.Encode()
	return pu.String()
}

// connect opens a connection to the database at u, failing t on an error.
func connect(t testing.TB, ctx context.Context, u string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatalf("pgtest: connecting: %v", err)
	}
	return conn
}

// Exec runs SQL statements on the database at u (a URL from URL runs them
// in the test's schema), each on its own, failing t on an error.
func Exec(t testing.TB, u string, stmts ...string) {
	t.Helper()
	ctx := context.Background()
	conn := connect(t, ctx, u)
	defer conn.Close(ctx)
	for _, s := range stmts {
		if _, err := conn.Exec(ctx, s); err != nil {
			t.Fatalf("pgtest: %s: %v", s, err)
		}
	}
}

// QueryInt runs a query of one integer on the database at u.
func QueryInt(t testing.TB, u, query string, args ...any) int64 {
	t.Helper()
	ctx := context.Background()
	conn := connect(t, ctx, u)
	defer conn.Close(ctx)
	var n int64
	if err := conn.QueryRow(ctx, query, args...).Scan(&n); err != nil {
		t.Fatalf("pgtest: %s: %v", query, err)
	}
	return n
}
