// Package postgres is strata's backend in PostgreSQL: the places of
// package backend — a session's state, its events by seq, its records by
// table and key — as rows of tables a PostgreSQL user can read and query,
// shared by many processes on many machines. It talks to the server
// through pgx (github.com/jackc/pgx/v5) and its pool, pgxpool.
//
// # Schema
//
// In the connection's current schema (search_path), version
// SchemaVersion (schema.go):
//
//	strata_schema_version (version, applied_at, applied_by)
//	strata_sessions       (id, state, state_crc, created_at, updated_at)
//	strata_events         (session, seq, value, crc)   primary key (session, seq)
//	strata_open, strata_dispositions, strata_constraints, strata_artifacts,
//	strata_nodes, strata_roots, strata_markers, strata_checkpoints,
//	strata_checkpoint_index, strata_audit
//	                      (session, key, value, crc)   primary key (session, key)
//
// Ids are text COLLATE "C" (byte order), keys bytea; values are the
// store's records (msgpack), and crc is the CRC32C of the value's place —
// session, table, key — and the value (checksum.go): a value changed by
// SQL, or a row moved, is damage at its place (a *backend.CorruptError),
// never data.
//
// Open runs the migrations a schema lacks, in one transaction under an
// advisory lock, and records each in strata_schema_version; a schema of a
// newer version is refused.
//
// # Transactions
//
// A read transaction is REPEATABLE READ, READ ONLY: one snapshot. A write
// transaction is READ COMMITTED and takes, before it reads a session, the
// session's advisory transaction lock (pg_advisory_xact_lock of a 64-bit
// hash of the schema and the id), held to its end: the writers of one
// session, in any process, take turns, and each reads what the last one
// committed. Locks are taken in increasing key order; one below a lock
// already held is only tried, and when another writer holds it the
// transaction is rolled back and run again with all its locks taken in
// order — writers of many sessions in one group commit never deadlock.
// Update runs its function again after that, after a serialization
// failure or a deadlock (40001, 40P01) and after a connection the server
// closed, up to 10 times with jittered waits; callers see none of them.
// The first round trip of any transaction, read or write, whose connection
// turns out lost (the server ended it while the pool held it idle, or
// restarted) goes to another connection, a new one once the pool's are
// spent; a transaction that loses its connection after that fails (a
// write is run again by Update).
//
// Statements go in pipelined round trips (tx.go): a write is sent with the
// next read, or with the COMMIT; what the store knows it will read — the
// sessions and ledger entries of a group commit's appends, the span and
// roots a compaction's commit checks — goes in one round trip
// (backend.Prefetcher), its locks taken in order.
//
// # Caveats
//
//   - Values and keys are opaque to SQL (msgpack, big-endian u64 keys):
//     query the sessions and events by id and seq, read records through
//     strata (strata dump --json).
//   - A key is at most MaxKeyBytes, a session id at most MaxSessionBytes:
//     with a PostgreSQL backend, store.New bounds the events' ids and keys
//     to MaxKeyBytes.
//   - Transaction pooling (PgBouncer's pool_mode=transaction) is not
//     supported: the migration holds a session-level advisory lock.
//   - A COMMIT whose connection fails before the server answers it has an
//     unknown outcome — also when the failure shows at a statement sent
//     before it in the same round trip — unless the server answered that
//     statement with an error: its error is marked ErrCommitUnknown and
//     the write is not run again. A COMMIT the server answered is the
//     outcome, whatever befalls the connection after it.
package postgres
