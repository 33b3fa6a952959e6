package store

import "github.com/strata-go/strata/backend"

// Size returns the size in bytes of the copy WriteTo writes: the database
// as of this snapshot. A server streaming a backup announces it as the
// Content-Length, so that a cut transfer is seen as one.
func (s *Snapshot) Size() int64 {
	if c, ok := s.tx.(backend.Snapshotter); ok {
		return c.Size()
	}
	return 0
}

// Stats counts the records of the sessions named (none: every session) as
// of this snapshot: what DB.Stats returns, for a caller that reads other
// things from the same transaction. Sessions is never nil. FileBytes is the
// file's size when Stats is called (the file may run ahead of Size), for a
// backend that is a file; TableBytes the size of the tables then, for a
// backend in PostgreSQL. Their bytes per event are given only when every
// session is counted.
func (s *Snapshot) Stats(sessions ...string) (Stats, error) {
	out := Stats{Sessions: []SessionStats{}, Total: newCounts()}
	ids := sessions
	if len(ids) == 0 {
		var err error
		if ids, err = s.Sessions(); err != nil {
			return out, err
		}
	}
	for _, id := range ids {
		st, err := s.SessionStats(id)
		if err != nil {
			return out, err
		}
		out.Sessions = append(out.Sessions, st)
		out.Total.add(&st.Counts)
	}
	if f, ok := s.db.be.(backend.FileSizer); ok {
		if n, err := f.FileSize(); err == nil {
			out.FileBytes = n
		}
	}
	if t, ok := s.db.be.(backend.TableSizer); ok {
		n, err := t.TableBytes()
		if err != nil {
			return out, err
		}
		out.TableBytes = n
	}
	if len(sessions) == 0 {
		out.FileBytesPerEvent = perEvent(out.FileBytes, out.Total.Events)
		out.TableBytesPerEvent = perEvent(out.TableBytes, out.Total.Events)
	}
	out.BytesPerEvent = out.Total.BytesPerEvent
	return out, nil
}
