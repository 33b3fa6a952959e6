package bench

import (
	"database/sql"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	bolt "go.etcd.io/bbolt"
	_ "modernc.org/sqlite" // the "sqlite" database/sql driver, pure Go: no cgo toolchain needed

	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/tier"
)

// Peer is a store that appends events durably: strata, or what a user would
// hand-roll instead. Append returns once the events are durable (for
// SQLite NORMAL: once committed to the WAL, synced only at checkpoints —
// the weaker setting many applications run with).
type Peer interface {
	Name() string
	Append(session string, events ...tier.Event) error
	Path() string
	Close() error
}

// Peer names, as the table prints them.
const (
	PeerStrata       = "strata"
	PeerBolt         = "bbolt"
	PeerBoltBatch    = "bbolt Batch"
	PeerSQLiteFull   = "SQLite WAL FULL"
	PeerSQLiteNormal = "SQLite WAL NORMAL"
)

// OpenPeer creates the named peer's database in dir.
func OpenPeer(name, dir string) (Peer, error) { return openPeer(name, dir, false) }

// OpenPeerNoSync is OpenPeer without fsync (SQLite: synchronous=OFF), for
// building databases whose layout, not speed, is measured.
func OpenPeerNoSync(name, dir string) (Peer, error) { return openPeer(name, dir, true) }

func openPeer(name, dir string, noSync bool) (Peer, error) {
	sync := map[string]string{PeerSQLiteFull: "FULL", PeerSQLiteNormal: "NORMAL"}[name]
	if noSync {
		sync = "OFF"
	}
	switch name {
	case PeerStrata:
		return OpenStrata(filepath.Join(dir, "strata.db"), store.Options{NoSync: noSync})
	case PeerBolt, PeerBoltBatch:
		return openBolt(filepath.Join(dir, "bolt.db"), name == PeerBoltBatch, noSync)
	case PeerSQLiteFull, PeerSQLiteNormal:
		return openSQLite(filepath.Join(dir, "sqlite.db"), sync)
	}
	return nil, fmt.Errorf("bench: unknown peer %q", name)
}

// StrataPeer is strata's store.DB as a Peer.
type StrataPeer struct {
	DB   *store.DB
	name string // PeerStrata when empty
}

// OpenStrata creates a strata database at path with opts (Create is set).
func OpenStrata(path string, opts store.Options) (*StrataPeer, error) {
	opts.Create = true
	db, err := store.Open(path, opts)
	if err != nil {
		return nil, err
	}
	return &StrataPeer{DB: db}, nil
}

// Name implements Peer.
func (p *StrataPeer) Name() string {
	if p.name != "" {
		return p.name
	}
	return PeerStrata
}

// Append implements Peer: one store.DB.Append call.
func (p *StrataPeer) Append(session string, events ...tier.Event) error {
	_, err := p.DB.Append(session, events...)
	return err
}

// Path implements Peer.
func (p *StrataPeer) Path() string { return p.DB.Path() }

// Close implements Peer.
func (p *StrataPeer) Close() error { return p.DB.Close() }

// boltPeer is hand-rolled bbolt: a bucket per session, big-endian seq keys
// from the bucket's sequence, msgpack values, one db.Update (or db.Batch)
// per append. bbolt's defaults: fdatasync on every commit, the array
// freelist (strata uses the hashmap one).
type boltPeer struct {
	db    *bolt.DB
	batch bool
	pool  sync.Pool
}

func openBolt(path string, batch, noSync bool) (*boltPeer, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 0, NoSync: noSync})
	if err != nil {
		return nil, err
	}
	return &boltPeer{db: db, batch: batch, pool: sync.Pool{New: func() any { return NewEncoder() }}}, nil
}

// Name implements Peer.
func (p *boltPeer) Name() string {
	if p.batch {
		return PeerBoltBatch
	}
	return PeerBolt
}

// Append implements Peer.
func (p *boltPeer) Append(session string, events ...tier.Event) error {
	en := p.pool.Get().(*Encoder)
	defer p.pool.Put(en)
	fn := func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists([]byte(session))
		if err != nil {
			return err
		}
		b.FillPercent = 1.0 // append-only: the same knob strata sets
		for i := range events {
			seq, err := b.NextSequence()
			if err != nil {
				return err
			}
			var k [8]byte
			binary.BigEndian.PutUint64(k[:], seq)
			if err := b.Put(k[:], en.Encode(&events[i], seq)); err != nil {
				return err
			}
		}
		return nil
	}
	if p.batch {
		return p.db.Batch(fn)
	}
	return p.db.Update(fn)
}

// Path implements Peer.
func (p *boltPeer) Path() string { return p.db.Path() }

// Close implements Peer.
func (p *boltPeer) Close() error { return p.db.Close() }

// sqlitePeer is SQLite in WAL mode through modernc.org/sqlite: a table
// events(session, seq, body) with the primary key (session, seq), one
// autocommitted INSERT per event, or one transaction per multi-event
// append. One connection: SQLite has one writer, and queueing in Go is
// faster than its busy-wait retries.
type sqlitePeer struct {
	db   *sql.DB
	name string
	path string
	ins  *sql.Stmt
	pool sync.Pool

	heads heads
}

// heads is the last seq of each session of a peer's table, read from the
// table once: one writer per session, as the scenarios append.
type heads struct {
	mu sync.Mutex
	m  map[string]uint64
}

// get returns session's last seq, read by read the first time.
func (h *heads) get(session string, read func() (uint64, error)) (uint64, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if v, ok := h.m[session]; ok {
		return v, nil
	}
	v, err := read()
	if err != nil {
		return 0, err
	}
	if h.m == nil {
		h.m = map[string]uint64{}
	}
	h.m[session] = v
	return v, nil
}

// set records session's last seq.
func (h *heads) set(session string, v uint64) {
	h.mu.Lock()
	h.m[session] = v
	h.mu.Unlock()
}

func openSQLite(path, synchronous string) (*sqlitePeer, error) {
	dsn := fmt.Sprintf("file:%s?_pragma=journal_mode(WAL)&_pragma=synchronous(%s)&_pragma=busy_timeout(10000)&_txlock=immediate", path, synchronous)
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	if _, err := db.Exec(`CREATE TABLE IF NOT EXISTS events (
		session TEXT NOT NULL, seq INTEGER NOT NULL, body BLOB NOT NULL, PRIMARY KEY (session, seq))`); err != nil {
		db.Close()
		return nil, err
	}
	var mode, syncMode string
	if err := db.QueryRow(`PRAGMA journal_mode`).Scan(&mode); err != nil || mode != "wal" {
		db.Close()
		return nil, fmt.Errorf("bench: sqlite journal_mode %q (%v), want wal", mode, err)
	}
	if err := db.QueryRow(`PRAGMA synchronous`).Scan(&syncMode); err != nil {
		db.Close()
		return nil, err
	}
	if want := map[string]string{"FULL": "2", "NORMAL": "1", "OFF": "0"}[synchronous]; syncMode != want {
		db.Close()
		return nil, fmt.Errorf("bench: sqlite synchronous %s, want %s", syncMode, want)
	}
	ins, err := db.Prepare(`INSERT INTO events (session, seq, body) VALUES (?, ?, ?)`)
	if err != nil {
		db.Close()
		return nil, err
	}
	name := PeerSQLiteFull
	switch synchronous {
	case "NORMAL":
		name = PeerSQLiteNormal
	case "OFF":
		name = "SQLite WAL OFF"
	}
	return &sqlitePeer{db: db, name: name, path: path, ins: ins,
		pool: sync.Pool{New: func() any { return NewEncoder() }}}, nil
}

// Name implements Peer.
func (p *sqlitePeer) Name() string { return p.name }

func (p *sqlitePeer) head(session string) (uint64, error) {
	return p.heads.get(session, func() (uint64, error) {
		var h sql.NullInt64
		err := p.db.QueryRow(`SELECT MAX(seq) FROM events WHERE session = ?`, session).Scan(&h)
		return uint64(h.Int64), err
	})
}

// Append implements Peer.
func (p *sqlitePeer) Append(session string, events ...tier.Event) error {
	head, err := p.head(session)
	if err != nil {
		return err
	}
	en := p.pool.Get().(*Encoder)
	defer p.pool.Put(en)
	if len(events) == 1 {
		if _, err := p.ins.Exec(session, head+1, en.Encode(&events[0], head+1)); err != nil {
			return err
		}
	} else {
		tx, err := p.db.Begin()
		if err != nil {
			return err
		}
		st := tx.Stmt(p.ins)
		for i := range events {
			if _, err := st.Exec(session, head+uint64(i)+1, en.Encode(&events[i], head+uint64(i)+1)); err != nil {
				_ = tx.Rollback()
				return err
			}
		}
		if err := tx.Commit(); err != nil {
			return err
		}
	}
	p.heads.set(session, head+uint64(len(events)))
	return nil
}

// Path implements Peer.
func (p *sqlitePeer) Path() string { return p.path }

// Close implements Peer.
func (p *sqlitePeer) Close() error {
	p.ins.Close()
	return p.db.Close()
}

// FileBytes returns the size of path plus, for SQLite, its -wal file.
func FileBytes(path string) int64 {
	var n int64
	for _, p := range []string{path, path + "-wal"} {
		if fi, err := os.Stat(p); err == nil {
			n += fi.Size()
		}
	}
	return n
}
