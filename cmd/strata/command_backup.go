package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/cockroachdb/errors"
	"github.com/spf13/cobra"

	"github.com/strata-go/strata/backend/postgres"
	"github.com/strata-go/strata/store"
)

// backupOptions are the arguments of `strata backup`.
type backupOptions struct {
	db      string
	dest    string
	json    bool
	timeout time.Duration
	errOut  io.Writer // progress, on a terminal
}

// newBackupCommand returns `strata backup`.
func newBackupCommand() *cobra.Command {
	o := &backupOptions{}
	cmd := &cobra.Command{
		Use:   "backup [--json] DB|URL DEST",
		Short: "Copy a database consistently into one file",
		Long: `Write a consistent copy of the database, from one read transaction, to DEST:
a temporary file in DEST's directory, fsynced, renamed into place and the
directory fsynced — never a half-written DEST. A line says
"backup DEST bytes=N sessions=S"; --json prints {"dest", "bytes",
"sessions"} instead.

DEST is a file: an existing one is replaced whole (as etcdctl snapshot save
and sqlite3's .backup do), the database itself is refused, and so is a
directory (or a name ending in "/"): name the file to write, DIR/NAME.db.
DEST "-" writes the copy to stdout and nothing else; it is refused when
stdout is a terminal (redirect it), and with --json.

DB is a file or a postgres:// URL, or the URL of a running agent's debug
handler: from a handler, DEST is written only once the whole announced
length has arrived.

DB may be a postgres:// URL: DEST is then a new bbolt file holding every
session, copied from one snapshot (REPEATABLE READ) as strata copy copies
them, and written as above; it verifies, and resumes to the same bytes as
the database. DEST "-" is refused for it: name the file.`,
		Args: exactArgs("DB", "DEST"),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.db, o.dest = args[0], args[1]
			if err := o.validate(); err != nil {
				return err
			}
			o.errOut = cmd.ErrOrStderr()
			return o.run(cmd.Context(), cmd.OutOrStdout())
		},
	}
	addJSONFlag(cmd, &o.json, `{"dest", "bytes", "sessions"} instead of the line`)
	addTimeoutFlag(cmd, &o.timeout)
	return cmd
}

// validate checks the arguments; its errors are bad usage.
func (o *backupOptions) validate() error {
	dir := func(why string) error {
		return &usageError{err: errors.WithHintf(errors.Newf("backup: DEST %s %s: DEST is the file to write", o.dest, why),
			"name the file, e.g. %s", filepath.Join(o.dest, "strata.db"))}
	}
	switch fi, err := os.Stat(o.dest); {
	case o.dest == "":
		return usagef("DEST is empty")
	case o.dest == "-" && o.json:
		return usagef("--json has no place with DEST -: stdout holds the copy")
	case o.dest == "-" && postgres.IsURL(o.db):
		return &usageError{err: errors.WithHint(errors.New("backup: DEST - streams a database file, and a PostgreSQL database is none: its backup is a new file"),
			"name the file to write, e.g. strata backup URL copy.db")}
	case o.dest == "-":
	case err == nil && fi.IsDir():
		return dir("is a directory")
	case strings.HasSuffix(o.dest, "/") || strings.HasSuffix(o.dest, string(filepath.Separator)):
		return dir("names a directory")
	}
	if o.dest != "-" {
		if err := checkParentDir(o.dest); err != nil {
			return err
		}
	}
	return checkTimeout(o.timeout)
}

// run writes the copy.
func (o *backupOptions) run(ctx context.Context, out io.Writer) (err error) {
	if o.dest == "-" && isTerminal(out) {
		return &usageError{err: errors.WithHint(errors.New("backup: DEST - writes the binary copy to stdout, which is a terminal"),
			"redirect stdout to a file (strata backup DB - > copy.db), or give DEST a file name")}
	}
	if isURL(o.db) {
		return o.runRemote(out)
	}
	if o.dest != "-" {
		// Renaming a copy over the database itself would swap the file
		// under its readers.
		a, aerr := os.Stat(o.db)
		b, berr := os.Stat(o.dest)
		if aerr == nil && berr == nil && os.SameFile(a, b) {
			return errors.WithHint(errors.Newf("backup: %s is the database itself", o.dest), "choose another DEST")
		}
	}
	db, err := openReadOnly(o.db, o.timeout)
	if err != nil {
		return err
	}
	defer closeDB(db, &err)
	if db.Path() == "" {
		return o.runCopy(ctx, out, db)
	}
	prog := o.progress()
	defer prog.finish()
	if o.dest == "-" {
		_, err = db.Backup(prog.writer(out))
		return err
	}
	// The sessions counted and the copy come from one transaction.
	var n int64
	var ids []string
	err = db.View(func(s *store.Snapshot) error {
		var err error
		if ids, err = s.Sessions(); err != nil {
			return err
		}
		n, err = store.WriteFileAtomic(o.dest, 0o600, func(w io.Writer) (int64, error) { return s.WriteTo(prog.writer(w)) })
		return err
	})
	prog.finish()
	if err != nil {
		return err
	}
	return o.report(out, n, len(ids))
}

// runCopy writes DEST as a new bbolt file holding every session of db,
// a database that is not a file, from one snapshot.
func (o *backupOptions) runCopy(ctx context.Context, out io.Writer, db *store.DB) error {
	var res store.CopyResult
	err := db.View(func(s *store.Snapshot) error {
		prog := copyProgress(o.errOut, "backup")
		defer prog.finish()
		var err error
		res, err = s.CopyFile(ctx, o.dest, true, store.CopyOptions{Progress: prog.copied})
		return err
	})
	if err != nil {
		return err
	}
	fi, err := os.Stat(o.dest)
	if err != nil {
		return errors.Wrap(err, "backup")
	}
	return o.report(out, fi.Size(), len(res.Sessions))
}

// backupJSON is what `backup --json` prints.
type backupJSON struct {
	Dest     string `json:"dest"`
	Bytes    int64  `json:"bytes"`
	Sessions int    `json:"sessions"`
}

// report says what was written to DEST: n bytes holding sessions sessions.
func (o *backupOptions) report(out io.Writer, n int64, sessions int) error {
	if o.json {
		return writeJSON(out, backupJSON{Dest: o.dest, Bytes: n, Sessions: sessions})
	}
	_, err := fmt.Fprintf(out, "backup %s bytes=%d sessions=%d\n", o.dest, n, sessions)
	return err
}

// progress returns the progress line of the copy (bytes written of the
// database file's size), or nil when stderr is not a terminal.
func (o *backupOptions) progress() *progress {
	if o.errOut == nil {
		return nil
	}
	var total int64
	if fi, err := os.Stat(o.db); err == nil {
		total = fi.Size()
	}
	return newProgress(o.errOut, "backup", "bytes", total)
}
