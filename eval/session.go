package eval

import (
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/cockroachdb/errors"

	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/tier"
)

// Session is one recorded session: its id and its events in order.
type Session struct {
	ID     string
	Events []tier.Event
}

// ReadFiles reads JSONL event files (docs/events.md) and returns
// their sessions in order of first appearance. A line without a "session"
// belongs to the session its file named last or, before the file names one,
// to a session named after the file (its base name without ".jsonl"). A
// session named in several files gets their events in file order. The
// events' refs (the source records of imported events) are dropped: a run
// appends event by event, and the store takes a record's events only
// together.
func ReadFiles(paths ...string) ([]Session, error) {
	var out []Session
	index := map[string]int{}
	for _, p := range paths {
		if err := readFile(p, &out, index); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func readFile(path string, out *[]Session, index map[string]int) error {
	f, err := os.Open(path)
	if err != nil {
		return errors.Wrap(err, "eval")
	}
	defer f.Close()
	cur := strings.TrimSuffix(filepath.Base(path), ".jsonl")
	rd := tier.NewReader(f, path, tier.Limits{})
	for {
		rec, err := rd.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if rec.Session != "" {
			cur = rec.Session
		}
		i, ok := index[cur]
		if !ok {
			if err := store.CheckSession(cur); err != nil {
				return &tier.LineError{File: path, Line: rec.Line, Err: err}
			}
			i = len(*out)
			index[cur] = i
			*out = append(*out, Session{ID: cur})
		}
		rec.Event.Ref = ""
		(*out)[i].Events = append((*out)[i].Events, rec.Event)
	}
}
