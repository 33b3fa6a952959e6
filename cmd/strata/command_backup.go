package main

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/cockroachdb/errors"
	"github.com/spf13/cobra"

	"github.com/strata-go/strata/store"
)

// backupOptions are the arguments of `strata backup`.
type backupOptions struct {
	db      string
	dest    string
	timeout time.Duration
	errOut  io.Writer // progress, on a terminal
}

// newBackupCommand returns `strata backup`.
func newBackupCommand() *cobra.Command {
	o := &backupOptions{}
	cmd := &cobra.Command{
		Use:   "backup DB|URL DEST",
		Short: "Copy a database consistently into one file",
		Long: `Write a consistent copy of the database, from one read transaction, to DEST:
a temporary file beside it, fsynced, renamed into place and the directory
fsynced — never a half-written DEST. DEST "-" writes the copy to stdout and
nothing else; otherwise a line says "backup DEST bytes=N".`,
		Args: exactArgs("DB", "DEST"),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.db, o.dest = args[0], args[1]
			if err := o.validate(); err != nil {
				return err
			}
			o.errOut = cmd.ErrOrStderr()
			return o.run(cmd.OutOrStdout())
		},
	}
	addTimeoutFlag(cmd, &o.timeout)
	return cmd
}

// validate checks the arguments; its errors are bad usage.
func (o *backupOptions) validate() error {
	if o.dest == "" {
		return usagef("DEST is empty")
	}
	return checkTimeout(o.timeout)
}

// run writes the copy.
func (o *backupOptions) run(out io.Writer) (err error) {
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
	prog := o.progress()
	defer prog.finish()
	if o.dest == "-" {
		_, err = db.Backup(prog.writer(out))
		return err
	}
	var n int64
	if prog == nil {
		n, err = db.BackupFile(o.dest)
	} else { // BackupFile's own steps, through a writer that counts
		n, err = store.WriteFileAtomic(o.dest, 0o600, func(w io.Writer) (int64, error) { return db.Backup(prog.writer(w)) })
	}
	prog.finish()
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(out, "backup %s bytes=%d\n", o.dest, n)
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
