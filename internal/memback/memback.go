// Package memback is a backend.Backend in memory: the reference the
// conformance suite (package storetest) is checked against besides bbolt,
// so that what the suite states is the protocol's, not one backend's. It
// keeps nothing after Close and is for tests only.
package memback

import (
	"bytes"
	"slices"
	"sort"
	"sync"

	"github.com/cockroachdb/errors"

	"github.com/strata-go/strata/backend"
)

// Backend is an in-memory backend. Write transactions copy the state they
// change and publish it on commit, so readers see a consistent state.
type Backend struct {
	mu     sync.RWMutex // held for writing by a write transaction
	cur    *state
	closed bool
}

type state struct {
	sessions map[string]*session
}

type session struct {
	state  []byte
	events [][]byte // events[seq-1-base]
	base   uint64   // the seq before the first stored: a fork's log starts past its fork point
	tables [backend.Tables]map[string][]byte
}

// New returns an empty backend.
func New() *Backend { return &Backend{cur: &state{sessions: map[string]*session{}}} }

// View implements backend.Backend.
func (b *Backend) View(fn func(backend.Tx) error) error {
	b.mu.RLock()
	s := b.cur
	closed := b.closed
	b.mu.RUnlock()
	if closed {
		return errors.New("memback: closed")
	}
	return fn(&tx{s: s})
}

// Update implements backend.Backend.
func (b *Backend) Update(fn func(backend.Tx) error) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return errors.New("memback: closed")
	}
	next := &state{sessions: make(map[string]*session, len(b.cur.sessions))}
	for id, s := range b.cur.sessions {
		next.sessions[id] = s
	}
	t := &tx{s: next, writable: true, copied: map[string]bool{}}
	if err := fn(t); err != nil {
		return err
	}
	b.cur = next
	return nil
}

// Close implements backend.Backend.
func (b *Backend) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	return nil
}

type tx struct {
	s        *state
	writable bool
	copied   map[string]bool // sessions this write transaction owns a copy of
}

func (t *tx) Writable() bool { return t.writable }

func (t *tx) Sessions(fn func(string) error) error {
	ids := make([]string, 0, len(t.s.sessions))
	for id := range t.s.sessions {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		if err := fn(id); err != nil {
			return err
		}
	}
	return nil
}

func (t *tx) Session(id string) (backend.Session, error) {
	s := t.s.sessions[id]
	if s == nil {
		return nil, nil
	}
	if t.writable && !t.copied[id] {
		c := &session{state: s.state, events: slices.Clip(s.events), base: s.base}
		for i := range s.tables {
			if s.tables[i] != nil {
				c.tables[i] = make(map[string][]byte, len(s.tables[i]))
				for k, v := range s.tables[i] {
					c.tables[i][k] = v
				}
			}
		}
		t.s.sessions[id], t.copied[id] = c, true
		s = c
	}
	return &sess{id: id, s: s, writable: t.writable}, nil
}

func (t *tx) CreateSession(id string) (backend.Session, error) {
	if !t.writable {
		return nil, backend.ErrReadOnly
	}
	if t.s.sessions[id] != nil {
		return nil, errors.Newf("memback: session %q exists", id)
	}
	s := &session{}
	t.s.sessions[id], t.copied[id] = s, true
	return &sess{id: id, s: s, writable: true}, nil
}

var _ backend.SessionDeleter = (*tx)(nil)

// DeleteSession implements backend.SessionDeleter.
func (t *tx) DeleteSession(id string) error {
	if !t.writable {
		return backend.ErrReadOnly
	}
	delete(t.s.sessions, id)
	delete(t.copied, id)
	return nil
}

type sess struct {
	id       string
	s        *session
	writable bool
}

func (s *sess) ID() string { return s.id }

func (s *sess) State() ([]byte, error) { return s.s.state, nil }

func (s *sess) PutState(v []byte) error {
	if !s.writable {
		return backend.ErrReadOnly
	}
	s.s.state = bytes.Clone(v)
	return nil
}

func (s *sess) Event(seq uint64) ([]byte, error) {
	if seq <= s.s.base || seq > s.s.base+uint64(len(s.s.events)) {
		return nil, nil
	}
	return s.s.events[seq-1-s.s.base], nil
}

func (s *sess) Events(from, to uint64, fn func(uint64, []byte) (bool, error)) error {
	from = max(from, s.s.base+1)
	for seq := from; seq <= to && seq <= s.s.base+uint64(len(s.s.events)); seq++ {
		if more, err := fn(seq, s.s.events[seq-1-s.s.base]); err != nil || !more {
			return err
		}
	}
	return nil
}

func (s *sess) PutEvent(seq uint64, v []byte) error {
	if !s.writable {
		return backend.ErrReadOnly
	}
	if len(s.s.events) == 0 && seq > 0 {
		s.s.base = seq - 1
	}
	if seq != s.s.base+uint64(len(s.s.events))+1 {
		return errors.Newf("memback: event %d after %d", seq, s.s.base+uint64(len(s.s.events)))
	}
	s.s.events = append(s.s.events, bytes.Clone(v))
	return nil
}

func (s *sess) table(t backend.Table) map[string][]byte {
	if s.s.tables[t] == nil {
		s.s.tables[t] = map[string][]byte{}
	}
	return s.s.tables[t]
}

func (s *sess) Get(t backend.Table, key []byte) ([]byte, error) {
	return s.s.tables[t][string(key)], nil
}

func (s *sess) Put(t backend.Table, key, v []byte) error {
	if !s.writable {
		return backend.ErrReadOnly
	}
	s.table(t)[string(key)] = bytes.Clone(v)
	return nil
}

func (s *sess) Delete(t backend.Table, key []byte) error {
	if !s.writable {
		return backend.ErrReadOnly
	}
	delete(s.table(t), string(key))
	return nil
}

func (s *sess) keys(t backend.Table) []string {
	keys := make([]string, 0, len(s.s.tables[t]))
	for k := range s.s.tables[t] {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func (s *sess) Scan(t backend.Table, from []byte, fn func(k, v []byte) (bool, error)) error {
	for _, k := range s.keys(t) {
		if k < string(from) {
			continue
		}
		if more, err := fn([]byte(k), s.s.tables[t][k]); err != nil || !more {
			return err
		}
	}
	return nil
}

func (s *sess) Last(t backend.Table, below []byte) (k, v []byte, err error) {
	keys := s.keys(t)
	for i := len(keys) - 1; i >= 0; i-- {
		if below == nil || keys[i] < string(below) {
			return []byte(keys[i]), s.s.tables[t][keys[i]], nil
		}
	}
	return nil, nil, nil
}

// Reopen returns a new backend holding what b committed, as a later
// process would find it; b may be closed.
func (b *Backend) Reopen() *Backend {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return &Backend{cur: b.cur}
}
