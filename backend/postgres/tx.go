package postgres

import (
	"bytes"
	"cmp"
	"context"
	"math"
	"slices"
	"unicode/utf8"

	"github.com/cockroachdb/errors"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/strata-go/strata/backend"
	"github.com/strata-go/strata/backend/internal/placecrc"
)

// A transaction holds one connection of the pool. Its statements go in
// round trips: a read is sent with the BEGIN, if it has not been sent,
// and with the writes made since the last round trip, in one pipeline;
// the commit sends the last writes with the COMMIT. A write's error is
// known at the next round trip, and breaks the transaction: every later
// call returns it, and Update rolls back (or runs fn again, retryable).
//
// A write transaction takes the advisory lock of every session it reads
// or writes (lockKey) before it reads anything of it, and holds it until
// it ends: two writers of one session take turns, and each reads what the
// other committed (READ COMMITTED takes a snapshot per statement, after
// the lock). Locks are taken in increasing key order, which cannot
// deadlock: a lock below one already held is only tried, and when another
// writer holds it the transaction is rolled back and run again with every
// lock it needed taken first, in order.
type tx struct {
	b        *Backend
	ctx      context.Context
	conn     *pgxpool.Conn
	writable bool
	begin    string // the BEGIN statement, until it is sent
	pending  []stmt // writes and locks not yet sent
	broken   error  // a statement failed: the transaction is lost
	sent     bool   // a round trip completed
	sessions map[string]*session

	held map[int64]bool // the session locks this transaction holds
	top  int64          // the greatest of them
	want []int64        // every lock it needed, held or not
}

// stmt is one statement of a round trip: a write (exec checks its
// result), or a read (rows reads its rows).
type stmt struct {
	sql  string
	args []any
	exec func(pgconn.CommandTag) error
	rows func(pgx.Rows) error
	// A write's place, for its errors.
	session, bucket string
	key             []byte
}

var _ backend.Tx = (*tx)(nil)

// Writable implements backend.Tx.
func (t *tx) Writable() bool { return t.writable }

// send runs a round trip: the BEGIN (the first time), the pending writes,
// then reads. The first round trip of a transaction that lost its
// connection runs again on another: nothing of the transaction was run. A
// connection the pool held may have been ended while it was idle (the
// server ended it, or restarted), and so may every other the pool holds:
// it tries one more than the pool holds, the last a new one.
func (t *tx) send(reads ...stmt) error {
	if t.broken != nil {
		return t.broken
	}
	for n := 1; ; n++ {
		err := t.roundTrip(reads, false)
		if err == nil {
			t.begin, t.pending, t.sent = "", t.pending[:0], true
			return nil
		}
		if t.sent || n > int(t.b.pool.Config().MaxConns) || !lost(err) {
			t.broken = err
			return err
		}
		t.conn.Release() // lost: the pool drops it
		conn, aerr := t.b.pool.Acquire(t.ctx)
		if aerr != nil {
			t.conn = nil
			t.broken = errors.Wrapf(aerr, "postgres: %s", t.b.where)
			return t.broken
		}
		t.conn = conn
	}
}

// roundTrip sends the BEGIN if not yet sent, the pending writes, reads,
// and with commit a COMMIT, and reads their results.
func (t *tx) roundTrip(reads []stmt, commit bool) error {
	var batch pgx.Batch
	if t.begin != "" {
		batch.Queue(t.begin)
	}
	for _, s := range t.pending {
		batch.Queue(s.sql, s.args...)
	}
	for _, s := range reads {
		batch.Queue(s.sql, s.args...)
	}
	if commit {
		batch.Queue("COMMIT")
	}
	t.b.trips.Add(1)
	return t.results(t.conn.SendBatch(t.ctx, &batch), reads, commit)
}

// results reads the results of a round trip and closes it. A COMMIT the
// server answered is the transaction's outcome, whatever befalls the
// connection after it (the server may end it at once): the error of the
// close is not the commit's.
func (t *tx) results(br pgx.BatchResults, reads []stmt, commit bool) error {
	err := t.outcome(br, reads, commit)
	if cerr := br.Close(); err == nil && cerr != nil && !commit {
		err = errors.Wrapf(cerr, "postgres: %s", t.b.where)
	}
	return err
}

// outcome reads the results of the statements of a round trip, and of its
// COMMIT. With commit, a failure before the COMMIT's own result leaves the
// commit's outcome unknown — the COMMIT went with the statements before
// it, and the server may have run it — unless the server answered one of
// them with an error (an ERROR rolls the transaction back, and the COMMIT
// is answered with ROLLBACK; after a FATAL the server runs nothing more of
// the connection's) or nothing was sent.
func (t *tx) outcome(br pgx.BatchResults, reads []stmt, commit bool) error {
	answered, err := t.statements(br, reads)
	if !commit {
		return err
	}
	if err != nil {
		if answered || pgconn.SafeToRetry(err) {
			return err
		}
		return errors.Mark(err, ErrCommitUnknown)
	}
	ct, err := br.Exec()
	if err == nil && ct.String() != "COMMIT" {
		return errors.Newf("postgres: %s: COMMIT answered %q: the transaction was rolled back", t.b.where, ct.String())
	}
	if err != nil {
		if refused(err) || pgconn.SafeToRetry(err) {
			return errors.Wrapf(err, "postgres: %s: commit", t.b.where) // not committed
		}
		return errors.Mark(errors.Wrapf(err, "postgres: %s: commit", t.b.where), ErrCommitUnknown)
	}
	return nil
}

// refused reports whether err is an ERROR the server reported for a
// statement: the transaction is rolled back.
func refused(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.SeverityUnlocalized == "ERROR"
}

// serverError reports whether err is an error the server reported.
func serverError(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe)
}

// statements reads the results of the BEGIN (if sent), the pending writes
// and reads; answered says whether the statement that failed was answered
// by the server's error.
func (t *tx) statements(br pgx.BatchResults, reads []stmt) (answered bool, err error) {
	if t.begin != "" {
		if _, err := br.Exec(); err != nil {
			return serverError(err), errors.Wrapf(err, "postgres: %s: begin", t.b.where)
		}
	}
	for i := range t.pending {
		s := &t.pending[i]
		ct, err := br.Exec()
		if err == nil && s.exec != nil {
			err = s.exec(ct)
		}
		if err != nil {
			return serverError(err), t.writeError(s, err)
		}
	}
	for i := range reads {
		s := &reads[i]
		if s.rows == nil {
			if _, err := br.Exec(); err != nil {
				return serverError(err), errors.Wrapf(err, "postgres: %s", t.b.where)
			}
			continue
		}
		rows, err := br.Query()
		if err == nil {
			err = s.rows(rows)
			rows.Close()
		}
		if err == nil {
			err = rows.Err()
		}
		if err != nil {
			return serverError(err), errors.Wrapf(err, "postgres: %s", t.b.where)
		}
	}
	return false, nil
}

// writeError is the error of write s.
func (t *tx) writeError(s *stmt, err error) error {
	if errors.Is(err, backend.ErrCorrupt) {
		return err
	}
	if s.bucket == "lock" {
		return errors.Wrapf(err, "postgres: %s: taking a session's lock", t.b.where)
	}
	if code(err) == "23505" && s.bucket == "l0" {
		return backend.Corrupt(s.session, s.bucket, s.key, errors.Newf("%s: an event is already stored at this seq, past the session's head", eventsTable))
	}
	return errors.Wrapf(err, "postgres: %s: writing session %q %s key %s", t.b.where, s.session, s.bucket, backend.ShowKey(s.key))
}

// commit sends the pending writes and the COMMIT.
func (t *tx) commit() error {
	if t.broken != nil {
		return t.broken
	}
	if t.begin != "" && len(t.pending) == 0 {
		return nil // nothing was sent, nothing written
	}
	if err := t.roundTrip(nil, true); err != nil {
		t.broken = err
		return err
	}
	return nil
}

// end rolls back a transaction not committed — its connection is still in
// it — and returns the connection to the pool (which closes one it could
// not bring back out of it).
func (t *tx) end() {
	if t.conn == nil {
		return
	}
	if c := t.conn.Conn(); !c.IsClosed() && c.PgConn().TxStatus() != 'I' {
		t.b.trips.Add(1)
		_, _ = t.conn.Exec(t.ctx, "ROLLBACK")
	}
	t.conn.Release()
	t.conn = nil
}

// lock returns the statement that takes session id's lock, and whether
// it only tries (ok: a row whose bool says whether it was taken); none
// when the lock is held.
func (t *tx) lock(id string, ok *bool) []stmt {
	k := t.b.lockKey(id)
	t.want = append(t.want, k)
	switch {
	case t.held[k]:
		return nil
	case len(t.held) == 0 || k > t.top:
		t.hold(k)
		return []stmt{{sql: sqlLock, args: []any{k}}}
	}
	*ok = false
	return []stmt{{sql: sqlTryLock, args: []any{k}, rows: func(r pgx.Rows) error {
		*ok = false
		for r.Next() {
			if err := r.Scan(ok); err != nil {
				return err
			}
		}
		return nil
	}}}
}

func (t *tx) hold(k int64) {
	if t.held == nil {
		t.held = map[int64]bool{}
	}
	t.held[k] = true
	t.top = max(t.top, k)
	if len(t.held) == 1 {
		t.top = k
	}
}

// queueLock takes lock k with the first round trip; keys are queued in
// increasing order.
func (t *tx) queueLock(k int64) {
	t.want = append(t.want, k)
	t.hold(k)
	t.pending = append(t.pending, stmt{sql: sqlLock, args: []any{k}, bucket: "lock"})
}

// needed returns every lock the transaction needed, in increasing order.
func (t *tx) needed() []int64 {
	slices.Sort(t.want)
	return slices.Compact(t.want)
}

// Sessions implements backend.Tx: in pages, by id (the COLLATE "C" order
// is byte order).
func (t *tx) Sessions(fn func(id string) error) error {
	after, limit := "", 256
	for {
		var ids []string
		err := t.send(stmt{sql: sqlSessions, args: []any{after, limit}, rows: collect(&ids, scanID)})
		if err != nil {
			return err
		}
		for _, id := range ids {
			if err := fn(id); err != nil {
				return err
			}
		}
		if len(ids) < limit {
			return nil
		}
		after, limit = ids[len(ids)-1], min(limit*2, 4096)
	}
}

// checkID refuses an id PostgreSQL's text cannot hold or an index cannot
// key.
func checkID(id string) error {
	switch {
	case id == "" || len(id) > MaxSessionBytes:
		return errors.Newf("postgres: a session id of %d bytes (1 to %d)", len(id), MaxSessionBytes)
	case !utf8.ValidString(id):
		return errors.Newf("postgres: session id %q is not UTF-8", id)
	}
	for i := 0; i < len(id); i++ {
		if id[i] == 0 {
			return errors.Newf("postgres: session id %q holds a NUL byte", id)
		}
	}
	return nil
}

// Session implements backend.Tx. In a write transaction it first takes
// the session's lock.
func (t *tx) Session(id string) (backend.Session, error) {
	if err := checkID(id); err != nil {
		return nil, err
	}
	if s, ok := t.sessions[id]; ok {
		if s == nil {
			return nil, nil
		}
		return s, nil
	}
	var r sessionRead
	if err := t.send(t.readSession(id, &r)...); err != nil {
		return nil, err
	}
	if err := t.opened(id, &r); err != nil {
		return nil, err
	}
	if s := t.sessions[id]; s != nil {
		return s, nil
	}
	return nil, nil
}

// sessionRead is what the statements of readSession read.
type sessionRead struct {
	taken, found bool
	state        []byte
	crc          *int64
}

// readSession returns the statements that read session id's row into r,
// after taking its lock in a write transaction.
func (t *tx) readSession(id string, r *sessionRead) []stmt {
	var reads []stmt
	r.taken = true
	if t.writable {
		reads = t.lock(id, &r.taken)
	}
	return append(reads, stmt{sql: sqlSession, args: []any{id}, rows: func(rows pgx.Rows) error {
		r.found, r.state, r.crc = false, nil, nil
		for rows.Next() {
			r.found = true
			if err := rows.Scan(&r.state, &r.crc); err != nil {
				return err
			}
		}
		return nil
	}})
}

// opened records session id as readSession read it: the lock held, the
// session (or its absence) known.
func (t *tx) opened(id string, r *sessionRead) error {
	if !r.taken {
		t.broken = errors.Wrapf(errLockOrder, "session %q", id)
		return t.broken
	}
	if t.writable {
		t.hold(t.b.lockKey(id))
	}
	if t.sessions == nil {
		t.sessions = map[string]*session{}
	}
	if !r.found {
		t.sessions[id] = nil
		return nil
	}
	s := t.newSession(id)
	s.state, s.stateCRC = r.state, r.crc
	t.sessions[id] = s
	return nil
}

// Prefetch implements backend.Prefetcher: one round trip takes the lock
// (in a write transaction, in increasing order) and reads the row of every
// session of reads not read yet, then makes every other read. Get, Scan,
// Last and Events answer from what it read, until their table is written.
func (t *tx) Prefetch(reads []backend.Read) error {
	if t.broken != nil {
		return t.broken
	}
	var ids []string
	for _, r := range reads {
		if _, ok := t.sessions[r.Session]; !ok && checkID(r.Session) == nil {
			ids = append(ids, r.Session)
		}
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	if t.writable {
		slices.SortFunc(ids, func(a, b string) int { return cmp.Compare(t.b.lockKey(a), t.b.lockKey(b)) })
	}
	taken := true
	var stmts []stmt
	if t.writable {
		stmts = t.lockAll(ids, &taken)
	}
	rows := map[string]*sessionRead{}
	if len(ids) > 0 {
		stmts = append(stmts, stmt{sql: sqlSessionsIn, args: []any{ids}, rows: func(r pgx.Rows) error {
			clear(rows)
			for r.Next() {
				var id string
				var x sessionRead
				if err := r.Scan(&id, &x.state, &x.crc); err != nil {
					return err
				}
				x.found = true
				rows[id] = &x
			}
			return nil
		}})
	}
	var fs []*fetch
	gets := map[backend.Table]*getMany{}
	seen := map[fetchPlace]bool{}
	for _, r := range reads {
		place := fetchPlace{r.Session, r.Table, string(r.Key), r.Key == nil, r.Scan, r.Last, r.From, r.To}
		if seen[place] {
			continue
		}
		seen[place] = true
		f, st, ok := t.fetch(r)
		switch {
		case !ok:
			continue
		case st.sql == "": // a record: with the others of its table
			g := gets[r.Table]
			if g == nil {
				g = &getMany{t: r.Table}
				gets[r.Table] = g
			}
			g.add(f)
		default:
			stmts = append(stmts, st)
		}
		fs = append(fs, f)
	}
	for tb := backend.Table(1); tb < backend.Tables; tb++ {
		if g := gets[tb]; g != nil {
			stmts = append(stmts, g.stmt())
		}
	}
	if len(stmts) == 0 {
		return nil
	}
	if err := t.send(stmts...); err != nil {
		return err
	}
	for _, id := range ids {
		r := rows[id]
		if r == nil {
			r = &sessionRead{}
		}
		r.taken = taken
		if err := t.opened(id, r); err != nil {
			return err
		}
	}
	for _, f := range fs {
		if s := t.sessions[f.Session]; s != nil {
			s.keep(f)
		}
	}
	return nil
}

// lockAll returns the statements that take the locks of ids, in
// increasing key order (as lock does, one statement for those it waits
// for and one for those it only tries), and sets *taken to whether every
// lock tried was taken.
func (t *tx) lockAll(ids []string, taken *bool) []stmt {
	var tries, waits []int64
	for _, id := range ids {
		k := t.b.lockKey(id)
		t.want = append(t.want, k)
		switch {
		case t.held[k]:
		case len(t.held) == 0 || k > t.top:
			t.hold(k)
			waits = append(waits, k)
		default:
			tries = append(tries, k) // held once the round trip says so (opened)
		}
	}
	var stmts []stmt
	if len(tries) > 0 {
		stmts = append(stmts, stmt{sql: sqlTryLocks, args: []any{tries}, rows: func(r pgx.Rows) error {
			*taken = false
			for r.Next() {
				if err := r.Scan(taken); err != nil {
					return err
				}
			}
			return nil
		}})
	}
	if len(waits) > 0 {
		stmts = append(stmts, stmt{sql: sqlLocks, args: []any{waits}, rows: func(r pgx.Rows) error {
			for r.Next() {
			}
			return nil
		}})
	}
	return stmts
}

// getMany is one statement reading the records of table t that fetches
// name.
type getMany struct {
	t         backend.Table
	sessions  []string
	keys      [][]byte
	bySession map[string][]*fetch
}

func (g *getMany) add(f *fetch) {
	g.sessions = append(g.sessions, f.Session)
	g.keys = append(g.keys, f.Key)
	if g.bySession == nil {
		g.bySession = map[string][]*fetch{}
	}
	g.bySession[f.Session] = append(g.bySession[f.Session], f)
}

// stmt returns the statement, which marks each fetch found or not.
func (g *getMany) stmt() stmt {
	_, q, _ := tableOf(g.t)
	return stmt{sql: q.getMany, args: []any{g.sessions, g.keys}, rows: func(r pgx.Rows) error {
		for _, fs := range g.bySession {
			for _, f := range fs {
				f.found = false
			}
		}
		for r.Next() {
			var session string
			var x row
			if err := r.Scan(&session, &x.key, &x.v, &x.crc); err != nil {
				return err
			}
			for _, f := range g.bySession[session] {
				if bytes.Equal(f.Key, x.key) {
					f.found, f.x = true, x
				}
			}
		}
		return nil
	}}
}

// fetchPlace tells two Reads apart.
type fetchPlace struct {
	session    string
	t          backend.Table
	key        string
	nilKey     bool
	scan, last bool
	from, to   uint64
}

// fetch is a read of Prefetch other than a session's row, and what it read.
type fetch struct {
	backend.Read
	found bool
	x     row   // a record
	page  []row // a first page
}

// fetch returns the statement of read r — none for a record, read with
// the others of its table (getMany) — or false when it reads nothing: it
// reads only a session, one known to be absent, or something its call
// refuses or a Prefetch has read already (and no write has changed since).
func (t *tx) fetch(r backend.Read) (*fetch, stmt, bool) {
	s, known := t.sessions[r.Session]
	if r.Table == 0 && (r.From == 0 || r.To < r.From) || known && s == nil || checkID(r.Session) != nil {
		return nil, stmt{}, false
	}
	f := &fetch{Read: r}
	held := func(k pageKey) bool {
		if !known {
			return false
		}
		_, ok := s.pages[k]
		return ok
	}
	if r.Table == 0 {
		f.To = min(r.To, math.MaxInt64)
		if held(eventsKey(f.From, f.To)) {
			return nil, stmt{}, false
		}
		return f, eventsStmt(r.Session, f.From, f.To, eventsPage, &f.page), true
	}
	_, q, err := tableOf(r.Table)
	if err != nil || len(r.Key) > MaxKeyBytes || known && !r.Scan && !r.Last && s.holds(r.Table, r.Key) {
		return nil, stmt{}, false
	}
	switch {
	case r.Last:
		if held(lastKey(r.Table, r.Key)) {
			return nil, stmt{}, false
		}
		return f, lastStmt(q, r.Session, r.Key, &f.page), true // a nil Key: below nothing
	case r.Scan:
		f.Key = nonNil(r.Key)
		if held(scanKey(r.Table, f.Key)) {
			return nil, stmt{}, false
		}
		return f, scanStmt(q, r.Session, f.Key, scanPage, &f.page), true
	}
	f.Key = nonNil(r.Key)
	return f, stmt{}, true // read with the others of its table (getMany)
}

// keep records what f read, for the calls that ask for it.
func (s *session) keep(f *fetch) {
	switch {
	case f.Table == 0:
		s.keepPage(eventsKey(f.From, f.To), f.page)
	case f.Last:
		s.keepPage(lastKey(f.Table, f.Key), f.page)
	case f.Scan:
		s.keepPage(scanKey(f.Table, f.Key), f.page)
	case !s.holds(f.Table, f.Key):
		if s.fetched == nil {
			s.fetched = map[fetchKey]*row{}
		}
		var v *row
		if f.found {
			v = &f.x
		}
		s.fetched[fetchKey{f.Table, string(f.Key)}] = v
	}
}

// CreateSession implements backend.Tx.
func (t *tx) CreateSession(id string) (backend.Session, error) {
	if err := checkID(id); err != nil {
		return nil, err
	}
	if !t.writable {
		return nil, errors.Wrap(backend.ErrReadOnly, "postgres: CreateSession in a read transaction")
	}
	s, err := t.Session(id)
	if err != nil {
		return nil, err
	}
	if s != nil {
		return nil, errors.Newf("postgres: session %q exists", id)
	}
	t.pending = append(t.pending, stmt{sql: sqlCreate, args: []any{id}, session: id, bucket: "bucket"})
	n := t.newSession(id)
	t.sessions[id] = n
	return n, nil
}

func (t *tx) newSession(id string) *session {
	return &session{t: t, id: id, crc: placecrc.Session(id)}
}

// session is one session's records inside a transaction.
type session struct {
	t        *tx
	id       string
	crc      uint32 // placecrc.Session(id)
	state    []byte // as read with the session, or as last put
	stateCRC *int64
	fetched  map[fetchKey]*row // records Prefetch read (nil: none), not written since
	pages    map[pageKey][]row // first pages of reads Prefetch made, their table not written since
}

// fetchKey is the place of a record Prefetch read.
type fetchKey struct {
	t   backend.Table
	key string
}

// pageKey names the first page of a read of rows: of Scan of table t from
// key, of Last of table t below key (to 1; to 0: below nothing), or of
// Events (t 0) from seq key to seq to.
type pageKey struct {
	op  byte // 's' Scan, 'l' Last, 'e' Events
	t   backend.Table
	key string
	to  uint64
}

// eventsKey is the pageKey of Events from seq from to seq to.
func eventsKey(from, to uint64) pageKey {
	return pageKey{op: 'e', key: string(seqKey(from)), to: to}
}

// scanKey is the pageKey of Scan of table t from key from.
func scanKey(t backend.Table, from []byte) pageKey {
	return pageKey{op: 's', t: t, key: string(from)}
}

// lastKey is the pageKey of Last of table t below below.
func lastKey(t backend.Table, below []byte) pageKey {
	if below == nil {
		return pageKey{op: 'l', t: t}
	}
	return pageKey{op: 'l', t: t, key: string(below), to: 1}
}

// The first page of a paged read, in rows.
const (
	eventsPage = 256
	scanPage   = 32
)

func (s *session) keepPage(k pageKey, page []row) {
	if s.pages == nil {
		s.pages = map[pageKey][]row{}
	}
	s.pages[k] = page
}

// firstPage returns into *page the first page of read k if Prefetch read
// it, and whether it did.
func (s *session) firstPage(k pageKey, page *[]row) bool {
	p, ok := s.pages[k]
	if ok {
		*page = append((*page)[:0], p...)
	}
	return ok
}

// wrote forgets what Prefetch read of table t (0: the events) and, for a
// record, at key.
func (s *session) wrote(t backend.Table, key []byte) {
	delete(s.fetched, fetchKey{t, string(key)})
	for k := range s.pages {
		if k.t == t {
			delete(s.pages, k)
		}
	}
}

// holds reports whether Prefetch read the record at key of table t.
func (s *session) holds(t backend.Table, key []byte) bool {
	_, ok := s.fetched[fetchKey{t, string(key)}]
	return ok
}

var _ backend.Session = (*session)(nil)

// ID implements backend.Session.
func (s *session) ID() string { return s.id }

// damage returns the error of damage at key of bucket (as the store names
// it: a table, "l0", "state"), found in SQL table table.
func damage(session, table, bucket string, key []byte, err error) error {
	return backend.Corrupt(session, bucket, key, errors.Wrapf(err, "%s", table))
}

func (s *session) writable() error {
	if s.t.broken != nil {
		return s.t.broken
	}
	if !s.t.writable {
		return errors.Wrapf(backend.ErrReadOnly, "postgres: session %q: a write in a read transaction", s.id)
	}
	return nil
}

// State implements backend.Session.
func (s *session) State() ([]byte, error) {
	if s.t.broken != nil {
		return nil, s.t.broken
	}
	switch {
	case s.state == nil && s.stateCRC == nil:
		return nil, nil
	case s.stateCRC == nil:
		return nil, damage(s.id, sessionsTable, "state", nil, errors.New("a state without its checksum"))
	case s.state == nil:
		return nil, damage(s.id, sessionsTable, "state", nil, errors.New("a checksum without its state"))
	}
	if err := checkSum(placeCRC(s.crc, sessionsTable, nil), s.state, *s.stateCRC); err != nil {
		return nil, damage(s.id, sessionsTable, "state", nil, err)
	}
	return s.state, nil
}

// PutState implements backend.Session.
func (s *session) PutState(v []byte) error {
	if err := s.writable(); err != nil {
		return err
	}
	v = nonNil(v)
	crc := checksum(placeCRC(s.crc, sessionsTable, nil), v)
	s.t.pending = append(s.t.pending, stmt{sql: sqlPutState, args: []any{s.id, v, crc}, session: s.id, bucket: "state",
		exec: func(ct pgconn.CommandTag) error {
			if ct.RowsAffected() != 1 {
				return damage(s.id, sessionsTable, "state", nil, errors.New("the session's row is missing"))
			}
			return nil
		}})
	s.state, s.stateCRC = v, &crc
	return nil
}

func nonNil(v []byte) []byte {
	if v == nil {
		return []byte{}
	}
	return v
}

// Event implements backend.Session.
func (s *session) Event(seq uint64) ([]byte, error) {
	if seq == 0 || seq > math.MaxInt64 {
		return nil, nil
	}
	var x row
	found := false
	err := s.t.send(stmt{sql: sqlEvent, args: []any{s.id, int64(seq)}, rows: readOne(&found, &x)})
	if err != nil || !found {
		return nil, err
	}
	key := seqKey(seq)
	if err := checkSum(placeCRC(s.crc, eventsTable, key), x.v, x.crc); err != nil {
		return nil, damage(s.id, eventsTable, "l0", key, err)
	}
	return x.v, nil
}

// row is a row read: a key (or a seq), its value and checksum.
type row struct {
	seq int64
	key []byte
	v   []byte
	crc int64
}

// Events implements backend.Session: in pages of growing size.
func (s *session) Events(from, to uint64, fn func(seq uint64, v []byte) (bool, error)) error {
	from, to = max(from, 1), min(to, math.MaxInt64)
	limit := eventsPage
	var page []row
	for first := true; from <= to; first = false {
		if !first || !s.firstPage(eventsKey(from, to), &page) {
			if err := s.t.send(eventsStmt(s.id, from, to, limit, &page)); err != nil {
				return err
			}
		}
		for _, x := range page {
			key := seqKey(uint64(x.seq))
			if err := checkSum(placeCRC(s.crc, eventsTable, key), x.v, x.crc); err != nil {
				return damage(s.id, eventsTable, "l0", key, err)
			}
			if more, err := fn(uint64(x.seq), x.v); err != nil || !more {
				return err
			}
		}
		if len(page) < limit {
			return nil
		}
		from, limit = uint64(page[len(page)-1].seq)+1, min(limit*2, 4096)
	}
	return nil
}

// eventsStmt is the statement of a page of session's events from seq from
// to seq to (both at most 2^63-1), at most limit of them, reading their
// (seq, value, crc) rows into *page.
func eventsStmt(session string, from, to uint64, limit int, page *[]row) stmt {
	return stmt{sql: sqlEvents, args: []any{session, int64(from), int64(to), limit},
		rows: collect(page, func(r pgx.Rows, x *row) error { return r.Scan(&x.seq, &x.v, &x.crc) })}
}

// PutEvent implements backend.Session.
func (s *session) PutEvent(seq uint64, v []byte) error {
	if err := s.writable(); err != nil {
		return err
	}
	if seq == 0 || seq > math.MaxInt64 {
		return errors.Newf("postgres: session %q: event seq %d (1 to 2^63-1)", s.id, seq)
	}
	v = nonNil(v)
	key := seqKey(seq)
	s.wrote(0, nil)
	s.t.pending = append(s.t.pending, stmt{sql: sqlPutEvent,
		args:    []any{s.id, int64(seq), v, checksum(placeCRC(s.crc, eventsTable, key), v)},
		session: s.id, bucket: "l0", key: key})
	return nil
}

// tableOf returns the SQL table and statements of t.
func tableOf(t backend.Table) (recordTable, *tableSQL, error) {
	if t == 0 || t >= backend.Tables || recordTables[t].name == "" {
		return recordTable{}, nil, errors.AssertionFailedf("postgres: table %d has no SQL table", t)
	}
	return recordTables[t], &recordSQL[t], nil
}

// record returns the value of row x of table rt, checked.
func (s *session) record(rt recordTable, t backend.Table, x *row) ([]byte, error) {
	if err := checkSum(placeCRC(s.crc, rt.name, x.key), x.v, x.crc); err != nil {
		return nil, damage(s.id, rt.name, t.String(), x.key, err)
	}
	return x.v, nil
}

// collect returns a rows handler that empties *page and appends to it
// every row, each read by scan into a zero T.
func collect[T any](page *[]T, scan func(pgx.Rows, *T) error) func(pgx.Rows) error {
	return func(r pgx.Rows) error {
		*page = (*page)[:0]
		for r.Next() {
			var x T
			if err := scan(r, &x); err != nil {
				return err
			}
			*page = append(*page, x)
		}
		return nil
	}
}

// scanID reads a row of one column, a session id.
func scanID(r pgx.Rows, id *string) error { return r.Scan(id) }

// readRows returns a rows handler that reads (key, value, crc) rows into
// *page.
func readRows(page *[]row) func(pgx.Rows) error {
	return collect(page, func(r pgx.Rows, x *row) error { return r.Scan(&x.key, &x.v, &x.crc) })
}

// Get implements backend.Session.
func (s *session) Get(t backend.Table, key []byte) ([]byte, error) {
	rt, q, err := tableOf(t)
	if err != nil {
		return nil, err
	}
	key = nonNil(key)
	x, ok := s.fetched[fetchKey{t, string(key)}]
	if !ok {
		x = &row{}
		found := false
		if err := s.t.send(stmt{sql: q.get, args: []any{s.id, key}, rows: readOne(&found, x)}); err != nil {
			return nil, err
		}
		if !found {
			x = nil
		}
	}
	if x == nil {
		return nil, nil
	}
	x.key = key
	return s.record(rt, t, x)
}

// readOne returns a rows handler that reads a (value, crc) row into x,
// and whether there was one into *found.
func readOne(found *bool, x *row) func(pgx.Rows) error {
	return func(r pgx.Rows) error {
		*found = false
		for r.Next() {
			*found = true
			if err := r.Scan(&x.v, &x.crc); err != nil {
				return err
			}
		}
		return nil
	}
}

// Put implements backend.Session.
func (s *session) Put(t backend.Table, key, v []byte) error {
	rt, q, err := tableOf(t)
	if err != nil {
		return err
	}
	if err := s.writable(); err != nil {
		return err
	}
	if len(key) > MaxKeyBytes {
		return errors.Newf("postgres: session %q %s: a key of %d bytes (at most %d)", s.id, t, len(key), MaxKeyBytes)
	}
	key, v = nonNil(key), nonNil(v)
	s.wrote(t, key)
	s.t.pending = append(s.t.pending, stmt{sql: q.put, args: []any{s.id, key, v, checksum(placeCRC(s.crc, rt.name, key), v)},
		session: s.id, bucket: t.String(), key: key})
	return nil
}

// Delete implements backend.Session.
func (s *session) Delete(t backend.Table, key []byte) error {
	_, q, err := tableOf(t)
	if err != nil {
		return err
	}
	if err := s.writable(); err != nil {
		return err
	}
	key = nonNil(key)
	s.wrote(t, key)
	s.t.pending = append(s.t.pending, stmt{sql: q.del, args: []any{s.id, key}, session: s.id, bucket: t.String(), key: key})
	return nil
}

// Scan implements backend.Session: in pages of growing size.
func (s *session) Scan(t backend.Table, from []byte, fn func(k, v []byte) (bool, error)) error {
	rt, q, err := tableOf(t)
	if err != nil {
		return err
	}
	from = nonNil(from)
	limit := scanPage
	var page []row
	for first := true; ; first = false {
		if !first || !s.firstPage(scanKey(t, from), &page) {
			if err := s.t.send(scanStmt(q, s.id, from, limit, &page)); err != nil {
				return err
			}
		}
		for i := range page {
			v, err := s.record(rt, t, &page[i])
			if err != nil {
				return err
			}
			if more, err := fn(page[i].key, v); err != nil || !more {
				return err
			}
		}
		if len(page) < limit {
			return nil
		}
		// The least key after the page's last.
		last := page[len(page)-1].key
		from, limit = append(last[:len(last):len(last)], 0), min(limit*4, 1024)
	}
}

// scanStmt is the statement of a page of Scan of q's table from key from,
// at most limit rows, reading them into *page.
func scanStmt(q *tableSQL, session string, from []byte, limit int, page *[]row) stmt {
	return stmt{sql: q.scan, args: []any{session, from, limit}, rows: readRows(page)}
}

// lastStmt is the statement of Last of q's table below below, reading its
// row into *page.
func lastStmt(q *tableSQL, session string, below []byte, page *[]row) stmt {
	if below == nil {
		return stmt{sql: q.last, args: []any{session}, rows: readRows(page)}
	}
	return stmt{sql: q.lastBelow, args: []any{session, below}, rows: readRows(page)}
}

// Last implements backend.Session.
func (s *session) Last(t backend.Table, below []byte) (k, v []byte, err error) {
	rt, q, err := tableOf(t)
	if err != nil {
		return nil, nil, err
	}
	var page []row
	if !s.firstPage(lastKey(t, below), &page) {
		if err := s.t.send(lastStmt(q, s.id, below, &page)); err != nil {
			return nil, nil, err
		}
	}
	if len(page) == 0 {
		return nil, nil, nil
	}
	if v, err = s.record(rt, t, &page[0]); err != nil {
		return nil, nil, err
	}
	return page[0].key, v, nil
}

var _ backend.SessionDeleter = (*tx)(nil)

// DeleteSession implements backend.SessionDeleter: the session's rows of
// every table, its events and its row, under its lock, in this
// transaction. PostgreSQL's own VACUUM gives the space back.
func (t *tx) DeleteSession(id string) error {
	if !t.writable {
		return errors.Wrap(backend.ErrReadOnly, "postgres: DeleteSession in a read transaction")
	}
	s, err := t.Session(id) // takes the session's lock
	if err != nil || s == nil {
		return err
	}
	for tb := backend.Table(1); tb < backend.Tables; tb++ {
		t.pending = append(t.pending, stmt{sql: `DELETE FROM ` + recordTables[tb].name + ` WHERE session = $1`,
			args: []any{id}, session: id, bucket: tb.String()})
	}
	t.pending = append(t.pending,
		stmt{sql: `DELETE FROM ` + eventsTable + ` WHERE session = $1`, args: []any{id}, session: id, bucket: "l0"},
		stmt{sql: `DELETE FROM ` + sessionsTable + ` WHERE id = $1`, args: []any{id}, session: id, bucket: "bucket"})
	t.sessions[id] = nil
	return nil
}
