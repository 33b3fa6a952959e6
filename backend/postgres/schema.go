package postgres

import (
	"fmt"
	"strings"

	"github.com/strata-go/strata/backend"
)

// The schema (doc.go): the sessions, their events, one table per
// backend.Table, and the schema's version. Every table is created in the
// connection's current schema (the first of its search_path).
const (
	sessionsTable = "strata_sessions"
	eventsTable   = "strata_events"
	versionTable  = "strata_schema_version"
)

// recordTable is the SQL table of one backend.Table.
type recordTable struct {
	name  string // the SQL table's name
	since int    // the schema version that creates it
	about string // its COMMENT
}

// recordTables holds every backend.Table's SQL table. A table added to
// package backend needs its entry here, with the next schema version in
// since: that version's migration creates it (TestSchema_EveryTableNamed).
var recordTables = [backend.Tables]recordTable{
	backend.Open:            {"strata_open", 1, "the calls and resources open at the head, by call id"},
	backend.Dispositions:    {"strata_dispositions", 1, "the ledger's dispositions, by item key"},
	backend.Constraints:     {"strata_constraints", 1, "the ledger's active constraints, by key"},
	backend.Artifacts:       {"strata_artifacts", 1, "the ledger's artifacts, by key"},
	backend.Nodes:           {"strata_nodes", 1, "summary nodes, by id (big-endian u64)"},
	backend.Roots:           {"strata_roots", 1, "the frame's current roots, by the first seq each covers (big-endian u64)"},
	backend.Markers:         {"strata_markers", 1, "recovery markers, by id (big-endian u64; a marker's id is its node's)"},
	backend.Checkpoints:     {"strata_checkpoints", 1, "raw checkpoints, by id (big-endian u64)"},
	backend.CheckpointIndex: {"strata_checkpoint_index", 1, "the usable checkpoints, by seq and id (two big-endian u64)"},
	backend.Audit:           {"strata_audit", 1, "refused compactions, by id (big-endian u64)"},
	backend.Refs:            {"strata_refs", 1, "the source records imported events came from, by ref: the first and last seq of each record's events"},
}

// baseMigrations are the statements of each schema version beyond the
// record tables it creates: baseMigrations[0] is version 1's.
var baseMigrations = [][]string{{
	`CREATE TABLE ` + versionTable + ` (
		version integer PRIMARY KEY,
		applied_at timestamptz NOT NULL DEFAULT now(),
		applied_by text NOT NULL
	)`,
	`COMMENT ON TABLE ` + versionTable + ` IS 'strata: the migrations applied to this schema; the highest version is the schema''s'`,
	// Updated on every append: room on each page for the new row
	// version keeps the update HOT (no index entry written).
	`CREATE TABLE ` + sessionsTable + ` (
		id text COLLATE "C" PRIMARY KEY,
		state bytea,
		state_crc bigint,
		created_at timestamptz NOT NULL DEFAULT now(),
		updated_at timestamptz NOT NULL DEFAULT now()
	) WITH (fillfactor = 50)`,
	`COMMENT ON TABLE ` + sessionsTable + ` IS 'strata: one row per session; state is the store''s state record (msgpack)'`,
	`CREATE TABLE ` + eventsTable + ` (
		session text COLLATE "C" NOT NULL,
		seq bigint NOT NULL CHECK (seq > 0),
		value bytea NOT NULL,
		crc bigint NOT NULL,
		PRIMARY KEY (session, seq)
	)`,
	`COMMENT ON TABLE ` + eventsTable + ` IS 'strata: every session''s raw log, by seq; value is the event record (msgpack), never rewritten'`,
}}

// SchemaVersion is the version of the schema this package creates and
// reads: the highest migration's. Open refuses a schema of a higher version
// (backend.ErrFormatTooNew) and migrates a lower one.
var SchemaVersion = schemaVersion()

func schemaVersion() int {
	v := len(baseMigrations)
	for _, t := range recordTables[1:] {
		v = max(v, t.since)
	}
	return v
}

// migration returns the statements that take the schema from version v-1
// to version v.
func migration(v int) []string {
	var stmts []string
	if v <= len(baseMigrations) {
		stmts = append(stmts, baseMigrations[v-1]...)
	}
	for _, t := range recordTables[1:] {
		if t.since != v {
			continue
		}
		stmts = append(stmts,
			fmt.Sprintf(`CREATE TABLE %s (
				session text COLLATE "C" NOT NULL,
				key bytea NOT NULL,
				value bytea NOT NULL,
				crc bigint NOT NULL,
				PRIMARY KEY (session, key)
			)`, t.name),
			fmt.Sprintf(`COMMENT ON TABLE %s IS %s`, t.name, quote("strata: "+t.about+"; value is the store's record (msgpack)")))
	}
	return stmts
}

// quote returns s as an SQL string literal.
func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// tableSQL is the SQL of one table's reads and writes, made once.
type tableSQL struct {
	get, getMany, put, del, scan, last, lastBelow string
}

var recordSQL = func() (q [backend.Tables]tableSQL) {
	for t := backend.Table(1); t < backend.Tables; t++ {
		n := recordTables[t].name
		if n == "" {
			continue // TestSchema_EveryTableNamed; Open refuses
		}
		q[t] = tableSQL{
			get: `SELECT value, crc FROM ` + n + ` WHERE session = $1 AND key = $2`,
			getMany: `SELECT session, key, value, crc FROM ` + n + `
				WHERE (session, key) IN (SELECT * FROM unnest($1::text[], $2::bytea[]))`,
			put: `INSERT INTO ` + n + ` (session, key, value, crc) VALUES ($1, $2, $3, $4)
				ON CONFLICT (session, key) DO UPDATE SET value = excluded.value, crc = excluded.crc`,
			del:       `DELETE FROM ` + n + ` WHERE session = $1 AND key = $2`,
			scan:      `SELECT key, value, crc FROM ` + n + ` WHERE session = $1 AND key >= $2 ORDER BY key LIMIT $3`,
			last:      `SELECT key, value, crc FROM ` + n + ` WHERE session = $1 ORDER BY key DESC LIMIT 1`,
			lastBelow: `SELECT key, value, crc FROM ` + n + ` WHERE session = $1 AND key < $2 ORDER BY key DESC LIMIT 1`,
		}
	}
	return q
}()

// The SQL of the sessions and the events.
const (
	sqlLock    = `SELECT pg_advisory_xact_lock($1)`
	sqlTryLock = `SELECT pg_try_advisory_xact_lock($1)`
	// Many locks in one statement, taken in the array's order.
	sqlLocks      = `SELECT pg_advisory_xact_lock(k) FROM unnest($1::bigint[]) AS k`
	sqlTryLocks   = `SELECT bool_and(pg_try_advisory_xact_lock(k)) FROM unnest($1::bigint[]) AS k`
	sqlSessionsIn = `SELECT id, state, state_crc FROM ` + sessionsTable + ` WHERE id = ANY($1::text[])`
	sqlSession    = `SELECT state, state_crc FROM ` + sessionsTable + ` WHERE id = $1`
	sqlCreate     = `INSERT INTO ` + sessionsTable + ` (id) VALUES ($1)`
	sqlPutState   = `UPDATE ` + sessionsTable + ` SET state = $2, state_crc = $3, updated_at = now() WHERE id = $1`
	sqlSessions   = `SELECT id FROM ` + sessionsTable + ` WHERE id > $1 ORDER BY id LIMIT $2`
	sqlEvent      = `SELECT value, crc FROM ` + eventsTable + ` WHERE session = $1 AND seq = $2`
	sqlEvents     = `SELECT seq, value, crc FROM ` + eventsTable + ` WHERE session = $1 AND seq >= $2 AND seq <= $3 ORDER BY seq LIMIT $4`
	sqlPutEvent   = `INSERT INTO ` + eventsTable + ` (session, seq, value, crc) VALUES ($1, $2, $3, $4)`
	sqlVersion    = `SELECT max(version) FROM ` + versionTable
	sqlHasSchema  = `SELECT current_schema(), current_database(),
		to_regclass(quote_ident(current_schema()) || '.` + versionTable + `') IS NOT NULL,
		to_regclass(quote_ident(current_schema()) || '.` + sessionsTable + `') IS NOT NULL`
	// Whether any session or event is stored.
	sqlHeld     = `SELECT EXISTS (SELECT 1 FROM ` + sessionsTable + `) OR EXISTS (SELECT 1 FROM ` + eventsTable + `)`
	sqlMigrated = `INSERT INTO ` + versionTable + ` (version, applied_by) VALUES ($1, $2)`
	// The size of the named tables of a schema, with their indexes and
	// TOAST.
	sqlTableBytes = `SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0)::bigint FROM pg_class c
		JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relname = ANY($2)`
)

// tableNames returns the name of every table of the schema.
func tableNames() []string {
	names := []string{versionTable, sessionsTable, eventsTable}
	for _, t := range recordTables[1:] {
		names = append(names, t.name)
	}
	return names
}
