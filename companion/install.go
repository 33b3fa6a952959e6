package companion

import (
	"bytes"
	"encoding/json"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/cockroachdb/errors"

	"github.com/strata-go/strata/backend/boltfile"
	"github.com/strata-go/strata/backend/postgres"
	"github.com/strata-go/strata/internal/shell"
)

// InstallRecordName is install's note, in the agent's directory beside
// the settings, of what it created in them (the directory, the file, the
// hooks object, an event's list, a .gitignore), so that uninstall removes
// exactly that and leaves what was there before.
const InstallRecordName = "strata-install.json"

// SettingsFile is one of an agent's settings files, which holds its
// hooks: a project's (Settings.Dir and Settings.File in it) or the
// user's.
type SettingsFile struct {
	Agent   Agent
	User    bool
	Project string // the project directory, absolute; "" for the user's settings
	Home    string // the user's home directory, absolute
	Dir     string // the agent's directory holding the file, absolute
	Path    string // the file, absolute
	Shown   string // the file as output names it
}

// FindSettings returns agent a's settings file of the project in dir (the
// current directory when ""), or with user the user's. dir must be a
// directory.
func FindSettings(a Agent, user bool, dir string) (*SettingsFile, error) {
	home, err := os.UserHomeDir()
	if err != nil {
		return nil, errors.Wrap(err, "the home directory")
	}
	st := a.Settings()
	s := &SettingsFile{Agent: a, User: user, Home: home}
	switch {
	case user:
		s.Path = st.UserPath(home, os.Getenv)
		s.Dir = filepath.Dir(s.Path)
		s.Shown = s.Path
		return s, nil
	case dir == "":
		s.Shown = filepath.Join(st.Dir, st.File)
		if s.Project, err = os.Getwd(); err != nil {
			return nil, errors.Wrap(err, "the current directory")
		}
	default:
		s.Shown = filepath.Join(dir, st.Dir, st.File)
		if s.Project, err = filepath.Abs(dir); err != nil {
			return nil, err
		}
	}
	s.Dir = filepath.Join(s.Project, st.Dir)
	s.Path = filepath.Join(s.Dir, st.File)
	return s, nil
}

// UserPath returns the user's settings file, absolute: File in the
// directory UserDir returns, or in Dir under home.
func (st *Settings) UserPath(home string, getenv func(string) string) string {
	dir := filepath.Join(home, st.Dir)
	if st.UserDir != nil {
		dir = st.UserDir(home, getenv)
	}
	return filepath.Join(dir, st.File)
}

// Beside returns the file name in the settings' directory, as output
// names it.
func (s *SettingsFile) Beside(name string) string {
	return filepath.Join(filepath.Dir(s.Shown), name)
}

// Local returns the project's file of one person's settings beside s
// (Settings.LocalFile), nil for the user's settings or an agent without
// one.
func (s *SettingsFile) Local() *SettingsFile {
	name := s.Agent.Settings().LocalFile
	if s.User || name == "" {
		return nil
	}
	local := *s
	local.Path, local.Shown = filepath.Join(s.Dir, name), s.Beside(name)
	return &local
}

// Elsewhere is strata's hooks in another settings file the agent reads
// for the same sessions as the one a command is about.
type Elsewhere struct {
	Settings string         `json:"settings"`
	Hooks    []SettingsHook `json:"hooks"`
	// Remove says how to remove them.
	Remove string `json:"-"`
}

// others returns the settings files the agent reads beside s for a
// session of its project, and how to remove strata's hooks from each: for
// a project's file its local file and the user's settings; for the
// user's, those of the project in the current directory. A file that is
// s itself (the project is the home directory) is left out.
func (s *SettingsFile) others() ([]Elsewhere, []*SettingsFile, error) {
	name := s.Agent.Name()
	var hints []Elsewhere
	var files []*SettingsFile
	project := s
	if s.User {
		p, err := FindSettings(s.Agent, false, "")
		if err != nil {
			return nil, nil, err
		}
		project = p
		files, hints = append(files, p), append(hints, Elsewhere{Remove: "strata " + name + " uninstall removes them"})
	} else {
		u, err := FindSettings(s.Agent, true, "")
		if err != nil {
			return nil, nil, err
		}
		files, hints = append(files, u), append(hints, Elsewhere{Remove: "strata " + name + " uninstall --user removes them"})
	}
	if l := project.Local(); l != nil {
		files = append(files, l)
		hints = append(hints, Elsewhere{Remove: "take them out of it by hand, or strata " + name + " uninstall removes them with those of " + s.Agent.Settings().File})
	}
	for i := len(files) - 1; i >= 0; i-- {
		if files[i].Path == s.Path {
			files, hints = slices.Delete(files, i, i+1), slices.Delete(hints, i, i+1)
		}
	}
	return hints, files, nil
}

// Hooks returns strata's hooks in the settings file s, and whether the
// file exists (none when it does not).
func (s *SettingsFile) Hooks() (hooks []SettingsHook, exists bool, err error) {
	text, _, _, err := s.Read()
	if err != nil || text == nil {
		return nil, false, err
	}
	hooks, err = StrataHooks(s.Agent, s.Shown, text)
	return hooks, true, err
}

// Elsewhere returns strata's hooks in the other settings files the agent
// reads beside s, each file that holds some. A file it cannot read as
// settings is left out: it is not the one the command is about.
func (s *SettingsFile) Elsewhere() ([]Elsewhere, error) {
	hints, files, err := s.others()
	if err != nil {
		return nil, err
	}
	out := []Elsewhere{}
	for i, f := range files {
		if hooks, _, err := f.Hooks(); err == nil && len(hooks) > 0 {
			out = append(out, Elsewhere{Settings: f.Shown, Hooks: hooks, Remove: hints[i].Remove})
		}
	}
	return out, nil
}

// HookDB returns a store as the hook's command line names it — shell
// text — given db as --db gives it ("": the default, strata.db beside the
// settings; a relative file is taken from the current directory, as every
// command takes it). A file inside the project is named from the
// agent's project variable (Settings.ProjectEnv), which it sets for every
// hook, and one in the home directory from $HOME, so that the settings
// hold no path of this machine and work in any checkout; a PostgreSQL URL
// as it is. A file outside both is named by its absolute path: machine
// is that path then.
func (s *SettingsFile) HookDB(db string) (arg, machine string, err error) {
	switch {
	case db == "":
		db = filepath.Join(s.Dir, StoreName)
	case postgres.IsURL(db):
		return shell.Quote(db), "", nil
	}
	abs, err := filepath.Abs(db)
	if err != nil {
		return "", "", err
	}
	for _, root := range []struct{ dir, name string }{{s.Project, s.Agent.Settings().ProjectEnv}, {s.Home, "HOME"}} {
		if root.dir == "" || root.name == "" {
			continue
		}
		if rel, err := filepath.Rel(root.dir, abs); err == nil && rel != "." && filepath.IsLocal(rel) {
			return `"$` + root.name + `"/` + shell.Quote(filepath.ToSlash(rel)), "", nil
		}
	}
	return shell.Quote(abs), abs, nil
}

// HookCommand is the command line of agent a's hook on store db (shell
// text, HookDB's). It runs the strata on PATH, as the agent's
// environment finds it: the settings may be committed and shared, and
// the user's kept in a dotfiles repository, so they name no path of one
// machine, and the entry keeps working when strata is installed again
// elsewhere (StrataOnPath says which strata that is).
func HookCommand(a Agent, db string) string { return "strata " + a.Name() + " hook --db " + db }

// StoreOf returns the store a hook's command line names, as a path (or
// URL) here: its --db with the agent's project variable the project's
// directory (the current one for the user's settings) and $HOME the home
// directory. ok is false when the line names none.
func (s *SettingsFile) StoreOf(command string) (db string, ok bool) {
	project := s.Project
	if project == "" {
		project, _ = os.Getwd()
	}
	env := s.Agent.Settings().ProjectEnv
	words, ok := ShellWords(command, func(name string) string {
		switch {
		case name == env && env != "":
			return project
		case name == "HOME":
			return s.Home
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

// Show returns a store file as output names it: inside the project as
// the settings are named (relative to the current directory without
// --dir), any other as it is.
func (s *SettingsFile) Show(db string) string {
	if postgres.IsURL(db) || s.Project == "" || !filepath.IsAbs(db) {
		return db
	}
	if rel, err := filepath.Rel(s.Project, db); err == nil && filepath.IsLocal(rel) {
		return filepath.Join(filepath.Dir(filepath.Dir(s.Shown)), rel)
	}
	return db
}

// installRecord is what InstallRecordName holds.
type installRecord struct {
	Settings string   `json:"settings"` // the settings file it is about, in the same directory
	Created  []string `json:"created"`  // "directory", "file", "hooks", "hooks.EVENT", "gitignore"
}

// readInstallRecord returns install's record beside s: what it created
// (none without a record, or with one about another file).
func (s *SettingsFile) readInstallRecord() ([]string, error) {
	b, err := os.ReadFile(filepath.Join(s.Dir, InstallRecordName))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var r installRecord
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, errors.Wrapf(err, "%s", s.Beside(InstallRecordName))
	}
	if r.Settings != s.Agent.Settings().File {
		return nil, nil
	}
	return r.Created, nil
}

// writeInstallRecord writes install's record beside s, or removes it when
// install created nothing.
func (s *SettingsFile) writeInstallRecord(created []string) error {
	path := filepath.Join(s.Dir, InstallRecordName)
	if len(created) == 0 {
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(installRecord{Settings: s.Agent.Settings().File, Created: created}); err != nil {
		return err
	}
	b := buf.Bytes()
	if was, err := os.ReadFile(path); err == nil && bytes.Equal(was, b) {
		return nil
	}
	return writeFileAtomic(path, 0o644, b)
}

// Read returns the settings file's bytes (nil when there is none), the
// file to write them back to — the target of a link, which stays a link
// — and its mode.
func (s *SettingsFile) Read() (text []byte, target string, mode fs.FileMode, err error) {
	target, mode = s.Path, 0o644
	if t, err := filepath.EvalSymlinks(s.Path); err == nil {
		target = t
	} else if fi, lerr := os.Lstat(s.Path); lerr == nil && fi.Mode()&fs.ModeSymlink != 0 {
		to, _ := os.Readlink(s.Path)
		return nil, "", 0, errors.WithHint(errors.Newf("%s is a link to %s, which does not exist", s.Shown, to),
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
		return nil, "", 0, errors.Newf("%s is a directory", s.Shown)
	}
	text, err = os.ReadFile(target)
	if text == nil && err == nil {
		text = []byte{}
	}
	return text, target, fi.Mode().Perm(), err
}

// writeFileAtomic replaces the file at target with text atomically (a
// temporary file beside it, fsynced and renamed into place), in mode.
func writeFileAtomic(target string, mode fs.FileMode, text []byte) error {
	_, err := boltfile.WriteFileAtomic(target, mode, func(w io.Writer) (int64, error) {
		n, err := w.Write(text)
		return int64(n), err
	})
	return err
}

// Installed is what Install did.
type Installed struct {
	// Created says install created the file, Unchanged that it held
	// strata's hooks already, as they are: nothing was written.
	Created, Unchanged bool
	Changes            []HookChange
	// Store is the store the hooks name (absolute, or a URL), "" for
	// none; StoreMissing says it is a file the hook has not made yet.
	Store        string
	StoreMissing bool
	// Ignored is what the project's ignore rules got for the store and
	// its log (IgnoreFiles), File "" for a store outside the project or
	// the user's settings.
	Ignored Ignored
	// Machine is the store's absolute path when it is outside the project
	// and the home directory: the hooks find it only where that path is.
	Machine string
	// Elsewhere is strata's hooks in the other settings files the agent
	// reads for the same sessions: it runs those too.
	Elsewhere []Elsewhere
}

// Install adds strata's hooks on store db (as --db gives it: "" for the
// default, a file or a postgres:// URL) to the settings file s, creating
// it and its directory when missing, writes install's record of what it
// created, and adds the store and its log to the project's ignore rules.
// Every other byte of the file stays (InstallHooks); the file is replaced
// atomically, its mode kept, a link followed.
func Install(s *SettingsFile, db string) (*Installed, error) {
	arg, machine, err := s.HookDB(db)
	if err != nil {
		return nil, err
	}
	command := HookCommand(s.Agent, arg)
	text, target, mode, err := s.Read()
	if err != nil {
		return nil, err
	}
	newText, changes, created, err := InstallHooks(s.Agent, s.Shown, text, command)
	if err != nil {
		return nil, err
	}
	r := &Installed{Changes: changes, Machine: machine, Created: text == nil, Unchanged: bytes.Equal(newText, text)}
	fresh := !slices.ContainsFunc(changes, func(c HookChange) bool { return c.What != "added" })
	if r.Created {
		if _, err := os.Stat(s.Dir); errors.Is(err, fs.ErrNotExist) {
			created = append([]string{"directory"}, created...)
		}
		if err := os.MkdirAll(s.Dir, 0o755); err != nil {
			return nil, err
		}
	}
	if !r.Unchanged {
		if err := writeFileAtomic(target, mode, newText); err != nil {
			return nil, errors.Wrapf(err, "writing %s", s.Shown)
		}
	}
	// What uninstall removes: what this install created, and when some of
	// strata's entries were there already, what the installs before did.
	if !fresh {
		before, err := s.readInstallRecord()
		if err != nil {
			return nil, err
		}
		for _, c := range before {
			if !slices.Contains(created, c) {
				created = append(created, c)
			}
		}
	}
	if err := s.writeInstallRecord(created); err != nil {
		return nil, errors.Wrapf(err, "writing %s", s.Beside(InstallRecordName))
	}
	if store, ok := s.StoreOf(command); ok {
		r.Store = store
		_, err := os.Stat(store)
		r.StoreMissing = !postgres.IsURL(store) && errors.Is(err, fs.ErrNotExist)
		if r.Ignored, err = s.ignoreStore(store); err != nil {
			return nil, err
		}
		if r.Ignored.Created && r.Ignored.File == filepath.Join(s.Dir, ".gitignore") && !slices.Contains(created, "gitignore") {
			if err := s.writeInstallRecord(append(created, "gitignore")); err != nil {
				return nil, errors.Wrapf(err, "writing %s", s.Beside(InstallRecordName))
			}
		}
	}
	if r.Elsewhere, err = s.Elsewhere(); err != nil {
		return nil, err
	}
	return r, nil
}

// ignoreStore adds the store db and its log, when they are files in the
// project, to the project's ignore rules (the nearest .gitignore,
// IgnoreFiles). They hold the session's transcripts; uninstall leaves
// the rules, as it leaves the store.
func (s *SettingsFile) ignoreStore(db string) (Ignored, error) {
	if s.User {
		return Ignored{}, nil
	}
	log := DefaultLog(s.Agent, db, s.Project, "")
	var files []string
	if !postgres.IsURL(db) {
		files = append(files, db)
	}
	files = append(files, log, log+".1")
	files = slices.DeleteFunc(files, func(f string) bool {
		rel, err := filepath.Rel(s.Project, f)
		return err != nil || !filepath.IsLocal(rel)
	})
	if len(files) == 0 {
		return Ignored{}, nil
	}
	ig, err := IgnoreFiles(s.Project, files...)
	return ig, errors.Wrap(err, "adding the store to the project's ignore rules")
}

// removeIgnore removes the .gitignore install created beside the
// settings when it holds strata's rules alone (each "/" and a file name)
// and none of the files they name is there: a store or log the hooks made
// stays, and so do the rules that keep it out of git.
func (s *SettingsFile) removeIgnore() {
	path := filepath.Join(s.Dir, ".gitignore")
	text, err := os.ReadFile(path)
	if err != nil {
		return
	}
	for _, l := range strings.Split(strings.TrimSpace(string(text)), "\n") {
		name, ok := strings.CutPrefix(l, "/")
		if !ok || strings.Contains(name, "/") || name == "" || fileExists(filepath.Join(s.Dir, name)) {
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

// StrataOnPath returns the strata the hooks run, the first on PATH ("" for
// none), and self, the one running, when that is another one ("" when it
// is the same or cannot be told).
func StrataOnPath() (found, self string) {
	found, err := exec.LookPath("strata")
	if err != nil {
		return "", ""
	}
	self, err = os.Executable()
	if err != nil {
		return found, ""
	}
	a, errA := filepath.EvalSymlinks(found)
	b, errB := filepath.EvalSymlinks(self)
	if errA == nil && errB == nil && a != b {
		return found, self
	}
	return found, ""
}

// Removal is strata's hooks taken out of one settings file.
type Removal struct {
	File    *SettingsFile
	Removed []HookChange
	// FileRemoved says the file went too: install created it, and nothing
	// else is in it.
	FileRemoved bool
	target      string
	mode        fs.FileMode
	text        []byte
	empty       bool
}

// StoreLeft is a store strata's removed hooks named, which uninstall
// leaves.
type StoreLeft struct {
	Store     string // absolute, or a URL
	Exists    bool   // a file store the hook made
	LogExists bool   // the hook's log beside it
	Log       string // the log, absolute ("" for a URL)
}

// Uninstalled is what Uninstall did.
type Uninstalled struct {
	// Missing says the settings file does not exist: nothing was
	// installed.
	Missing bool
	// Main and Local are strata's hooks taken out of the settings file
	// and of the project's local file (Settings.LocalFile), nil for a
	// file that is not there; Removed is empty for a file that held none.
	Main, Local *Removal
	// LocalError is why the local file was left as it is: not JSON as the
	// agent reads it.
	LocalError error
	Stores     []StoreLeft
}

// removeFrom returns strata's hooks taken out of s, and of what created
// names (install's record) what they leave empty.
func removeFrom(s *SettingsFile, created []string) (*Removal, error) {
	text, target, mode, err := s.Read()
	if err != nil || text == nil {
		return nil, err
	}
	r := &Removal{File: s, target: target, mode: mode}
	if r.text, r.Removed, r.empty, err = UninstallHooks(s.Agent, s.Shown, text, created); err != nil {
		return nil, err
	}
	return r, nil
}

// Uninstall removes strata's hooks from the settings file s and, for a
// project's, from its local file too, which the agent runs the hooks of
// as well. The local file is one person's, not committed: what goes out
// of it changes the sessions of the person running uninstall only.
// Install wrote nothing there, so only strata's hooks go, each with its
// group when the group holds nothing else; every list and object they
// leave empty stays, and so does the file. From s go also what install
// created (its record) once empty. Both files are read before either is
// written. The stores stay.
func Uninstall(s *SettingsFile) (*Uninstalled, error) {
	u := &Uninstalled{}
	text, _, _, err := s.Read()
	if err != nil {
		return nil, err
	}
	var created []string
	if u.Missing = text == nil; !u.Missing {
		if created, err = s.readInstallRecord(); err != nil {
			return nil, err
		}
		if u.Main, err = removeFrom(s, created); err != nil {
			return nil, err
		}
	}
	if l := s.Local(); l != nil {
		u.Local, err = removeFrom(l, nil)
		if errors.HasType(err, (*SyntaxError)(nil)) {
			// The agent does not read such a file; it is not the one the
			// command is about, and uninstall does not stop for it.
			u.Local, u.LocalError, err = nil, err, nil
		}
		if err != nil {
			return nil, err
		}
	}
	var stores []string
	for _, r := range []*Removal{u.Main, u.Local} {
		if r == nil || len(r.Removed) == 0 {
			continue
		}
		for _, c := range r.Removed {
			if db, ok := r.File.StoreOf(c.Command); ok && !slices.Contains(stores, db) {
				stores = append(stores, db)
			}
		}
		if r == u.Main && r.empty && slices.Contains(created, "file") {
			if err := os.Remove(r.target); err != nil {
				return nil, err
			}
			r.FileRemoved = true
		} else if err := writeFileAtomic(r.target, r.mode, r.text); err != nil {
			return nil, errors.Wrapf(err, "writing %s", r.File.Shown)
		}
		if r != u.Main {
			continue
		}
		if err := s.writeInstallRecord(nil); err != nil {
			return nil, err
		}
		if slices.Contains(created, "gitignore") {
			s.removeIgnore()
		}
		if slices.Contains(created, "directory") {
			_ = os.Remove(s.Dir) // only when empty: the store may be there
		}
	}
	for _, db := range stores {
		left := StoreLeft{Store: db}
		if !postgres.IsURL(db) {
			left.Log = filepath.Join(filepath.Dir(db), LogName)
			left.Exists, left.LogExists = fileExists(db), fileExists(left.Log)
		}
		u.Stores = append(u.Stores, left)
	}
	return u, nil
}
