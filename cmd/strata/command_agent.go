package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/cockroachdb/errors"
	"github.com/spf13/cobra"

	"github.com/strata-go/strata/backend/postgres"
	"github.com/strata-go/strata/companion"
	"github.com/strata-go/strata/companion/claudecode"
	"github.com/strata-go/strata/companion/codex"
	"github.com/strata-go/strata/companion/gemini"
)

// agents are the coding agents strata runs beside, each as
// `strata NAME install|uninstall|status|hook` (package companion, an
// adapter each). Adding an agent is its adapter package and a line here.
var agents = []companion.Agent{
	claudecode.Agent{},
	codex.Agent{},
	gemini.Agent{},
}

// defaultHookTimeout is the hook's wait for the store's lock: long enough
// for another session's hook on the same store to finish, short beside
// the time an agent gives a hook.
const defaultHookTimeout = 10 * time.Second

// newAgentCommands returns `strata NAME` for each of agents.
func newAgentCommands() []*cobra.Command {
	var out []*cobra.Command
	for _, a := range agents {
		out = append(out, newAgentCommand(a))
	}
	return out
}

// agentText is what the help of an agent's commands says of it.
type agentText struct {
	title, name string
	doc         string // its page, docs/NAME.md
	settings    string // a project's settings file, relative to the project
	user        string // the user's
	local       string // a project's local settings file, "" for none
	env         string // the project variable, "$CLAUDE_PROJECT_DIR"; "" for none
	events      string // the events and matchers install writes
	store       string // the store's default as the hooks name it
}

// userSettings returns the user's settings file of s as --user would
// edit it, under "~/" when it is in the home directory (the path
// Settings.UserDir gives from the environment, as Codex's $CODEX_HOME).
func userSettings(s *companion.Settings) string {
	home, err := os.UserHomeDir()
	if err != nil {
		return "~/" + filepath.Join(s.Dir, s.File)
	}
	path := s.UserPath(home, os.Getenv)
	if rel, err := filepath.Rel(home, path); err == nil && filepath.IsLocal(rel) {
		return "~/" + rel
	}
	return path
}

// textOf returns what the help of a's commands says of it.
func textOf(a companion.Agent) agentText {
	s := a.Settings()
	t := agentText{title: a.Title(), name: a.Name(), doc: "docs/" + a.Name() + ".md",
		settings: filepath.Join(s.Dir, s.File), user: userSettings(s)}
	if s.LocalFile != "" {
		t.local = filepath.Join(s.Dir, s.LocalFile)
	}
	var evs []string
	for _, ev := range s.Events {
		e := ev.Name
		if ev.Matcher != "" {
			e += " (matcher " + ev.Matcher + ")"
		}
		evs = append(evs, e)
	}
	t.events = strings.Join(evs, ", ")
	t.store = filepath.Join(s.Dir, companion.StoreName)
	if s.ProjectEnv != "" {
		t.env = "$" + s.ProjectEnv
		t.store = `"` + t.env + `"/` + t.store
	}
	return t
}

// newAgentCommand returns `strata NAME`: strata beside agent a, as hooks
// in its settings.
func newAgentCommand(a companion.Agent) *cobra.Command {
	t := textOf(a)
	cmd := &cobra.Command{
		Use:   t.name,
		Short: fmt.Sprintf("Carry verified state across %s's compactions, as its hooks", t.title),
		Long: fmt.Sprintf(`Run strata beside %[1]s (%[2]s). %[1]s runs "strata %[3]s hook"
around its compactions (%[4]s): strata imports the session's transcript
into a store, compacts it where %[1]s cuts into a marker checked against
the raw log, checks %[1]s's own summary against the state the raw
transcript implies there, and adds that state to the compacted context.

install adds the hooks to %[1]s's settings, uninstall removes them,
status shows them, the store and its sessions; hook is what %[1]s runs.`, t.title, t.doc, t.name, t.events),
	}
	cmd.AddCommand(newAgentInstallCommand(a, t), newAgentUninstallCommand(a, t), newAgentStatusCommand(a, t), newAgentHookCommand(a, t))
	return cmd
}

// agentSettingsOptions are the flags that choose the settings file.
type agentSettingsOptions struct {
	agent companion.Agent
	user  bool
	db    string // install and status
	dir   string
}

// addSettingsFlags adds --user and --dir, which choose the settings file.
func (o *agentSettingsOptions) addSettingsFlags(cmd *cobra.Command, t agentText) {
	cmd.Flags().BoolVar(&o.user, "user", false, fmt.Sprintf("the user's settings, %s, for every project", t.user))
	cmd.Flags().StringVar(&o.dir, "dir", "", "the project's directory (default: the current one)")
}

// settings returns the settings file the flags choose.
func (o *agentSettingsOptions) settings() (*companion.SettingsFile, error) {
	if o.user && o.dir != "" {
		return nil, usagef("--user and --dir choose different settings: --user is the user's, for every project; --dir a project's")
	}
	if o.dir != "" {
		if fi, err := os.Stat(o.dir); err != nil {
			return nil, errors.WithHintf(errors.Wrap(err, "--dir"),
				"--dir names the project's directory, which must exist: give it the project's, or create it first with mkdir -p %s", shellQuote(o.dir))
		} else if !fi.IsDir() {
			return nil, usagef("--dir %s is not a directory", o.dir)
		}
	}
	return companion.FindSettings(o.agent, o.user, o.dir)
}

// show returns a store as output names it (SettingsFile.Show), a URL
// without its password.
func show(s *companion.SettingsFile, db string) string { return shownDB(s.Show(db)) }

// eventName names a hook event with its group's matcher.
func eventName(event, matcher string) string {
	if matcher == "" {
		return event
	}
	return event + " (matcher " + matcher + ")"
}

// newAgentInstallCommand returns `strata NAME install`.
func newAgentInstallCommand(a companion.Agent, t agentText) *cobra.Command {
	o := &agentSettingsOptions{agent: a}
	where, outside := "the home directory it is named from $HOME", "the home directory"
	if t.env != "" {
		where = fmt.Sprintf("the project or the home directory it is named from %s or $HOME", t.env)
		outside = "the project and the home directory"
	}
	local := ""
	if t.local != "" {
		local = " its " + t.local + " and"
	}
	named := "written " + t.store + `: the entry works from any directory and in any checkout
and holds no path of this machine`
	if t.env == "" {
		named = t.store + ` of the project, written from $HOME when the project is under it,
else as its absolute path, a path of this machine: ` + t.title + ` names the
project in no variable for its hooks, which run in the session's directory`
	}
	cmd := &cobra.Command{
		Use:   "install [--user] [--db DB] [--dir PROJECT]",
		Short: fmt.Sprintf("Add strata's hooks to %s's settings", t.title),
		Long: fmt.Sprintf(`Add strata's hooks to %[1]s's settings: %[2]s of the
project in the current directory (--dir PROJECT: that project's), created
with its directory when missing, or with --user %[3]s,
for every project. A hook under each of %[4]s,
each of the command strata %[5]s hook --db DB.

DB is the store. By default it is beside the settings, strata.db,
%[6]s. --db DB chooses another: a file
(inside %[7]s) or a postgres:// URL. A relative file is taken from the
current directory, as every strata command takes it, not from --dir; a
file outside %[10]s stands in the settings
as its absolute path, and install warns that the hooks find it only
where that path is. The hook makes the store at its first run and writes
its log, strata.log, beside it; install adds both to the project's
.gitignore.

%[1]s runs the hooks of every settings file it reads for a session:
the project's %[2]s,%[8]s %[3]s. Install warns
when another of them holds strata's hooks already (they would run twice,
into two stores), naming the file and how to remove them there.

The hooks run the strata on %[1]s's PATH, for the same reason;
install says when PATH has no strata, or another one than the one running.

Everything else in the file stays byte for byte as it was: install adds
text and changes none, and uninstall takes out exactly what it added.
Installing again changes nothing and says so; with another --db it changes
the command of strata's entries only. A file %[1]s would not read is
refused, naming its line and column, and left as it is. The file is
replaced atomically, its mode kept; a link is followed. What install
created (the file, the hooks object, an event's list) it notes in
%[9]s, so that uninstall removes those too, and only those.`,
			t.title, t.settings, t.user, t.events, t.name, named, where, local,
			filepath.Join(a.Settings().Dir, companion.InstallRecordName), outside),
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, args []string) error {
			if cmd.Flags().Changed("db") && o.db == "" {
				return usagef("--db must not be empty: leave it out for the default, strata.db beside the settings")
			}
			if isURL(o.db) {
				return usagef("--db %s is a debug handler's URL, which only reads: the hook writes to its store, a file or a postgres:// URL", o.db)
			}
			return o.install(cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	o.addSettingsFlags(cmd, t)
	cmd.Flags().StringVar(&o.db, "db", "", "the store: a file or a postgres:// URL (default: strata.db beside the settings)")
	return cmd
}

// install adds strata's hooks and says what it changed.
func (o *agentSettingsOptions) install(out, errOut io.Writer) error {
	s, err := o.settings()
	if err != nil {
		return err
	}
	r, err := companion.Install(s, o.db)
	if err != nil {
		return err
	}
	switch {
	case r.Unchanged:
		fmt.Fprintf(out, "%s holds strata's hooks already: nothing changed\n", s.Shown)
	case r.Created:
		fmt.Fprintf(out, "created %s with strata's hooks:\n", s.Shown)
	default:
		fmt.Fprintf(out, "changed %s:\n", s.Shown)
	}
	for _, c := range r.Changes {
		fmt.Fprintf(out, "  %s %s: %s", c.What, eventName(c.Event, c.Matcher), shownCommand(c.Command))
		if c.Was != "" {
			fmt.Fprintf(out, " (was %s)", shownCommand(c.Was))
		}
		fmt.Fprintln(out)
	}
	if r.Store != "" {
		fmt.Fprintf(out, "store: %s", show(s, r.Store))
		if r.StoreMissing {
			fmt.Fprint(out, " (none yet: the hook makes it at the first compaction)")
		}
		fmt.Fprintln(out)
	}
	if ig := r.Ignored; ig.File != "" {
		shown := show(s, ig.File)
		switch {
		case len(ig.Added) == 0:
			fmt.Fprintf(out, "git ignores the store and its log: %s lists them already\n", shown)
		case ig.Created:
			fmt.Fprintf(out, "git ignores the store and its log: created %s with %s\n", shown, strings.Join(ig.Added, " "))
		default:
			fmt.Fprintf(out, "git ignores the store and its log: added %s to %s\n", strings.Join(ig.Added, " "), shown)
		}
	}
	if holdsPassword(o.db) {
		fmt.Fprintf(errOut, "warning: %s holds the URL's password: PGPASSWORD or ~/.pgpass keep it out of the settings\n", s.Shown)
	}
	if r.Machine != "" {
		// An agent that names the project in no variable for its hooks
		// (Codex) has a store inside the project named from $HOME only.
		where, vars, why := "the home directory", "$HOME", ""
		if env := o.agent.Settings().ProjectEnv; env != "" && !s.User {
			where, vars = "the project and the home directory", "$"+env+" and $HOME"
		} else if env == "" && !s.User {
			why = fmt.Sprintf(" (%s names the project in no variable for its hooks)", o.agent.Title())
		}
		fmt.Fprintf(errOut, "warning: %s names the store by a path of this machine, %s: it is outside %s, which the hooks name from %s%s, so on another machine or checkout they find it only if that path is there\n",
			s.Shown, r.Machine, where, vars, why)
	}
	for _, e := range r.Elsewhere {
		fmt.Fprintf(errOut, "warning: %s holds strata's hooks too: %s runs those as well at each compaction, and the state is injected twice; %s\n", e.Settings, o.agent.Title(), e.Remove)
	}
	switch found, self := companion.StrataOnPath(); {
	case found == "":
		fmt.Fprintf(errOut, "warning: no strata on PATH: %s runs the hooks' strata from its PATH; install it there, e.g. go install github.com/strata-go/strata/cmd/strata@latest\n", o.agent.Title())
	case self != "":
		fmt.Fprintf(errOut, "note: the strata on PATH is %s, not this one (%s): the hooks run that one\n", found, self)
	}
	return nil
}

// newAgentUninstallCommand returns `strata NAME uninstall`.
func newAgentUninstallCommand(a companion.Agent, t agentText) *cobra.Command {
	o := &agentSettingsOptions{agent: a}
	local := ""
	if t.local != "" {
		local = fmt.Sprintf(`

In a project, strata's hooks come out of %[1]s too
(one person's settings, not committed), whose hooks %[2]s runs as
well: exactly their text, each with its group when the group holds
nothing else; the lists and objects they leave empty stay, and so does
the file. A local file %[2]s would not read is left as it is, with a
warning. --user edits the user's settings only.`, t.local, t.title)
	}
	cmd := &cobra.Command{
		Use:   "uninstall [--user] [--dir PROJECT]",
		Short: fmt.Sprintf("Remove strata's hooks from %s's settings", t.title),
		Long: fmt.Sprintf(`Remove strata's hooks from %[1]s's settings (the project's, or with
--user the user's, as install): every hook whose command is strata's,
strata %[2]s hook, under any event, with its group when the group
holds nothing else. The event lists, the hooks object and the file that
install created (its note, %[3]s) go too once
nothing else is in them; everything else stays byte for byte. It says
what it removed, or that nothing was installed.%[4]s

The store stays: when the hook has made it (or its log), uninstall says
where it is and how to delete it.`, t.title, t.name, filepath.Join(a.Settings().Dir, companion.InstallRecordName), local),
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.uninstall(cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	o.addSettingsFlags(cmd, t)
	return cmd
}

// uninstall removes strata's hooks and says what it removed.
func (o *agentSettingsOptions) uninstall(out, errOut io.Writer) error {
	s, err := o.settings()
	if err != nil {
		return err
	}
	u, err := companion.Uninstall(s)
	if err != nil {
		return err
	}
	if u.LocalError != nil {
		fmt.Fprintf(errOut, "warning: %v: uninstall leaves it as it is\n", u.LocalError)
	}
	switch {
	case u.Missing:
		fmt.Fprintf(out, "%s: no such file: strata's hooks are not installed\n", s.Shown)
	case len(u.Main.Removed) == 0:
		fmt.Fprintf(out, "%s holds no hook of strata's: nothing changed\n", s.Shown)
	}
	for _, r := range []*companion.Removal{u.Main, u.Local} {
		if r == nil || len(r.Removed) == 0 {
			continue
		}
		fmt.Fprintf(out, "removed strata's hooks from %s:\n", r.File.Shown)
		for _, c := range r.Removed {
			fmt.Fprintf(out, "  removed %s: %s\n", eventName(c.Event, c.Matcher), shownCommand(c.Command))
		}
		if r.FileRemoved {
			fmt.Fprintf(out, "removed %s: install created it, and nothing else is in it\n", r.File.Shown)
		}
	}
	for _, st := range u.Stores {
		if postgres.IsURL(st.Store) {
			fmt.Fprintf(out, "the store stays: %s\n", show(s, st.Store))
			continue
		}
		shown := show(s, st.Store)
		shownLog := filepath.Join(filepath.Dir(shown), companion.LogName)
		switch {
		case st.Exists:
			fmt.Fprintf(out, "the store stays: %s; to delete it: rm -f %s %s\n", shown, shellQuote(shown), shellQuote(shownLog))
		case st.LogExists:
			fmt.Fprintf(out, "the hook's log stays: %s; to delete it: rm -f %s\n", shownLog, shellQuote(shownLog))
		}
	}
	return nil
}

// agentStatusOptions are the flags of `strata NAME status`.
type agentStatusOptions struct {
	agentSettingsOptions
	json    bool
	timeout time.Duration
	store   string // the store read: --db, or the hooks'
}

// newAgentStatusCommand returns `strata NAME status`.
func newAgentStatusCommand(a companion.Agent, t agentText) *cobra.Command {
	o := &agentStatusOptions{agentSettingsOptions: agentSettingsOptions{agent: a}}
	others := t.user
	if t.local != "" {
		others = "the project's " + t.local + ", " + others
	}
	cmd := &cobra.Command{
		Use:   "status [--user] [--dir PROJECT] [--db DB] [--json]",
		Short: fmt.Sprintf("Show strata's hooks in %s's settings, their store and its sessions", t.title),
		Long: fmt.Sprintf(`Show whether strata's hooks are in %[1]s's settings (the project's,
or with --user the user's, as install), each with its event and command;
the store they write (--db DB: that one instead); and the sessions of the
store, one line each: its events, the compactions of %[1]s's that
its transcript recorded, strata's valid markers, the marker a resume
serves (LATEST, - for none) and the facts its nodes carry at their
boundary: the calls still open (OPEN), the failed calls, the keys
rejected and superseded, the artifacts, and the active constraints. After
the hooks come strata's hooks in every other settings file %[1]s
reads for the same sessions (%[2]s; with --user the project's in the
current directory), which %[1]s runs too, each with how to remove them.

A store the hook has not made yet (before the first compaction) is said
to be none yet; that, as hooks not installed, is a state, exit 0. The
store is opened read-only, waiting at most --timeout for a hook that
holds it; one it cannot read (damaged, held longer, not a store) is an
error, exit 1, after the hooks are shown.

--json prints one document: {"settings", "installed", "hooks":[{"event",
"matcher", "command"}], "missing", "elsewhere":[{"settings", "hooks"}],
"store", "store_exists", "sessions":[{"id", "events", "compactions",
"markers_valid", "markers_invalid", "refusals", "latest_marker",
"boundary", "facts": {"unresolved", "failures", "rejected", "superseded",
"failed_keys", "artifacts", "constraints"}, "last_time", "summary_checks":
[{"seq", "summary_seq", "boundary", "facts", "omitted",
"summary_omitted"}]}]}: summary_checks are the checks of %[1]s's
summaries the hooks stored, one per compaction, each listing the facts the
raw log implies at its boundary that the summary does not mention
(summary_omitted). When the store cannot be read the document comes all
the same, "sessions" null, with "error" and "hints": what stderr says
(Error: …, Hint: …).`, t.title, others),
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkTimeout(o.timeout); err != nil {
				return err
			}
			if cmd.Flags().Changed("db") && o.db == "" {
				return usagef("--db must not be empty: leave it out for the store the hooks write")
			}
			err := o.run(cmd)
			if err != nil && o.db == "" && o.store != "" {
				// What the error says of the store (damage, a lock, a file
				// not strata's) names the store the hooks write, as --db.
				_ = cmd.Flags().Set("db", o.store)
			}
			return err
		},
	}
	o.addSettingsFlags(cmd, t)
	cmd.Flags().StringVar(&o.db, "db", "", "the store to show (default: the one the hooks write)")
	addJSONFlag(cmd, &o.json, "one JSON document")
	addTimeoutFlag(cmd, &o.timeout)
	return cmd
}

// run shows the status.
func (o *agentStatusOptions) run(cmd *cobra.Command) error {
	out := cmd.OutOrStdout()
	s, err := o.settings()
	if err != nil {
		return err
	}
	st, err := companion.HookStatus(s, o.db)
	if st != nil {
		o.store = st.StorePath
	}
	if err != nil && st == nil {
		return err
	}
	// What it prints of the commands and the store: without a URL's
	// password.
	st.Store = shownDB(st.Store)
	for i := range st.Hooks {
		st.Hooks[i].Command = shownCommand(st.Hooks[i].Command)
	}
	for _, e := range st.Elsewhere {
		for i := range e.Hooks {
			e.Hooks[i].Command = shownCommand(e.Hooks[i].Command)
		}
	}
	if !o.json {
		// The hooks first: what the settings say stands whatever the store's
		// state, a damaged one included.
		o.printHooks(out, st)
	}
	if err != nil {
		return o.storeFailed(cmd, st, err)
	}
	if st.StoreExists {
		if st.Sessions, err = o.sessions(st.StorePath); err != nil {
			return o.storeFailed(cmd, st, err)
		}
	}
	if o.json {
		return writeJSON(out, st)
	}
	return printStore(out, st)
}

// sessions reads the sessions of the store at path.
func (o *agentStatusOptions) sessions(path string) (out []companion.SessionStatus, err error) {
	db, err := openReadOnly(path, o.timeout)
	if err != nil {
		return nil, err
	}
	defer closeDB(db, &err)
	return companion.Sessions(db, o.agent)
}

// storeFailed reports err, which kept the store st names from being read.
// As text, the hooks part is out already and err is returned, for the
// command line to print as any error. With --json the document still
// comes, with the hints the command line would add to err (explain) and
// "sessions" null, then err on stderr as JSON, as any error: exit 1 both
// ways.
func (o *agentStatusOptions) storeFailed(cmd *cobra.Command, st *companion.Status, err error) error {
	if !o.json {
		return err
	}
	err = explain(cmd, err, o.store)
	st.Sessions, st.Error, st.Hints = nil, err.Error(), errors.GetAllHints(err)
	if werr := writeJSON(cmd.OutOrStdout(), st); werr != nil {
		return werr
	}
	printJSONError(cmd.ErrOrStderr(), err, exitError)
	return &exitCodeError{code: exitError}
}

// printHooks writes the hooks part of the status as text.
func (o *agentStatusOptions) printHooks(out io.Writer, st *companion.Status) {
	install := "strata " + o.agent.Name() + " install adds them"
	switch {
	case !st.SettingsExist:
		fmt.Fprintf(out, "hooks: not installed: %s does not exist; %s\n", st.Settings, install)
	case len(st.Hooks) == 0:
		fmt.Fprintf(out, "hooks: not installed in %s; %s\n", st.Settings, install)
	case !st.Installed:
		fmt.Fprintf(out, "hooks: partly installed in %s, none under %s; %s\n", st.Settings, strings.Join(st.Missing, ", "), install)
	default:
		fmt.Fprintf(out, "hooks: installed in %s\n", st.Settings)
	}
	for _, h := range st.Hooks {
		fmt.Fprintf(out, "  %s: %s\n", eventName(h.Event, h.Matcher), h.Command)
	}
	for _, e := range st.Elsewhere {
		fmt.Fprintf(out, "hooks: also in %s, which %s runs too; %s\n", e.Settings, o.agent.Title(), e.Remove)
		for _, h := range e.Hooks {
			fmt.Fprintf(out, "  %s: %s\n", eventName(h.Event, h.Matcher), h.Command)
		}
	}
}

// printStore writes the store part of the status as text.
func printStore(out io.Writer, st *companion.Status) error {
	if !st.StoreExists {
		fmt.Fprintf(out, "store: %s: none yet (the hook makes it at the first compaction)\n", st.Store)
		return nil
	}
	fmt.Fprintf(out, "store: %s\n", st.Store)
	if len(st.Sessions) == 0 {
		fmt.Fprintln(out, "sessions: none yet")
		return nil
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SESSION\tEVENTS\tCOMPACTIONS\tMARKERS\tLATEST\tOPEN\tFAILED\tREJECTED\tSUPERSEDED\tARTIFACTS\tCONSTRAINTS")
	for _, s := range st.Sessions {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t", fieldValue(s.ID), s.Events, s.Compactions, s.MarkersValid)
		if s.Facts == nil {
			fmt.Fprintln(tw, "-\t-\t-\t-\t-\t-\t-")
			continue
		}
		f := s.Facts
		fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%d\t%d\t%d\n", s.LatestMarker, f.Unresolved, f.Failures, f.Rejected, f.Superseded, f.Artifacts, f.Constraints)
	}
	return tw.Flush()
}

// agentHookOptions are the flags of `strata NAME hook`.
type agentHookOptions struct {
	companion.HookOptions
}

// hookActionsText says, for hook's help, what the hook does at each event
// install writes, by the agent's Action for it.
func hookActionsText(a companion.Agent) string {
	title := a.Title()
	inject := fmt.Sprintf(`import what %[1]s wrote since, make sure a marker
stands at the boundary, and print on stdout the hook output that adds to
the context the state the raw transcript implies at the boundary: the
task and the user's newest request, every failure still standing by
what failed, every call still open (UNRESOLVED), the plan's open items,
every rejected, failed or superseded item with its reason, every active
constraint, the earlier requests, every artifact, the failures since
fixed — within --budget tokens, in that order, each class newest first,
what does not fit counted — with the marker's id, the sha256 of
its context and the strata resume command that prints it (the whole
context: every raw event after the boundary too; its size is given), the
store named by its absolute path. With no compaction boundary, what was
read stays stored and nothing is printed (a log line, no failure). Which
of these facts %[1]s's own summary does not mention (by id, key, file or
command) is logged, and stored once as a system event after what the
hook imported.`, title)
	var b strings.Builder
	for _, ev := range a.Settings().Events {
		name := eventName(ev.Name, ev.Matcher)
		switch a.Action(&companion.Input{HookEventName: ev.Name, Source: ev.Matcher}) {
		case companion.ActionCompact:
			fmt.Fprintf(&b, `%[1]s, before a compaction: import the transcript into the
session of its session_id — only the records the store does not hold,
read from the line after the last one it holds — and compact the
session's head into one L1 node with the extractive summarizer, so that
a marker stands where %[2]s is about to cut — unless the session's last
event is strata's own: nothing new since the hook before, nothing
compacted. Nothing is printed.`, name, title)
		case companion.ActionCheck:
			fmt.Fprintf(&b, `%[1]s: import what %[2]s wrote since and check
%[2]s's summary of a compaction — the input's compact_summary, or the
summary its transcript records — against the state the raw transcript
implies at the compaction's boundary, once per compaction: which of its
facts the summary does not mention (by id, key, file or command) is
logged, and stored as a system event (status --json: summary_omitted).
Nothing is compacted, nothing printed.`, name, title)
		case companion.ActionInject:
			fmt.Fprintf(&b, "%s, after a compaction: %s", name, inject)
		case companion.ActionInjectOnce:
			fmt.Fprintf(&b, `The first %[1]s after a compaction, once (the injection is
stored, and a later %[1]s finds it and prints nothing): %[2]s`, name, inject)
		default:
			continue
		}
		b.WriteString("\n\n")
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// newAgentHookCommand returns `strata NAME hook`.
func newAgentHookCommand(a companion.Agent, t agentText) *cobra.Command {
	o := &agentHookOptions{}
	var flagErr error
	run := func(cmd *cobra.Command, usage error) {
		opts := o.HookOptions
		opts.Redact = shownDB
		opts.Explain = func(err error, db string) error { return explain(cmd, err, db) }
		companion.RunHookCommand(cmd.Context(), a, opts, usage, cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr())
	}
	project := "the project"
	if t.env != "" {
		project = t.env + ", else in the cwd of the hook's input, each only when absolute"
	} else {
		project = "the cwd of the hook's input, when absolute"
	}
	cmd := &cobra.Command{
		Use:   "hook [--db DB] [--log FILE] [--budget N] [--timeout D]",
		Short: fmt.Sprintf("Run as a %s hook: read the hook's JSON on stdin, import, compact, inject the state", t.title),
		Long: fmt.Sprintf(`Run as a %[1]s command hook (%[2]s): read the JSON %[1]s writes
to the hook's stdin (session_id, transcript_path, cwd, hook_event_name,
trigger or source) and act on the events install hooks (%[3]s).

%[7]s
Every other event and source: nothing (a log line, when the log's
directory exists). The hook exits 0 whatever happens,
so as never to break the session: a failure (bad input, a cwd missing
or not absolute among it, a damaged or locked store, an unreadable
transcript) prints nothing on stdout and writes one line naming it to
the log, with the hint the other commands give (strata verify, which
process holds the store); every run writes one line.

The store is --db, a file (created if missing) or a postgres:// URL;
without it, %[4]s in %[5]s. The log is --log, else strata.log beside a
file store, or in the project's %[6]s directory for a URL; past 1 MiB it
is moved to strata.log.1. With no project to put them in, nothing is
made and the line goes to stderr.`, t.title, t.doc, t.events,
			filepath.Join(a.Settings().Dir, companion.StoreName), project, a.Settings().Dir, hookActionsText(a)),
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				flagErr = errors.Newf("hook takes no arguments, got %q", args)
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			run(cmd, flagErr)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.DB, "db", "", fmt.Sprintf("the store: a file (created if missing) or a postgres:// URL (default %s of the project)", filepath.Join(a.Settings().Dir, companion.StoreName)))
	f.StringVar(&o.Log, "log", "", "the log file (default strata.log beside the store)")
	f.IntVar(&o.Budget, "budget", companion.DefaultBudget, fmt.Sprintf("the token budget of the injected state (at least %d)", companion.MinBudget))
	f.DurationVar(&o.Timeout, "timeout", defaultHookTimeout, "how long to wait for the store's lock, held by another hook")
	// A hook never exits 2, which a PreCompact hook may read as "do not
	// compact": a bad flag is logged like any failure, and the hook does
	// nothing.
	cmd.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		run(c, err)
		return nil
	})
	return cmd
}
