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
	if err := c.events(); err != nil {
		return true, err
	}
	for tb := backend.Table(1); tb < backend.Tables; tb++ {
		if err := c.records(tb); err != nil {
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

func (c *checker) events() error {
	if err := c.orphans(eventsTable); err != nil {
		return err
	}
	session, seq := "", int64(0)
	for {
		type erow struct {
			session string
			row
		}
		var page []erow
		err := c.t.send(stmt{sql: `SELECT session, seq, value, crc FROM ` + eventsTable + `
			WHERE (session, seq) > ($1, $2) ORDER BY session, seq LIMIT $3`,
			args: []any{session, seq, checkPage}, rows: collect(&page, func(r pgx.Rows, x *erow) error {
				return r.Scan(&x.session, &x.seq, &x.v, &x.crc)
			})})
		if err != nil {
			return err
		}
		for _, x := range page {
			key := seqKey(uint64(x.seq))
			if err := checkSum(placeCRC(placecrc.Session(x.session), eventsTable, key), x.v, x.crc); err != nil {
				c.damaged(x.session, eventsTable, "l0", key, err)
			}
		}
		if len(page) < checkPage {
			return nil
		}
		last := page[len(page)-1]
		session, seq = last.session, last.seq
	}
}

func (c *checker) records(tb backend.Table) error {
	rt := recordTables[tb]
	if err := c.orphans(rt.name); err != nil {
		return err
	}
	session, key := "", []byte{}
	for {
		type krow struct {
			session string
			row
		}
		var page []krow
		err := c.t.send(stmt{sql: `SELECT session, key, value, crc FROM ` + rt.name + `
			WHERE (session, key) > ($1, $2) ORDER BY session, key LIMIT $3`,
			args: []any{session, key, checkPage}, rows: collect(&page, func(r pgx.Rows, x *krow) error {
				return r.Scan(&x.session, &x.key, &x.v, &x.crc)
			})})
		if err != nil {
			return err
		}
		for _, x := range page {
			if err := checkSum(placeCRC(placecrc.Session(x.session), rt.name, x.key), x.v, x.crc); err != nil {
				c.damaged(x.session, rt.name, tb.String(), x.key, err)
			}
		}
		if len(page) < checkPage {
			return nil
		}
		last := page[len(page)-1]
		session, key = last.session, last.key
	}
}
