package postgres

import (
	"fmt"

	"github.com/cockroachdb/errors"
	"github.com/jackc/pgx/v5"

	"github.com/strata-go/strata/backend"
	"github.com/strata-go/strata/backend/internal/placecrc"
)

// maxProblems bounds the problems Check reports per session: a badly
// damaged one would otherwise report one per row.
const maxProblems = 100

// Check implements backend.Checker: what the store's reads cannot see, in
// the snapshot of btx.
//
//   - the schema's version is SchemaVersion;
//   - every row of every table has the checksum of its value at its place
//     — the rows the store reads too, which it finds damaged as well, and
//     any it does not read;
//   - no table holds rows of a session that has no row in
//     strata_sessions: they are invisible to every read, and to Verify.
//
// safe is false when the sessions cannot be listed.
func (b *Backend) Check(btx backend.Tx, problem func(session, what string)) (safe bool, err error) {
	t, ok := btx.(*tx)
	if !ok || t.b != b {
		return false, errors.Newf("postgres: Check of a transaction of another backend (%T)", btx)
	}
	var v *int32
	if err := t.send(stmt{sql: sqlVersion, rows: func(r pgx.Rows) error {
		for r.Next() {
			if err := r.Scan(&v); err != nil {
				return err
			}
		}
		return nil
	}}); err != nil {
		return false, err
	}
	if v == nil || int(*v) != SchemaVersion {
		got := "none"
		if v != nil {
			got = fmt.Sprint(*v)
		}
		problem("", fmt.Sprintf("%s: schema version %s, this strata's is %d", versionTable, got, SchemaVersion))
	}
	c := &checker{t: t, problem: problem, count: map[string]int{}}
	if err := c.sessions(); err != nil {
		return false, err
	}
	if err := checkRows(c, eventsTable, "seq", "l0", int64(0), func(seq int64) []byte { return seqKey(uint64(seq)) }); err != nil {
		return true, err
	}
	for tb := backend.Table(1); tb < backend.Tables; tb++ {
		if err := checkRows(c, recordTables[tb].name, "key", tb.String(), []byte{}, func(k []byte) []byte { return k }); err != nil {
			return true, err
		}
	}
	return true, nil
}

type checker struct {
	t       *tx
	problem func(session, what string)
	count   map[string]int // problems reported, by session
}

func (c *checker) report(session, what string) {
	n := c.count[session]
	c.count[session] = n + 1
	switch {
	case n < maxProblems:
		c.problem(session, what)
	case n == maxProblems:
		c.problem(session, "more problems not shown")
	}
}

// damaged reports damage at a place, as a read of it says it.
func (c *checker) damaged(session, table, bucket string, key []byte, err error) {
	c.report(session, damage(session, table, bucket, key, err).Error())
}

// checkPage is the number of rows Check reads per round trip.
const checkPage = 1024

func (c *checker) sessions() error {
	after := ""
	for {
		type srow struct {
			id    string
			state []byte
			crc   *int64
		}
		var page []srow
		err := c.t.send(stmt{sql: `SELECT id, state, state_crc FROM ` + sessionsTable + ` WHERE id > $1 ORDER BY id LIMIT $2`,
			args: []any{after, checkPage}, rows: collect(&page, func(r pgx.Rows, x *srow) error {
				return r.Scan(&x.id, &x.state, &x.crc)
			})})
		if err != nil {
			return err
		}
		for _, x := range page {
			s := c.t.newSession(x.id)
			s.state, s.stateCRC = x.state, x.crc
			if _, err := s.State(); err != nil {
				c.report(x.id, err.Error())
			}
		}
		if len(page) < checkPage {
			return nil
		}
		after = page[len(page)-1].id
	}
}

// orphans reports the sessions of table that have no session row.
func (c *checker) orphans(table string) error {
	var ids []string
	err := c.t.send(stmt{sql: `SELECT DISTINCT t.session FROM ` + table + ` t
		WHERE NOT EXISTS (SELECT 1 FROM ` + sessionsTable + ` s WHERE s.id = t.session) ORDER BY 1`,
		rows: collect(&ids, scanID)})
	if err != nil {
		return err
	}
	for _, id := range ids {
		c.report(id, fmt.Sprintf("%s holds rows of session %q, which has no row in %s", table, id, sessionsTable))
	}
	return nil
}

// checkRows checks every row of SQL table, in pages in the order of its
// primary key (session, col): its checksum at its place — the place's key
// is place of the row's key column col, least below every key — and
// reports a damaged one as a read of bucket (as the store names it) would.
// It reports first the sessions of the table that have no session row.
func checkRows[K any](c *checker, table, col, bucket string, least K, place func(K) []byte) error {
	if err := c.orphans(table); err != nil {
		return err
	}
	type crow struct {
		session string
		key     K
		v       []byte
		crc     int64
	}
	session, after := "", least
	for {
		var page []crow
		err := c.t.send(stmt{sql: `SELECT session, ` + col + `, value, crc FROM ` + table + `
			WHERE (session, ` + col + `) > ($1, $2) ORDER BY session, ` + col + ` LIMIT $3`,
			args: []any{session, after, checkPage}, rows: collect(&page, func(r pgx.Rows, x *crow) error {
				return r.Scan(&x.session, &x.key, &x.v, &x.crc)
			})})
		if err != nil {
			return err
		}
		for _, x := range page {
			key := place(x.key)
			if err := checkSum(placeCRC(placecrc.Session(x.session), table, key), x.v, x.crc); err != nil {
				c.damaged(x.session, table, bucket, key, err)
			}
		}
		if len(page) < checkPage {
			return nil
		}
		last := page[len(page)-1]
		session, after = last.session, last.key
	}
}
