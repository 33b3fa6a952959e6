package store

import (
	"context"
	"os"

	"github.com/cockroachdb/errors"

	"github.com/strata-go/strata/backend"
)

// VacuumResult is what Vacuum did: the file's size before and after, and
// the sessions it holds.
type VacuumResult struct {
	Path     string `json:"path"`
	Before   int64  `json:"bytes_before"`
	After    int64  `json:"bytes_after"`
	Sessions int    `json:"sessions"`
}

// Vacuum shrinks the database file at path to what its sessions take, as
// bbolt's compaction does: it opens the file for writing (so that no other
// process has it open, waiting at most opts.LockTimeout), copies every
// session into a new file built beside it (Snapshot.CopyFile's copy: each
// session byte for byte, read back), fsyncs it and renames it over path.
// A crash leaves path the old file or the whole new one. The pages a
// deleted session freed stay in a bbolt file's freelist, reused by later
// writes but never given back to the file system, until a vacuum. Only a
// file is vacuumed; PostgreSQL's tables are its own VACUUM's.
func Vacuum(ctx context.Context, path string, opts Options) (res VacuumResult, err error) {
	res.Path = path
	b, err := fileDriver[backend.Builder]("vacuum", path)
	if err != nil {
		return res, err
	}
	opts.ReadOnly, opts.Create = false, false
	db, err := Open(path, opts)
	if err != nil {
		return res, err
	}
	defer func() {
		if cerr := db.Close(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	if db.path == "" {
		return res, errors.Newf("store: vacuum %s: not a database file", path)
	}
	fi, err := os.Stat(db.path)
	if err != nil {
		return res, errors.Wrap(err, "store: vacuum")
	}
	res.Before = fi.Size()
	err = db.View(func(s *Snapshot) error {
		ids, err := s.Sessions()
		if err != nil {
			return err
		}
		res.Sessions = len(ids)
		if err := hook("vacuum"); err != nil {
			return err
		}
		// Renamed over the file this process holds the writer's lock of,
		// and only reads until it closes it.
		return b.Build(db.path, true, func(be backend.Backend) error {
			_, err := s.copyTo(ctx, be, CopyOptions{})
			return err
		})
	})
	if err != nil {
		return res, err
	}
	if fi, err = os.Stat(db.path); err != nil {
		return res, errors.Wrap(err, "store: vacuum")
	}
	res.After = fi.Size()
	return res, nil
}
