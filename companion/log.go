package companion

import (
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/cockroachdb/errors"
)

// StoreName is the store's file name in the agent's directory of the
// project (Settings.Dir), LogName the log's beside it.
const (
	StoreName = "strata.db"
	LogName   = "strata.log"
)

// MaxLogBytes is the size past which AppendLog moves the log to
// "<log>.1", replacing the one there, and starts a new one: the two hold
// the latest lines, at most about 2 MiB.
const MaxLogBytes = 1 << 20

// ProjectDir returns the directory of the project a hook runs for:
// projectDir (the agent's Settings.ProjectEnv, $CLAUDE_PROJECT_DIR, which
// Claude Code sets for the hooks it runs) when it is an absolute path,
// else cwd (the hook input's) when it is one, else "": a relative
// directory would be relative to wherever the hook happens to run.
func ProjectDir(projectDir, cwd string) string {
	switch {
	case filepath.IsAbs(projectDir):
		return projectDir
	case filepath.IsAbs(cwd):
		return cwd
	}
	return ""
}

// DefaultStore returns the store a hook of agent a uses when none is
// given: strata.db in the agent's directory of the project's (ProjectDir,
// Settings.Dir: .claude/strata.db for Claude Code); "" when there is no
// project directory.
func DefaultStore(a Agent, projectDir, cwd string) string {
	dir := ProjectDir(projectDir, cwd)
	if dir == "" {
		return ""
	}
	return filepath.Join(dir, a.Settings().Dir, StoreName)
}

// DefaultLog returns the hook's log file for store db: strata.log beside
// a file store; for a URL (a PostgreSQL store) or no store, in the
// agent's directory of the project; "" when there is neither a file store
// nor a project directory.
func DefaultLog(a Agent, db, projectDir, cwd string) string {
	if db != "" && !strings.Contains(db, "://") {
		return filepath.Join(filepath.Dir(db), LogName)
	}
	dir := ProjectDir(projectDir, cwd)
	if dir == "" {
		return ""
	}
	return filepath.Join(dir, a.Settings().Dir, LogName)
}

// AppendLog appends one line to the log file at path — the time (UTC,
// RFC 3339), a space, msg with its line breaks made spaces — creating the
// file (0600) when missing; first, a log past MaxLogBytes is moved to
// "<path>.1".
func AppendLog(path string, t time.Time, msg string) error {
	if fi, err := os.Stat(path); err == nil && fi.Size() > MaxLogBytes {
		if err := os.Rename(path, path+".1"); err != nil && !errors.Is(err, os.ErrNotExist) {
			return errors.Wrap(err, "companion: rotating the log")
		}
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return errors.Wrap(err, "companion: opening the log")
	}
	line := t.UTC().Format(time.RFC3339) + " " + strings.Map(func(r rune) rune {
		if r == '\n' || r == '\r' {
			return ' '
		}
		return r
	}, msg) + "\n"
	_, err = f.WriteString(line)
	return errors.CombineErrors(errors.Wrap(err, "companion: writing the log"), f.Close())
}
