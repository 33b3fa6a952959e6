package bench

import (
	"context"
	"fmt"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/strata-go/strata/tier"
)

// Peers over PostgreSQL: what a user would write instead of strata — the
// same msgpack bytes in a table of its own, one INSERT per event in its
// own transaction — and the same with a bulk load sent in one round trip
// per transaction.
const (
	PeerPostgres          = "PostgreSQL INSERT"
	PeerPostgresPipelined = "PostgreSQL INSERT, pipelined"
)

// PeerPostgresTable is the peers' table, in the connection's current schema.
const PeerPostgresTable = "peer_events"

// PostgresPeer stores events in PeerPostgresTable (session, seq, body),
// primary key (session, seq), msgpack-encoded as strata encodes them
// (Encoder), through a pool of up to maxConns connections with
// synchronous_commit on. An append of one event is one autocommitted
// INSERT: a transaction of its own, acknowledged once its commit is
// flushed. An append of several is a bulk load, in transactions of up to
// PostgresLoadTx events: BEGIN, an INSERT per event, COMMIT, each a
// statement of its own (PeerPostgres), or all of a transaction's sent in
// one round trip, a pgx.Batch (PeerPostgresPipelined). The last seq of a
// session is kept in memory, read once from the table (heads).
type PostgresPeer struct {
	pool      *pgxpool.Pool
	pipelined bool
	encs      sync.Pool
	heads     heads
}

// PostgresLoadTx is the most events one transaction of a PostgresPeer's
// bulk load carries.
const PostgresLoadTx = 1000

const sqlPeerInsert = `INSERT INTO ` + PeerPostgresTable + ` (session, seq, body) VALUES ($1, $2, $3)`

// OpenPostgresPeer connects the named peer (PeerPostgres or
// PeerPostgresPipelined) to the database at url (search_path picks the
// schema) with a pool of up to maxConns connections, and creates its table
// if it is missing.
func OpenPostgresPeer(name, url string, maxConns int) (*PostgresPeer, error) {
	if name != PeerPostgres && name != PeerPostgresPipelined {
		return nil, fmt.Errorf("bench: unknown peer %q", name)
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, err
	}
	cfg.MaxConns = int32(maxConns)
	cfg.ConnConfig.RuntimeParams["synchronous_commit"] = "on"
	cfg.ConnConfig.RuntimeParams["application_name"] = "strata-bench-peer"
	ctx := context.Background()
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if _, err := pool.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+PeerPostgresTable+` (
		session text NOT NULL, seq bigint NOT NULL, body bytea NOT NULL, PRIMARY KEY (session, seq))`); err != nil {
		pool.Close()
		return nil, err
	}
	return &PostgresPeer{pool: pool, pipelined: name == PeerPostgresPipelined,
		encs: sync.Pool{New: func() any { return NewEncoder() }}}, nil
}

// Name implements Peer.
func (p *PostgresPeer) Name() string {
	if p.pipelined {
		return PeerPostgresPipelined
	}
	return PeerPostgres
}

func (p *PostgresPeer) head(session string) (uint64, error) {
	return p.heads.get(session, func() (uint64, error) {
		var max *int64
		err := p.pool.QueryRow(context.Background(), `SELECT max(seq) FROM `+PeerPostgresTable+` WHERE session = $1`, session).Scan(&max)
		if err != nil || max == nil {
			return 0, err
		}
		return uint64(*max), nil
	})
}

// Append implements Peer.
func (p *PostgresPeer) Append(session string, events ...tier.Event) error {
	head, err := p.head(session)
	if err != nil {
		return err
	}
	en := p.encs.Get().(*Encoder)
	defer p.encs.Put(en)
	ctx := context.Background()
	if len(events) == 1 {
		if _, err := p.pool.Exec(ctx, sqlPeerInsert, session, int64(head+1), en.Encode(&events[0], head+1)); err != nil {
			return err
		}
	}
	for from := 0; len(events) > 1 && from < len(events); from += PostgresLoadTx {
		if err := p.load(ctx, en, session, head+uint64(from), events[from:min(from+PostgresLoadTx, len(events))]); err != nil {
			return fmt.Errorf("%s: session %s: %w", p.Name(), session, err)
		}
	}
	p.heads.set(session, head+uint64(len(events)))
	return nil
}

// load stores events after seq head in one transaction.
func (p *PostgresPeer) load(ctx context.Context, en *Encoder, session string, head uint64, events []tier.Event) error {
	if p.pipelined {
		var b pgx.Batch
		b.Queue("BEGIN")
		for i := range events {
			seq := head + uint64(i) + 1
			b.Queue(sqlPeerInsert, session, int64(seq), en.Encode(&events[i], seq))
		}
		b.Queue("COMMIT")
		return p.pool.SendBatch(ctx, &b).Close()
	}
	tx, err := p.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx) //nolint:errcheck // after Commit, a no-op
	for i := range events {
		seq := head + uint64(i) + 1
		if _, err := tx.Exec(ctx, sqlPeerInsert, session, int64(seq), en.Encode(&events[i], seq)); err != nil {
			return err
		}
	}
	return tx.Commit(ctx)
}

// Count returns the number of events the peer's table holds.
func (p *PostgresPeer) Count() (int, error) {
	var n int
	err := p.pool.QueryRow(context.Background(), `SELECT count(*) FROM `+PeerPostgresTable).Scan(&n)
	return n, err
}

// Path implements Peer: the peer's table.
func (p *PostgresPeer) Path() string { return PeerPostgresTable }

// Close implements Peer.
func (p *PostgresPeer) Close() error {
	p.pool.Close()
	return nil
}
