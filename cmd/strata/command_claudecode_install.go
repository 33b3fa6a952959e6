package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/cockroachdb/errors"
	"github.com/spf13/cobra"

	"github.com/strata-go/strata/backend/boltfile"
	"github.com/strata-go/strata/backend/postgres"
	"github.com/strata-go/strata/companion"
	"github.com/strata-go/strata/companion/claudecode"
)

// The files of strata beside Claude Code's settings, in the .claude
// directory.
const (
	claudeSettingsFile = "settings.json"
	// claudeLocalSettingsFile is a project's settings of one person, not
	// committed, which Claude Code reads beside settings.json.
	claudeLocalSettingsFile = "settings.local.json"
	// claudeInstallRecord is install's note of what it created in the
	// settings (the file, the hooks object, an event's list), so that
	// uninstall removes exactly that and leaves what was there before.
	claudeInstallRecord = "strata-install.json"
)

// claudeSettings is one of Claude Code's settings files and what strata's
// hooks in it name.
type claudeSettings struct {
	user    bool
	project string // the project directory, absolute; "" for the user's settings
	home    string // the user's home directory, absolute
	dir     string // the .claude directory, absolute
	path    string // settings.json in it, absolute
	shown   string // settings.json as output names it
}

// findClaudeSettings returns the settings of the project in dir (the
// current directory when ""), or with user the user's.
func findClaudeSettings(user bool, dir string) (*claudeSettings, error) {
	home, err := os.UserHomeDir()
	if err != nil {
		return nil, errors.Wrap(err, "the home directory")
	}
	s := &claudeSettings{user: user, home: home}
	switch {
	case user:
		s.dir = filepath.Join(home, ".claude")
		s.path = filepath.Join(s.dir, claudeSettingsFile)
		s.shown = s.path
		return s, nil
	case dir == "":
		s.shown = filepath.Join(".claude", claudeSettingsFile)
		if s.project, err = os.Getwd(); err != nil {
			return nil, errors.Wrap(err, "the current directory")
		}
	default:
		s.shown = filepath.Join(dir, ".claude", claudeSettingsFile)
		if s.project, err = filepath.Abs(dir); err != nil {
			return nil, err
		}
		if fi, err := os.Stat(s.project); err != nil {
			return nil, errors.WithHintf(errors.Wrap(err, "--dir"),
				"--dir names the project's directory, which must exist: give it the project's, or create it first with mkdir -p %s", shellQuote(dir))
		} else if !fi.IsDir() {
			return nil, usagef("--dir %s is not a directory", dir)
		}
	}
	s.dir = filepath.Join(s.project, ".claude")
	s.path = filepath.Join(s.dir, claudeSettingsFile)
	return s, nil
}

// beside returns the file name in the settings' directory, as output names
// it.
func (s *claudeSettings) beside(name string) string {
	return filepath.Join(filepath.Dir(s.shown), name)
}

// otherSettings is another settings file Claude Code reads for the same
// sessions as the one a command is about, and how to remove strata's hooks
// from it.
type otherSettings struct {
	s      *claudeSettings
	remove string
}

// others returns the settings files Claude Code reads beside s for a
// session of its project: for a project's settings.json its
// settings.local.json and the user's settings; for the user's, those of
// the project in the current directory. A file that is s itself (the
// project is the home directory) is left out.
func (s *claudeSettings) others() ([]otherSettings, error) {
	var out []otherSettings
	project := s
	if s.user {
		p, err := findClaudeSettings(false, "")
		if err != nil {
			return nil, err
		}
		project = p
		out = append(out, otherSettings{p, "strata claude-code uninstall removes them"})
	} else {
		u, err := findClaudeSettings(true, "")
		if err != nil {
			return nil, err
		}
		out = append(out, otherSettings{u, "strata claude-code uninstall --user removes them"})
	}
	out = append(out, otherSettings{project.local(), "take them out of it by hand, or strata claude-code uninstall removes them with those of " + claudeSettingsFile})
	return slices.DeleteFunc(out, func(o otherSettings) bool { return o.s.path == s.path }), nil
}

// strataHooksIn returns strata's hooks in the settings file s, and
// whether the file exists (none when it does not).
func strataHooksIn(s *claudeSettings) (hooks []claudecode.SettingsHook, exists bool, err error) {
	text, _, _, err := readSettings(s)
	if err != nil || text == nil {
		return nil, false, err
	}
	hooks, err = claudecode.StrataHooks(s.shown, text)
	return hooks, true, err
}

// claudeHooksElsewhere is strata's hooks in another settings file than the
// one a command is about (otherSettings).
type claudeHooksElsewhere struct {
	Settings string                    `json:"settings"`
	Hooks    []claudecode.SettingsHook `json:"hooks"`
	remove   string
}

// strataHooksElsewhere returns strata's hooks in the other settings files
// Claude Code reads beside s (others), each file that holds some. A file
// it cannot read as settings is left out: it is not the one the command is
// about.
func strataHooksElsewhere(s *claudeSettings) ([]claudeHooksElsewhere, error) {
	others, err := s.others()
	if err != nil {
		return nil, err
	}
	out := []claudeHooksElsewhere{}
	for _, o := range others {
		if hooks, _, err := strataHooksIn(o.s); err == nil && len(hooks) > 0 {
			out = append(out, claudeHooksElsewhere{Settings: o.s.shown, Hooks: hooks, remove: o.remove})
		}
	}
	return out, nil
}

// hookDB returns a store as the hook's command line names it — shell
// text — given db as --db gives it ("": the default, beside the
// settings; a relative file is taken from the current directory, as every
// command takes it). A file inside the project is named from
// $CLAUDE_PROJECT_DIR, which Claude Code sets for every hook, and one in
// the home directory from $HOME, so that the settings hold no path of
// this machine and work in any checkout; a PostgreSQL URL as it is. A file
// outside both is named by its absolute path: machine is that path then.
func (s *claudeSettings) hookDB(db string) (arg, machine string, err error) {
	switch {
	case db == "":
		db = filepath.Join(s.dir, companion.StoreName)
	case isURL(db):
		return "", "", usagef("--db %s is a debug handler's URL, which only reads: the hook writes to its store, a file or a postgres:// URL", db)
	case postgres.IsURL(db):
		return shellQuote(db), "", nil
	}
	abs, err := filepath.Abs(db)
	if err != nil {
		return "", "", err
	}
	for _, root := range []struct{ dir, name string }{{s.project, "CLAUDE_PROJECT_DIR"}, {s.home, "HOME"}} {
		if root.dir == "" {
			continue
		}
		if rel, err := filepath.Rel(root.dir, abs); err == nil && rel != "." && filepath.IsLocal(rel) {
			return `"$` + root.name + `"/` + shellQuote(filepath.ToSlash(rel)), "", nil
		}
	}
	return shellQuote(abs), abs, nil
}

// storeOf returns the store a hook's command line names, as a path (or
// URL) here: its --db with $CLAUDE_PROJECT_DIR the project's directory (the
// current one for the user's settings) and $HOME the home directory. ok is
// false when the line names none.
func (s *claudeSettings) storeOf(command string) (db string, ok bool) {
	project := s.project
	if project == "" {
		project, _ = os.Getwd()
	}
	words, ok := companion.ShellWords(command, func(name string) string {
		switch name {
		case "CLAUDE_PROJECT_DIR":
			return project
		case "HOME":
			return s.home
		}
		return os.Getenv(name)
	})
	for i, w := range words {
		if !ok {
			break
		}
		if v, found := strings.CutPrefix(w, "--db="); found {
			return v, v != ""
		}
		if w == "--db" && i+1 < len(words) {
			return words[i+1], words[i+1] != ""
		}
	}
	return "", false
}

// show returns a store as output names it: a file inside the project
// as the settings are named (relative to the current directory without
// --dir), a URL without its password, any other as it is.
func (s *claudeSettings) show(db string) string {
	if postgres.IsURL(db) {
		return shownDB(db) // without its password
	}
	if s.project == "" || !filepath.IsAbs(db) {
		return db
	}
	if rel, err := filepath.Rel(s.project, db); err == nil && filepath.IsLocal(rel) {
		return filepath.Join(filepath.Dir(filepath.Dir(s.shown)), rel)
	}
	return db
}

// claudeHookCommand is the command line of strata's hook on store db
// (shell text, hookDB's). It runs the strata on PATH, as Claude Code's
// environment finds it: the settings may be committed and shared, and
// ~/.claude/settings.json kept in a dotfiles repository, so they name no
// path of one machine, and the entry keeps working when strata is
// installed again elsewhere. install says when PATH has no strata, or
// another one (checkStrataOnPath).
func claudeHookCommand(db string) string { return "strata claude-code hook --db " + db }

// installRecord is what claudeInstallRecord holds.
type installRecord struct {
	Settings string   `json:"settings"` // the settings file it is about, in the same directory
	Created  []string `json:"created"`  // "directory", "file", "hooks", "hooks.EVENT"
}

// readInstallRecord returns install's record beside s: what it created
// (none without a record, or with one about another file).
func readInstallRecord(s *claudeSettings) ([]string, error) {
	b, err := os.ReadFile(filepath.Join(s.dir, claudeInstallRecord))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var r installRecord
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, errors.Wrapf(err, "%s", s.beside(claudeInstallRecord))
	}
	if r.Settings != claudeSettingsFile {
		return nil, nil
	}
	return r.Created, nil
}

// writeInstallRecord writes install's record beside s, or removes it when
// install created nothing.
func writeInstallRecord(s *claudeSettings, created []string) error {
	path := filepath.Join(s.dir, claudeInstallRecord)
	if len(created) == 0 {
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	}
	var b bytes.Buffer
	if err := writeJSON(&b, installRecord{Settings: claudeSettingsFile, Created: created}); err != nil {
		return err
	}
	if was, err := os.ReadFile(path); err == nil && bytes.Equal(was, b.Bytes()) {
		return nil
	}
	_, err := boltfile.WriteFileAtomic(path, 0o644, func(w io.Writer) (int64, error) {
		n, err := w.Write(b.Bytes())
		return int64(n), err
	})
	return err
}

// readSettings returns the settings file's bytes (nil when there is none),
// the file to write them back to — the target of a link, which stays a
// link — and its mode.
func readSettings(s *claudeSettings) (text []byte, target string, mode fs.FileMode, err error) {
	target, mode = s.path, 0o644
	if t, err := filepath.EvalSymlinks(s.path); err == nil {
		target = t
	} else if fi, lerr := os.Lstat(s.path); lerr == nil && fi.Mode()&fs.ModeSymlink != 0 {
		to, _ := os.Readlink(s.path)
		return nil, "", 0, errors.WithHint(errors.Newf("%s is a link to %s, which does not exist", s.shown, to),
			"make the file it names, or remove the link")
	}
	fi, err := os.Stat(target)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, target, mode, nil
	}
	if err != nil {
		return nil, "", 0, err
	}
	if fi.IsDir() {
		return nil, "", 0, errors.Newf("%s is a directory", s.shown)
	}
	text, err = os.ReadFile(target)
	if text == nil && err == nil {
		text = []byte{}
	}
	return text, target, fi.Mode().Perm(), err
}

// writeSettings replaces the file at target with text atomically (a
// temporary file beside it, fsynced and renamed into place), in mode.
func writeSettings(target string, mode fs.FileMode, text []byte) error {
	_, err := boltfile.WriteFileAtomic(target, mode, func(w io.Writer) (int64, error) {
		n, err := w.Write(text)
		return int64(n), err
	})
	return err
}

// claudeInstallOptions are the flags of `strata claude-code install` and
// `uninstall`.
type claudeInstallOptions struct {
	user bool
	db   string // install only
	dir  string
}

// addSettingsFlags adds --user and --dir, which choose the settings file.
func (o *claudeInstallOptions) addSettingsFlags(cmd *cobra.Command) {
	cmd.Flags().BoolVar(&o.user, "user", false, "the user's settings, ~/.claude/settings.json, for every project")
	cmd.Flags().StringVar(&o.dir, "dir", "", "the project's directory (default: the current one)")
}

// settings returns the settings file the flags choose.
func (o *claudeInstallOptions) settings() (*claudeSettings, error) {
	if o.user && o.dir != "" {
		return nil, usagef("--user and --dir choose different settings: --user is the user's, for every project; --dir a project's")
	}
	return findClaudeSettings(o.user, o.dir)
}

// newClaudeCodeInstallCommand returns `strata claude-code install`.
func newClaudeCodeInstallCommand() *cobra.Command {
	o := &claudeInstallOptions{}
	cmd := &cobra.Command{
		Use:   "install [--user] [--db DB] [--dir PROJECT]",
		Short: "Add strata's hooks to Claude Code's settings",
		Long: `Add strata's hooks to Claude Code's settings: .claude/settings.json of the
project in the current directory (--dir PROJECT: that project's), created
with its directory when missing, or with --user ~/.claude/settings.json,
for every project. Three hooks, each of the command
strata claude-code hook --db DB, with a timeout of 30 seconds: PreCompact
and PostCompact, without a matcher (every trigger, manual and auto), and
SessionStart with the matcher compact.

DB is the store. By default it is beside the settings, .claude/strata.db,
written "$CLAUDE_PROJECT_DIR"/.claude/strata.db (with --user
"$HOME"/.claude/strata.db): Claude Code sets the variable for every hook,
so the entry works from any directory and in any checkout and holds no
path of this machine. --db DB chooses another: a file (inside the project
or the home directory it is named from the variable too) or a postgres://
URL. A relative file is taken from the current directory, as every strata
command takes it, not from --dir; a file outside the project and the home
directory stands in the settings as its absolute path, and install warns
that the hooks find it only where that path is. The hook makes the store
at its first run and writes its log, strata.log, beside it.

Claude Code runs the hooks of every settings file it reads for a session:
the project's .claude/settings.json, its .claude/settings.local.json and
~/.claude/settings.json. Install warns when another of them holds strata's
hooks already (they would run twice, into two stores), naming the file and
how to remove them there.

The hooks run the strata on Claude Code's PATH, for the same reason;
install says when PATH has no strata, or another one than the one running.

Everything else in the file stays byte for byte as it was: install adds
text and changes none, and uninstall takes out exactly what it added.
Installing again changes nothing and says so; with another --db it changes
the command of strata's entries only. A file that is not JSON — Claude
Code takes no comments or trailing commas either — is refused, naming its
line and column, and left as it is. The file is replaced atomically, its
mode kept; a link is followed. What install created (the file, the hooks
object, an event's list) it notes in .claude/strata-install.json, so that
uninstall removes those too, and only those.`,
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, args []string) error {
			if cmd.Flags().Changed("db") && o.db == "" {
				return usagef("--db must not be empty: leave it out for the default, strata.db beside the settings")
			}
			return o.install(cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	o.addSettingsFlags(cmd)
	cmd.Flags().StringVar(&o.db, "db", "", "the store: a file or a postgres:// URL (default: strata.db beside the settings)")
	return cmd
}

// newClaudeCodeUninstallCommand returns `strata claude-code uninstall`.
func newClaudeCodeUninstallCommand() *cobra.Command {
	o := &claudeInstallOptions{}
	cmd := &cobra.Command{
		Use:   "uninstall [--user] [--dir PROJECT]",
		Short: "Remove strata's hooks from Claude Code's settings",
		Long: `Remove strata's hooks from Claude Code's settings (the project's, or with
--user the user's, as install): every hook whose command is strata's,
strata claude-code hook, under any event, with its group when the group
holds nothing else. The event lists, the hooks object and the file that
install created (its note, .claude/strata-install.json) go too once
nothing else is in them; everything else stays byte for byte. It says
what it removed, or that nothing was installed.

In a project, strata's hooks come out of .claude/settings.local.json too
(one person's settings, not committed), whose hooks Claude Code runs as
well: exactly their text, each with its group when the group holds
nothing else; the lists and objects they leave empty stay, and so does
the file. A local file that is not JSON is left as it is, with a warning.
--user edits the user's settings only.

The store stays: when the hook has made it (or its log), uninstall says
where it is and how to delete it.`,
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.uninstall(cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	o.addSettingsFlags(cmd)
	return cmd
}

// install adds strata's hooks and says what it changed.
func (o *claudeInstallOptions) install(out, errOut io.Writer) error {
	s, err := o.settings()
	if err != nil {
		return err
	}
	arg, machine, err := s.hookDB(o.db)
	if err != nil {
		return err
	}
	command := claudeHookCommand(arg)
	text, target, mode, err := readSettings(s)
	if err != nil {
		return err
	}
	newText, changes, created, err := claudecode.InstallHooks(s.shown, text, command)
	if err != nil {
		return err
	}
	fresh := !slices.ContainsFunc(changes, func(c claudecode.HookChange) bool { return c.What != "added" })
	switch {
	case bytes.Equal(newText, text):
		fmt.Fprintf(out, "%s holds strata's hooks already: nothing changed\n", s.shown)
	case text == nil:
		if _, err := os.Stat(s.dir); errors.Is(err, fs.ErrNotExist) {
			created = append([]string{"directory"}, created...)
		}
		if err := os.MkdirAll(s.dir, 0o755); err != nil {
			return err
		}
		fmt.Fprintf(out, "created %s with strata's hooks:\n", s.shown)
	default:
		fmt.Fprintf(out, "changed %s:\n", s.shown)
	}
	if !bytes.Equal(newText, text) {
		if err := writeSettings(target, mode, newText); err != nil {
			return errors.Wrapf(err, "writing %s", s.shown)
		}
	}
	// What uninstall removes: what this install created, and when some of
	// strata's entries were there already, what the installs before did.
	if !fresh {
		before, err := readInstallRecord(s)
		if err != nil {
			return err
		}
		for _, c := range before {
			if !slices.Contains(created, c) {
				created = append(created, c)
			}
		}
	}
	if err := writeInstallRecord(s, created); err != nil {
		return errors.Wrapf(err, "writing %s", s.beside(claudeInstallRecord))
	}
	for _, c := range changes {
		fmt.Fprintf(out, "  %s %s: %s", c.What, eventName(c.Event, c.Matcher), shownCommand(c.Command))
		if c.Was != "" {
			fmt.Fprintf(out, " (was %s)", shownCommand(c.Was))
		}
		fmt.Fprintln(out)
	}
	if db, ok := s.storeOf(command); ok {
		fmt.Fprintf(out, "store: %s", s.show(db))
		if _, err := os.Stat(db); !postgres.IsURL(db) && errors.Is(err, fs.ErrNotExist) {
			fmt.Fprint(out, " (none yet: the hook makes it at the first compaction)")
		}
		fmt.Fprintln(out)
	}
	if ig, err := ignoreStore(out, s, command); err != nil {
		return err
	} else if ig.Created && ig.File == filepath.Join(s.dir, ".gitignore") && !slices.Contains(created, "gitignore") {
		if err := writeInstallRecord(s, append(created, "gitignore")); err != nil {
			return errors.Wrapf(err, "writing %s", s.beside(claudeInstallRecord))
		}
	}
	if holdsPassword(o.db) {
		fmt.Fprintf(errOut, "warning: %s holds the URL's password: PGPASSWORD or ~/.pgpass keep it out of the settings\n", s.shown)
	}
	if machine != "" {
		where, vars := "the project and the home directory", "$CLAUDE_PROJECT_DIR and $HOME"
		if s.user {
			where, vars = "the home directory", "$HOME"
		}
		fmt.Fprintf(errOut, "warning: %s names the store by a path of this machine, %s: it is outside %s, which the hooks name from %s, so on another machine or checkout they find it only if that path is there\n",
			s.shown, machine, where, vars)
	}
	elsewhere, err := strataHooksElsewhere(s)
	if err != nil {
		return err
	}
	for _, e := range elsewhere {
		fmt.Fprintf(errOut, "warning: %s holds strata's hooks too: Claude Code runs those as well at each compaction, and the state is injected twice; %s\n", e.Settings, e.remove)
	}
	checkStrataOnPath(errOut)
	return nil
}

// ignoreStore adds the store the hook's command names and its log, when
// they are files in the project, to the project's ignore rules (the
// nearest .gitignore, companion.IgnoreFiles) and says where. They hold
// the session's transcripts; uninstall leaves the rules, as it leaves the
// store.
func ignoreStore(out io.Writer, s *claudeSettings, command string) (companion.Ignored, error) {
	db, ok := s.storeOf(command)
	if s.user || !ok {
		return companion.Ignored{}, nil
	}
	log := companion.DefaultLog(claudecode.Agent{}, db, s.project, "")
	var files []string
	if !postgres.IsURL(db) {
		files = append(files, db)
	}
	files = append(files, log, log+".1")
	files = slices.DeleteFunc(files, func(f string) bool {
		rel, err := filepath.Rel(s.project, f)
		return err != nil || !filepath.IsLocal(rel)
	})
	if len(files) == 0 {
		return companion.Ignored{}, nil
	}
	ig, err := companion.IgnoreFiles(s.project, files...)
	if err != nil {
		return ig, errors.Wrap(err, "adding the store to the project's ignore rules")
	}
	shown := s.show(ig.File)
	switch {
	case len(ig.Added) == 0:
		fmt.Fprintf(out, "git ignores the store and its log: %s lists them already\n", shown)
	case ig.Created:
		fmt.Fprintf(out, "git ignores the store and its log: created %s with %s\n", shown, strings.Join(ig.Added, " "))
	default:
		fmt.Fprintf(out, "git ignores the store and its log: added %s to %s\n", strings.Join(ig.Added, " "), shown)
	}
	return ig, nil
}

// removeIgnore removes the .gitignore install created beside the
// settings when it holds strata's rules alone (each "/" and a file name)
// and none of the files they name is there: a store or log the hooks made
// stays, and so do the rules that keep it out of git.
func removeIgnore(s *claudeSettings) {
	path := filepath.Join(s.dir, ".gitignore")
	text, err := os.ReadFile(path)
	if err != nil {
		return
	}
	for _, l := range strings.Split(strings.TrimSpace(string(text)), "\n") {
		name, ok := strings.CutPrefix(l, "/")
		if !ok || strings.Contains(name, "/") || name == "" || fileExists(filepath.Join(s.dir, name)) {
			return // another rule, someone's, or a file of strata's that stays
		}
	}
	_ = os.Remove(path)
}

// fileExists reports whether there is a file (or anything) at path.
func fileExists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// eventName names a hook event with its group's matcher.
func eventName(event, matcher string) string {
	if matcher == "" {
		return event
	}
	return event + " (matcher " + matcher + ")"
}

// checkStrataOnPath says on w when the strata the hooks run, the first on
// PATH, is missing or is another than the one running.
func checkStrataOnPath(w io.Writer) {
	found, err := exec.LookPath("strata")
	if err != nil {
		fmt.Fprintln(w, "warning: no strata on PATH: Claude Code runs the hooks' strata from its PATH; install it there, e.g. go install github.com/strata-go/strata/cmd/strata@latest")
		return
	}
	self, err := os.Executable()
	if err != nil {
		return
	}
	a, errA := filepath.EvalSymlinks(found)
	b, errB := filepath.EvalSymlinks(self)
	if errA == nil && errB == nil && a != b {
		fmt.Fprintf(w, "note: the strata on PATH is %s, not this one (%s): the hooks run that one\n", found, self)
	}
}

// settingsRemoval is strata's hooks taken out of one settings file: the
// text without them, to write back to target in mode.
type settingsRemoval struct {
	s       *claudeSettings
	target  string
	mode    fs.FileMode
	text    []byte
	removed []claudecode.HookChange
	empty   bool // the document is an empty object without them
}

// removeFrom returns strata's hooks taken out of text, the settings file
// s as readSettings read it, and of what created names (install's record)
// what they leave empty.
func removeFrom(s *claudeSettings, text []byte, target string, mode fs.FileMode, created []string) (*settingsRemoval, error) {
	r := &settingsRemoval{s: s, target: target, mode: mode}
	var err error
	if r.text, r.removed, r.empty, err = claudecode.UninstallHooks(s.shown, text, created); err != nil {
		return nil, err
	}
	return r, nil
}

// local returns the project's local settings beside s,
// .claude/settings.local.json.
func (s *claudeSettings) local() *claudeSettings {
	local := *s
	local.path, local.shown = filepath.Join(s.dir, claudeLocalSettingsFile), s.beside(claudeLocalSettingsFile)
	return &local
}

// uninstall removes strata's hooks and says what it removed: from the
// settings the flags choose, and for a project's from its local settings
// too, which Claude Code runs the hooks of as well. The local file is one
// person's, not committed: what goes out of it changes the sessions of the
// person running uninstall only. Install wrote nothing there, so only
// strata's hooks go, each with its group when the group holds nothing
// else; every list and object they leave empty stays, and so does the
// file. Both files are read before either is written.
func (o *claudeInstallOptions) uninstall(out, errOut io.Writer) error {
	s, err := o.settings()
	if err != nil {
		return err
	}
	text, target, mode, err := readSettings(s)
	if err != nil {
		return err
	}
	var main, local *settingsRemoval
	var created []string
	if text != nil {
		if created, err = readInstallRecord(s); err != nil {
			return err
		}
		if main, err = removeFrom(s, text, target, mode, created); err != nil {
			return err
		}
	}
	if !s.user {
		l := s.local()
		text, target, mode, err := readSettings(l)
		if err != nil {
			return err
		}
		if text != nil {
			local, err = removeFrom(l, text, target, mode, nil)
		}
		if errors.HasType(err, (*claudecode.SyntaxError)(nil)) {
			// Claude Code does not read such a file; it is not the one the
			// command is about, and uninstall does not stop for it.
			fmt.Fprintf(errOut, "warning: %v: uninstall leaves it as it is\n", err)
			local, err = nil, nil
		}
		if err != nil {
			return err
		}
	}
	switch {
	case main == nil:
		fmt.Fprintf(out, "%s: no such file: strata's hooks are not installed\n", s.shown)
	case len(main.removed) == 0:
		fmt.Fprintf(out, "%s holds no hook of strata's: nothing changed\n", s.shown)
	}
	var stores []string
	for _, r := range []*settingsRemoval{main, local} {
		if r == nil || len(r.removed) == 0 {
			continue
		}
		fmt.Fprintf(out, "removed strata's hooks from %s:\n", r.s.shown)
		for _, c := range r.removed {
			fmt.Fprintf(out, "  removed %s: %s\n", eventName(c.Event, c.Matcher), shownCommand(c.Command))
			if db, ok := r.s.storeOf(c.Command); ok && !slices.Contains(stores, db) {
				stores = append(stores, db)
			}
		}
		if r == main && r.empty && slices.Contains(created, "file") {
			if err := os.Remove(r.target); err != nil {
				return err
			}
			fmt.Fprintf(out, "removed %s: install created it, and nothing else is in it\n", r.s.shown)
		} else if err := writeSettings(r.target, r.mode, r.text); err != nil {
			return errors.Wrapf(err, "writing %s", r.s.shown)
		}
		if r != main {
			continue
		}
		if err := writeInstallRecord(s, nil); err != nil {
			return err
		}
		if slices.Contains(created, "gitignore") {
			removeIgnore(s)
		}
		if slices.Contains(created, "directory") {
			_ = os.Remove(s.dir) // only when empty: the store may be there
		}
	}
	for _, db := range stores {
		if postgres.IsURL(db) {
			fmt.Fprintf(out, "the store stays: %s\n", s.show(db))
			continue
		}
		shown, log := s.show(db), filepath.Join(filepath.Dir(db), companion.LogName)
		shownLog := filepath.Join(filepath.Dir(shown), companion.LogName)
		switch {
		case fileExists(db):
			fmt.Fprintf(out, "the store stays: %s; to delete it: rm -f %s %s\n", shown, shellQuote(shown), shellQuote(shownLog))
		case fileExists(log):
			fmt.Fprintf(out, "the hook's log stays: %s; to delete it: rm -f %s\n", shownLog, shellQuote(shownLog))
		}
	}
	return nil
}
