package debughttp

import (
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/cockroachdb/errors"

	"github.com/strata-go/strata/internal/errmark"
	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/tier"
)

// The events endpoint's window: DefaultEvents events when the request says
// no limit, MaxEvents at most; each text clipped to DefaultClip bytes
// unless the request says otherwise (clip=0: whole).
const (
	DefaultEvents = 100
	MaxEvents     = 1000
	DefaultClip   = 2048
)

// sessionParam returns the required, well-formed session parameter.
func sessionParam(q url.Values) (string, error) {
	id := q.Get("session")
	if id == "" {
		return "", &ParamError{Param: "session", Value: id, Why: "required"}
	}
	if err := store.CheckSession(id); err != nil {
		return "", errmark.Mark(errors.Wrap(err, "session"), ErrBadRequest)
	}
	return id, nil
}

// uintParam returns parameter name as a number ≥ least, or def when absent.
func uintParam(q url.Values, name string, def, least uint64, what string) (uint64, error) {
	if !q.Has(name) {
		return def, nil
	}
	v := q.Get(name)
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil || n < least {
		return 0, &ParamError{Param: name, Value: v, Why: "not " + what}
	}
	return n, nil
}

// boolParam returns parameter name as a boolean, false when absent.
func boolParam(q url.Values, name string) (bool, error) {
	if !q.Has(name) {
		return false, nil
	}
	v := q.Get(name)
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, &ParamError{Param: name, Value: v, Why: "not 1, 0, true or false"}
	}
	return b, nil
}

// sessionListDoc is the JSON of {prefix}/sessions.
type sessionListDoc struct {
	Sessions []sessionItem `json:"sessions"`
}

// sessionItem is one session of the list: its info, the times of its first
// and last events and how many calls and resources are open at its head;
// of a damaged session, its id and damage alone.
type sessionItem struct {
	listed
	*activity
}

// activity is what the list shows of a session beside its info: the times
// of its first and last events ("" when they carry none) and how many calls
// and resources are open at its head.
type activity struct {
	FirstTime string `json:"first_time,omitempty"`
	LastTime  string `json:"last_time,omitempty"`
	Open      int    `json:"open"`
}

// eventTime is the time of session's event seq in RFC 3339 (UTC), or "".
func eventTime(s *store.Snapshot, session string, seq uint64) (string, error) {
	var t string
	err := s.Events(session, seq, seq, func(e tier.Event) error {
		if e.Time != 0 {
			t = time.Unix(0, e.Time).UTC().Format(time.RFC3339Nano)
		}
		return nil
	})
	return t, err
}

// serveSessions answers the list of sessions the page filters: each one's
// info, its first and last event's time and its open calls.
func serveSessions(r *response, s *store.Snapshot, _ url.Values) error {
	ids, err := s.Sessions()
	if err != nil {
		return err
	}
	doc := sessionListDoc{Sessions: make([]sessionItem, 0, len(ids))}
	for _, id := range ids {
		it, err := listItem(s, id)
		if err := ownDamage(id, &it.listed, err); err != nil {
			return err
		}
		doc.Sessions = append(doc.Sessions, it)
	}
	return r.json(doc)
}

// listItem reads what the list shows of session id.
func listItem(s *store.Snapshot, id string) (sessionItem, error) {
	info, err := s.Info(id)
	if err != nil {
		return sessionItem{}, err
	}
	a := &activity{}
	if info.Head > 0 {
		if a.FirstTime, err = eventTime(s, id, 1); err != nil {
			return sessionItem{}, err
		}
		if a.LastTime, err = eventTime(s, id, info.Head); err != nil {
			return sessionItem{}, err
		}
	}
	l, err := s.Ledger(id)
	if err != nil {
		return sessionItem{}, err
	}
	a.Open = len(l.Open)
	return sessionItem{listed{ID: id, Info: &info}, a}, nil
}

// eventDoc is one event of the timeline: the event format's fields
// (docs/events.md), and what the store knows of it.
type eventDoc struct {
	tier.EventJSON
	// Opener is the seq of the event that opened the id a tool_result or
	// close resolves.
	Opener uint64 `json:"opener,omitempty"`
	// Open says a tool_call or open event's id is still open at the head.
	Open bool `json:"open,omitempty"`
	// TextBytes is the length of the whole text when Text is clipped.
	TextBytes int `json:"text_bytes,omitempty"`
}

// eventsDoc is the JSON of {prefix}/events: a window of the session's
// events that match the filter, in seq order. Before and After count the
// matching events of the range left out on either side of the window.
type eventsDoc struct {
	Session string     `json:"session"`
	Head    uint64     `json:"head_seq"`
	From    uint64     `json:"from"` // the range searched
	To      uint64     `json:"to"`
	Before  uint64     `json:"before"`
	After   uint64     `json:"after"`
	Events  []eventDoc `json:"events"`
}

// eventFilter is what an event of the events endpoint must match.
type eventFilter struct {
	q      string // lower-case text any of its strings contains
	item   string // an id or key it names
	at     uint64 // with item "ID@SEQ": the seq that opened the id
	marked bool   // a failure, rejection or other disposition
}

// none reports whether f lets every event through.
func (f *eventFilter) none() bool { return f.q == "" && f.item == "" && !f.marked }

// marked reports whether e is a failure or a negative fact: a failed
// tool_result or close, or a rejected, failed or superseded key.
func marked(e *tier.Event) bool { return e.Failed || e.Kind.IsDisposition() }

// match reports whether e passes f.
func (f *eventFilter) match(e *tier.Event) bool {
	if f.marked && !marked(e) {
		return false
	}
	if f.item != "" {
		switch {
		case f.at != 0:
			// An invocation: the event that opened it, and the one that
			// resolved it.
			if e.ID != f.item || (e.Seq != f.at && e.Opener != f.at) {
				return false
			}
		case e.ID != f.item && e.Key != f.item && e.By != f.item:
			return false
		}
	}
	if f.q != "" {
		found := false
		for _, s := range []string{e.Text, e.ID, e.Key, e.Name, e.By, e.Kind.String()} {
			if strings.Contains(strings.ToLower(s), f.q) {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// parseItem reads a refusal's item: "ID@SEQ" names one invocation of an
// id (marker.Invocation), anything else an id or key.
func parseItem(item string) (string, uint64) {
	if i := strings.LastIndexByte(item, '@'); i > 0 {
		if seq, err := strconv.ParseUint(item[i+1:], 10, 64); err == nil && seq > 0 {
			return item[:i], seq
		}
	}
	return item, 0
}

// clipText returns s cut to at most n bytes at a character boundary, and
// whether it was cut; n = 0 leaves it whole.
func clipText(s string, n int) (string, bool) {
	if n == 0 || len(s) <= n {
		return s, false
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n], true
}

// serveEvents answers a window of a session's timeline: the events of
// seq from..to (default: the whole log) that match q, item and marked; the
// first limit of them when from is given, else the last limit (the head's
// end, which a watcher follows). Texts longer than clip bytes are clipped.
func serveEvents(r *response, s *store.Snapshot, q url.Values) error {
	id, err := sessionParam(q)
	if err != nil {
		return err
	}
	from, err := uintParam(q, "from", 0, 1, "a seq (1, 2, ...)")
	if err != nil {
		return err
	}
	to, err := uintParam(q, "to", 0, 1, "a seq (1, 2, ...)")
	if err != nil {
		return err
	}
	if from != 0 && to != 0 && from > to {
		return &ParamError{Param: "to", Value: q.Get("to"), Why: "before from"}
	}
	limit, err := uintParam(q, "limit", DefaultEvents, 1, "a count (1, 2, ...)")
	if err != nil {
		return err
	}
	if limit > MaxEvents {
		return &ParamError{Param: "limit", Value: q.Get("limit"), Why: "more than " + strconv.Itoa(MaxEvents)}
	}
	clip, err := uintParam(q, "clip", DefaultClip, 0, "a length in bytes (0 for whole texts)")
	if err != nil {
		return err
	}
	f := eventFilter{q: strings.ToLower(q.Get("q"))}
	if f.marked, err = boolParam(q, "marked"); err != nil {
		return err
	}
	if q.Has("item") {
		if f.item, f.at = parseItem(q.Get("item")); f.item == "" {
			return &ParamError{Param: "item", Value: "", Why: "empty"}
		}
	}
	info, err := s.Info(id)
	if err != nil {
		return err
	}
	l, err := s.Ledger(id)
	if err != nil {
		return err
	}
	doc := eventsDoc{Session: id, Head: info.Head, From: max(from, 1), To: info.Head, Events: []eventDoc{}}
	if to != 0 && to < info.Head {
		doc.To = to
	}
	forward := from != 0
	add := func(e tier.Event) {
		d := eventDoc{EventJSON: e.ToJSON(""), Opener: e.Opener}
		if e.Kind.Opens() {
			o, ok := l.Open[e.ID]
			d.Open = ok && o.Seq == e.Seq
		}
		if t, cut := clipText(e.Text, int(min(clip, uint64(tier.DefaultMaxEventBytes)))); cut {
			d.Text, d.TextBytes = t, len(e.Text)
		}
		doc.Events = append(doc.Events, d)
	}
	switch {
	case doc.From > doc.To:
	case f.none():
		// Every event matches: the window is a seq range.
		lo, hi := doc.From, doc.To
		if forward {
			hi = min(hi, lo+limit-1)
		} else if hi-lo+1 > limit {
			lo = hi - limit + 1
		}
		doc.Before, doc.After = lo-doc.From, doc.To-hi
		err = s.Events(id, lo, hi, func(e tier.Event) error { add(e); return nil })
	default:
		// Scan the range: the window is the first (or last) limit matches.
		var kept []tier.Event
		var n uint64
		err = s.Events(id, doc.From, doc.To, func(e tier.Event) error {
			if !f.match(&e) {
				return nil
			}
			n++
			switch {
			case forward && uint64(len(kept)) < limit:
				kept = append(kept, e)
			case !forward:
				if uint64(len(kept)) == limit {
					kept = kept[1:]
				}
				kept = append(kept, e)
			}
			return nil
		})
		if forward {
			doc.After = n - uint64(len(kept))
		} else {
			doc.Before = n - uint64(len(kept))
		}
		for _, e := range kept {
			add(e)
		}
	}
	if err != nil {
		return err
	}
	return r.json(doc)
}

// nodesDoc is the JSON of {prefix}/nodes: every summary node of the
// session, in id order, with its narrative (the summarizer's words,
// unchecked) and its claims (checked against the raw log at commit unless
// the node says unchecked).
type nodesDoc struct {
	Session      string      `json:"session"`
	FrameVersion uint64      `json:"frame_version"`
	Nodes        []tier.Node `json:"nodes"`
}

// serveNodes answers every summary node of a session.
func serveNodes(r *response, s *store.Snapshot, q url.Values) error {
	id, err := sessionParam(q)
	if err != nil {
		return err
	}
	info, err := s.Info(id)
	if err != nil {
		return err
	}
	doc := nodesDoc{Session: id, FrameVersion: info.FrameVersion, Nodes: []tier.Node{}}
	if err := s.Nodes(id, func(n tier.Node) error {
		doc.Nodes = append(doc.Nodes, n)
		return nil
	}); err != nil {
		return err
	}
	return r.json(doc)
}
