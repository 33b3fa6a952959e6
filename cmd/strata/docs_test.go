package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/strata-go/strata/debughttp"
	"github.com/strata-go/strata/internal/pgtest"
)

// The documented examples are every command line of the strata CLI in the
// ```sh and ```console blocks of README.md and docs/*.md. TestDocs_Examples
// runs each page's in order, in process, in a directory of its own that
// holds what the commands read: the repository's fixtures at their
// documented paths, and the user's files the docs name (docSandboxFiles).
// A /tmp/… path is one in that directory, a running agent's URL
// (http://127.0.0.1:6060/debug/strata) a debug handler the test serves, a
// model server's URL a stand-in OpenAI-compatible server, a glob over the
// project's development data its smallest files (the command is skipped,
// its flags parsed, where the data is absent). Each command must exit as
// the doc implies — 0; 1 where a console block shows an Error, 2 where its
// hint is the one of bad usage; 130 for serve, stopped as Ctrl-C stops it —
// and, in a console block, print what it shows. A command line that no rule
// below matches fails the test, so that a new example is run too.

// docLiveURL is the URL of a running agent's debug handler in the docs.
const docLiveURL = "http://127.0.0.1:6060"

// docModelURLs are the model servers the docs name, each served by a
// stand-in that copies the required claims, unless docSpecials says
// otherwise for a command.
var docModelURLs = []string{"http://localhost:11434", "https://api.openai.com", "http://gpu-box:8000"}

// docDevDataFiles is how many files of the project's development data a
// glob over it gives a command, the smallest: every documented run over
// all of it takes from a second (replay) to a minute (eval --grid), and the
// figures it gives are the docs' tables, which this test does not compare.
const docDevDataFiles = 2

// docOtherPrograms are the programs of the docs' command lines that are not
// strata, with why the test does not run them. export, rm and curl are run
// (docRun.pipeline); jq and dot only after a strata command in a pipe.
var docOtherPrograms = []struct{ prefix, why string }{
	{"go test", "the test suite, fuzzing and benchmarks: go test runs them itself"},
	{"go build -o strata ./cmd/strata", "builds ./strata; this test runs the CLI in process for ./strata too"},
	{"go run ./internal/bench/cmd/", "benchmark runs of minutes whose figures docs/performance.md reports"},
	{"go build -o /tmp/", "builds the binaries whose memory docs/performance.md (Memory) measures"},
	{"/tmp/memload ", "writes the large inputs of docs/performance.md (Memory)"},
	{"/usr/bin/time -v ", "measures the max RSS of a large run that docs/performance.md (Memory) reports"},
	{"ollama pull", "fetches a model: the test serves a stand-in OpenAI-compatible model instead"},
	{"ulimit", "a shell limit for fuzzing"},
	{"for ", "a shell loop over fuzz targets, run by go test"},
	{"done", "the end of that loop"},
	{"cp ", "copies a screenshot a browser test wrote"},
	{"npm install --prefix ", "installs the real coding-agent clients; .ci/run installs them for internal/realclient's tests"},
}

// docOtherLines are example lines, by their start, that are not commands
// of strata: the shell of docs/postgres.md that starts a throwaway server.
var docOtherLines = []struct{ prefix, why string }{
	{"PGBIN=$(ls -d /usr/lib/postgresql/", "finds PostgreSQL's binaries for a throwaway server; .ci/run finds them the same way"},
	{"dir=$(mktemp -d)", "the throwaway server's directory; .ci/run makes its own"},
	{"$PGBIN/initdb ", "creates the throwaway server's cluster; .ci/run does it as the postgres user"},
	{"$PGBIN/pg_ctl ", "starts or stops the throwaway server; .ci/run starts one for the tests and stops it"},
}

// docSpecial is an example that needs a setup of its own, found by a text
// of its command line (a comment, mostly).
type docSpecial struct {
	match string // a substring of the command line
	why   string
	kind  string // "cut-backup", "unauthorized", "no-server", "prose-model"
}

var docSpecials = []docSpecial{
	{"# the agent died mid-transfer", "a handler that announces 16 MiB and cuts the transfer after 1 MiB", "cut-backup"},
	{"# no key set", "a model server that answers 401 to a request without a key; no key in the environment", "unauthorized"},
	{"# Ollama not running", "a port on which nothing listens", "no-server"},
	{"# a model that answers prose", "a model server whose every answer is prose, not JSON", "prose-model"},
}

// docSandboxFiles are the user's files the docs' commands read, made from
// the repository's fixtures (a path relative to the module root) or given
// content.
var docSandboxFiles = map[string]string{
	"session.jsonl":   "testdata/demo/session.jsonl",
	"migration.jsonl": "testdata/incident/migration.jsonl",
	"chat.json":       "transcript/testdata/openai/chat.json",
	"messages.json":   "transcript/testdata/anthropic/messages.json",
	// An agent's result file: no list of messages (docs/importing.md#errors).
	"run.json": `={"info":{"model":"gpt-4o"},"result":"done","steps_taken":12}`,
	// A user's Claude Code project (docs/importing.md), under $HOME.
	"home/.claude/projects/-home-me-app/7f3c2a10-5b1e-4c8e-9d2a-1f0e6b7a9c41.jsonl": "transcript/testdata/claude-code/session.jsonl",
	// The input Claude Code gives its SessionStart hook after compacting
	// that session (docs/claude-code.md).
	// A project whose hooks.json Codex refuses: a top-level member other
	// than hooks and description (docs/codex.md).
	"app/.codex/hooks.json": `={"hooks": {}, "x": 1}`,
	"sessionstart.json":     `={"session_id":"7f3c2a10-5b1e-4c8e-9d2a-1f0e6b7a9c41","transcript_path":"~/.claude/projects/-home-me-app/7f3c2a10-5b1e-4c8e-9d2a-1f0e6b7a9c41.jsonl","cwd":"/home/dev/app","hook_event_name":"SessionStart","source":"compact"}`,
}

// TestDocs_Examples runs every documented example command (see above).
func TestDocs_Examples(t *testing.T) {
	repo, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	pages := docPages(t, repo)
	n := 0
	for _, page := range pages {
		exs := docExamples(t, page, string(readBytes(t, filepath.Join(repo, page))))
		n += len(exs)
		t.Run(page, func(t *testing.T) {
			d := newDocRun(t, repo)
			for _, ex := range exs {
				t.Run(fmt.Sprintf("line_%d", ex.line), func(t *testing.T) { d.example(t, ex) })
			}
		})
	}
	if n < 50 {
		t.Errorf("%d examples in %d pages: the parser misses some", n, len(pages))
	}
}

// docPages returns README.md and docs/*.md, relative to the module root.
func docPages(t testing.TB, repo string) []string {
	t.Helper()
	docs, err := filepath.Glob(filepath.Join(repo, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	pages := []string{"README.md"}
	for _, p := range docs {
		pages = append(pages, filepath.Join("docs", filepath.Base(p)))
	}
	return pages
}

// docBlock is a fenced code block of a page.
type docBlock struct {
	lang  string
	line  int // the line of its first content line, from 1
	lines []string
}

var fenceRE = regexp.MustCompile("^( *)(`{3,})([^`]*)$")

// docBlocks returns the fenced code blocks of a Markdown text, their lines
// without the fence's indentation.
func docBlocks(text string) []docBlock {
	var blocks []docBlock
	lines := strings.Split(text, "\n")
	for i := 0; i < len(lines); i++ {
		m := fenceRE.FindStringSubmatch(lines[i])
		if m == nil {
			continue
		}
		b := docBlock{lang: strings.TrimSpace(m[3]), line: i + 2}
		for i++; i < len(lines); i++ {
			l := strings.TrimPrefix(lines[i], m[1])
			if strings.TrimSpace(l) != "" && strings.Trim(strings.TrimSpace(l), "`") == "" && len(strings.TrimSpace(l)) >= len(m[2]) {
				break
			}
			b.lines = append(b.lines, l)
		}
		blocks = append(blocks, b)
	}
	return blocks
}

// docExample is one command line of a sh or console block, continuations
// joined, with the output a console block shows after it.
type docExample struct {
	page, text string
	line       int
	console    bool
	output     []string
}

// docExamples returns the command lines of a page's sh and console blocks.
func docExamples(t testing.TB, page, text string) []docExample {
	t.Helper()
	var exs []docExample
	for _, b := range docBlocks(text) {
		if b.lang != "sh" && b.lang != "console" {
			continue
		}
		console := b.lang == "console"
		for i := 0; i < len(b.lines); i++ {
			l := b.lines[i]
			if console && !strings.HasPrefix(l, "$ ") {
				if len(exs) == 0 || !exs[len(exs)-1].console || exs[len(exs)-1].page != page {
					t.Fatalf("%s:%d: a console block's output before any $ command: %q", page, b.line+i, l)
				}
				exs[len(exs)-1].output = append(exs[len(exs)-1].output, l)
				continue
			}
			if strings.TrimSpace(l) == "" || strings.HasPrefix(strings.TrimSpace(l), "#") {
				continue
			}
			ex := docExample{page: page, line: b.line + i, console: console, text: strings.TrimPrefix(l, "$ ")}
			for strings.HasSuffix(ex.text, `\`) && i+1 < len(b.lines) {
				i++
				ex.text = strings.TrimSuffix(ex.text, `\`) + " " + strings.TrimSpace(b.lines[i])
			}
			exs = append(exs, ex)
		}
	}
	for i := range exs {
		for len(exs[i].output) > 0 && exs[i].output[len(exs[i].output)-1] == "" {
			exs[i].output = exs[i].output[:len(exs[i].output)-1]
		}
	}
	return exs
}

// shWord is a word of a command line: its text after quote removal, and
// whether a * or a leading ~ in it was unquoted (to be expanded).
type shWord struct {
	s           string
	glob, tilde bool
}

// shCommand is a simple command of a command line.
type shCommand struct {
	env     []string // NAME=value before the program
	args    []shWord
	in, out string // the files of < and >, as written
}

// shLine is a command line: pipelines run one after the other (&& or ;),
// and its comment.
type shLine struct {
	pipelines [][]shCommand
	comment   string
}

// parseShell parses the command line s, as far as the docs use the shell:
// words in single or double quotes, backslash escapes, |, &&, ;, < and >,
// NAME=value before a program, and a # comment.
func parseShell(s string) (shLine, error) {
	var line shLine
	type token struct {
		w  shWord
		op string
	}
	var toks []token
	var cur strings.Builder
	var w shWord
	inWord := false
	flush := func() {
		if inWord {
			w.s = cur.String()
			toks = append(toks, token{w: w})
		}
		cur.Reset()
		w, inWord = shWord{}, false
	}
	rs := []rune(s)
	for i := 0; i < len(rs); i++ {
		c := rs[i]
		switch {
		case c == '\'':
			j := slices.Index(rs[i+1:], '\'')
			if j < 0 {
				return line, fmt.Errorf("unterminated ' in %q", s)
			}
			cur.WriteString(string(rs[i+1 : i+1+j]))
			i += j + 1
			inWord = true
		case c == '"':
			inWord = true
			for i++; ; i++ {
				if i >= len(rs) {
					return line, fmt.Errorf("unterminated \" in %q", s)
				}
				if rs[i] == '"' {
					break
				}
				if rs[i] == '\\' && i+1 < len(rs) && strings.ContainsRune(`"\$`, rs[i+1]) {
					i++
				}
				cur.WriteRune(rs[i])
			}
		case c == '\\' && i+1 < len(rs):
			i++
			cur.WriteRune(rs[i])
			inWord = true
		case c == ' ' || c == '\t':
			flush()
		case c == '#' && !inWord:
			line.comment = "#" + string(rs[i+1:])
			i = len(rs)
		case c == '|' || c == ';' || c == '<' || c == '>':
			flush()
			toks = append(toks, token{op: string(c)})
		case c == '&' && i+1 < len(rs) && rs[i+1] == '&':
			flush()
			toks = append(toks, token{op: "&&"})
			i++
		default:
			if c == '*' {
				w.glob = true
			}
			if c == '~' && !inWord {
				w.tilde = true
			}
			cur.WriteRune(c)
			inWord = true
		}
	}
	flush()
	var pipe []shCommand
	var cmd shCommand
	endCommand := func() error {
		if len(cmd.args) == 0 {
			return fmt.Errorf("an empty command in %q", s)
		}
		pipe = append(pipe, cmd)
		cmd = shCommand{}
		return nil
	}
	for i := 0; i < len(toks); i++ {
		tk := toks[i]
		switch tk.op {
		case "":
			if len(cmd.args) == 0 && regexp.MustCompile(`^[A-Z_][A-Z0-9_]*=`).MatchString(tk.w.s) {
				cmd.env = append(cmd.env, tk.w.s)
			} else {
				cmd.args = append(cmd.args, tk.w)
			}
		case "<", ">":
			if i+1 >= len(toks) || toks[i+1].op != "" {
				return line, fmt.Errorf("%s without a file in %q", tk.op, s)
			}
			i++
			if tk.op == "<" {
				cmd.in = toks[i].w.s
			} else {
				cmd.out = toks[i].w.s
			}
		case "|":
			if err := endCommand(); err != nil {
				return line, err
			}
		case "&&", ";":
			if err := endCommand(); err != nil {
				return line, err
			}
			line.pipelines = append(line.pipelines, pipe)
			pipe = nil
		}
	}
	if len(cmd.args) > 0 || len(cmd.env) > 0 {
		if err := endCommand(); err != nil {
			return line, err
		}
	}
	if len(pipe) > 0 {
		line.pipelines = append(line.pipelines, pipe)
	}
	return line, nil
}

// docRun runs the examples of one page in its directory.
type docRun struct {
	page *testing.T
	repo string
	dir  string // the page's directory, the working directory
	home string
	live string // the running agent's base URL, once started
	pg   string // the page's PostgreSQL database (a schema of its own), once made
	// unmade are the files a skipped command would have made, with why it
	// was skipped: a later command that reads one is skipped too.
	unmade map[string]string
}

func newDocRun(t *testing.T, repo string) *docRun {
	dir := t.TempDir()
	d := &docRun{page: t, repo: repo, dir: dir, home: filepath.Join(dir, "home"), unmade: map[string]string{}}
	for _, tree := range []string{"testdata", filepath.Join("transcript", "testdata")} {
		if err := os.CopyFS(filepath.Join(dir, tree), os.DirFS(filepath.Join(repo, tree))); err != nil {
			t.Fatal(err)
		}
	}
	for name, from := range docSandboxFiles {
		b := []byte(strings.TrimPrefix(from, "="))
		if !strings.HasPrefix(from, "=") {
			b = readBytes(t, filepath.Join(repo, from))
		}
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, sub := range []string{"tmp", "shm"} {
		if err := os.Mkdir(filepath.Join(dir, sub), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// The strata on PATH, which the hooks claude-code install writes run,
	// is this one: the test binary, the CLI when run so (TestMain).
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(self, filepath.Join(dir, "bin", "strata")); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", filepath.Join(dir, "bin")+string(os.PathListSeparator)+os.Getenv("PATH"))
	t.Chdir(dir)
	t.Setenv("HOME", d.home)
	t.Setenv("VLLM_KEY", "vllm-test-key") // docs/summarizers.md names it with --api-key-env
	for _, v := range []string{"STRATA_API_KEY", "OPENAI_API_KEY", envToken, "STRATA_PROGRESS", "CODEX_HOME"} {
		t.Setenv(v, "")
	}
	return d
}

// docExec is what one example's run needs and gives.
type docExec struct {
	shown   *syncBuffer       // what a terminal would show: the last stdout and every stderr
	undo    [][2]string       // replacements that turn the output back into the doc's words
	special *docSpecial       // the example's own setup, if any
	codes   []int             // the exit codes of its strata commands
	serve   bool              // it runs strata serve, interrupted as Ctrl-C does
	skipped string            // why its strata commands were only parsed, not run
	live    string            // the running agent of this example, when not the page's
	models  map[string]string // the stand-ins of the model servers it names
}

// example runs one documented example.
func (d *docRun) example(t *testing.T, ex docExample) {
	sh, err := parseShell(ex.text)
	if err != nil {
		t.Fatal(err)
	}
	x := &docExec{shown: &syncBuffer{}, models: map[string]string{}}
	for i := range docSpecials {
		if strings.Contains(ex.text, docSpecials[i].match) {
			x.special = &docSpecials[i]
			t.Logf("%s: %s", ex.text, x.special.why)
		}
	}
	for _, pipe := range sh.pipelines {
		d.pipeline(t, ex, x, pipe)
	}
	if x.skipped != "" {
		t.Skipf("%s: flags parsed, not run: %s", ex.text, x.skipped)
	}
	if len(x.codes) == 0 {
		return // export, rm
	}
	want := 0
	if ex.console && slices.ContainsFunc(ex.output, func(l string) bool { return strings.HasPrefix(l, "Error: ") }) {
		want = exitError
		if slices.ContainsFunc(ex.output, func(l string) bool { return strings.HasPrefix(l, "Hint: run '") && strings.HasSuffix(l, "' for usage") }) {
			want = exitUsage
		}
	}
	if x.serve {
		want = 128 + int(syscall.SIGINT) // interrupted as Ctrl-C interrupts it
	}
	got := d.normalize(x, x.shown.String())
	for i, code := range x.codes {
		w := 0
		if i == len(x.codes)-1 {
			w = want
		}
		if code != w {
			t.Fatalf("%s:%d: %s\nexit %d, want %d; output:\n%s", ex.page, ex.line, ex.text, code, w, got)
		}
	}
	if ex.console && len(ex.output) > 0 {
		if msg := docCompare(ex.output, got); msg != "" {
			t.Errorf("%s:%d: %s\nthe output differs from the doc's: %s\noutput:\n%s", ex.page, ex.line, ex.text, msg, got)
		}
	}
}

// pipeline runs one pipeline of an example, or skips the example when it
// is not strata's to run.
func (d *docRun) pipeline(t *testing.T, ex docExample, x *docExec, pipe []shCommand) {
	var in io.Reader = strings.NewReader("")
	for i, c := range pipe {
		last := i == len(pipe)-1
		var out io.Writer = x.shown
		var piped bytes.Buffer
		if !last {
			out = &piped
		}
		if c.out != "" {
			if c.out == "/dev/null" {
				out = io.Discard
			} else {
				f, err := os.Create(d.path(t, c.out))
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				out = f
			}
		}
		if c.in != "" {
			b, err := os.ReadFile(d.path(t, c.in))
			if err != nil {
				t.Fatalf("%s: %v", ex.text, err)
			}
			in = bytes.NewReader(b)
		}
		words := make([]string, len(c.args))
		for j, w := range c.args {
			words[j] = w.s
		}
		joined := strings.Join(words, " ")
		if args, ok := strataArgs(words); ok {
			d.strata(t, ex, x, c, args, in, out)
		} else {
			switch words[0] {
			case "export":
				for _, kv := range words[1:] {
					k, v, _ := strings.Cut(kv, "=")
					d.page.Setenv(k, v)
				}
			case "rm":
				for _, p := range words[1:] {
					if !strings.HasPrefix(p, "-") {
						if err := os.Remove(d.path(t, p)); err != nil && !os.IsNotExist(err) {
							t.Fatal(err)
						}
					}
				}
			case "curl":
				d.curl(t, x, words[1:], out)
			case "jq":
				if i == 0 {
					t.Fatalf("%s: jq reads a strata command's output here only", ex.text)
				}
				docJQ(t, words[1:], in, out)
			case "dot":
				if i == 0 {
					t.Fatalf("%s: dot reads a strata command's output here only", ex.text)
				}
				// The picture is Graphviz's to render: TestDump_DotGolden has
				// dot parse it where dot is installed.
			default:
				why := ""
				for _, o := range docOtherPrograms {
					if strings.HasPrefix(joined, o.prefix) {
						why = o.why
					}
				}
				for _, o := range docOtherLines {
					if strings.HasPrefix(ex.text, o.prefix) {
						why = o.why
					}
				}
				if why == "" {
					t.Fatalf("%s:%d: %q: no rule of TestDocs_Examples runs or excuses this command: add one", ex.page, ex.line, joined)
				}
				t.Skipf("not run: %s (%s)", joined, why)
			}
		}
		in = &piped
	}
}

// strataArgs returns the arguments of a strata command line: strata ARGS,
// ./strata ARGS or go run ./cmd/strata ARGS.
func strataArgs(words []string) ([]string, bool) {
	switch {
	case len(words) > 0 && (words[0] == "strata" || words[0] == "./strata"):
		return words[1:], true
	case len(words) > 2 && words[0] == "go" && words[1] == "run" && words[2] == "./cmd/strata":
		return words[3:], true
	}
	return nil, false
}

// strata runs one strata command of an example in process.
func (d *docRun) strata(t *testing.T, ex docExample, x *docExec, c shCommand, docArgs []string, in io.Reader, out io.Writer) {
	for _, kv := range c.env {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
		if k == envToken {
			// The agent demands the token the command sends.
			x.live = d.serveLive(t, debughttp.Options{Token: v})
		}
	}
	if x.special != nil && x.special.kind == "unauthorized" {
		for _, k := range []string{"STRATA_API_KEY", "OPENAI_API_KEY"} {
			t.Setenv(k, "")
		}
	}
	var args []string
	for i, w := range c.args[len(c.args)-len(docArgs):] {
		as, skip := d.expand(t, x, w, docArgs[i])
		if skip != "" {
			x.skipped = skip
		}
		args = append(args, as...)
	}
	if x.skipped != "" {
		d.parseOnly(t, ex, args)
		for _, a := range args[1:] {
			if _, made := d.unmade[a]; made || strings.HasPrefix(a, "-") {
				continue
			}
			if _, err := os.Stat(a); err != nil {
				d.unmade[a] = x.skipped
			}
		}
		return
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	var errOut io.Writer = x.shown
	serving := make(chan string, 1)
	x.serve = len(args) > 0 && args[0] == "serve"
	if x.serve {
		if !slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--addr") }) {
			args = append(args, "--addr", "127.0.0.1:0")
		}
		errOut = &notifyWriter{w: x.shown, re: regexp.MustCompile(`open (http://127\.0\.0\.1:\d+)/\S*`), found: serving}
	}
	done := make(chan int, 1)
	go func() { done <- runContext(ctx, args, in, out, errOut) }()
	if x.serve {
		select {
		case base := <-serving:
			_, port, _ := strings.Cut(strings.TrimPrefix(base, "http://"), ":")
			x.undo = append(x.undo, [2]string{"127.0.0.1:" + port, "127.0.0.1:6060"})
			resp, err := http.Get(base + debughttp.DefaultPrefix + "/ui/")
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Errorf("%s: the page answered %s", base, resp.Status)
			}
			cancel(&interruptError{sig: syscall.SIGINT}) // Ctrl-C
		case code := <-done:
			t.Fatalf("%s: exit %d before serving:\n%s", ex.text, code, x.shown.String())
		case <-time.After(time.Minute):
			t.Fatalf("%s: not serving after a minute:\n%s", ex.text, x.shown.String())
		}
	}
	select {
	case code := <-done:
		x.codes = append(x.codes, code)
	case <-time.After(2 * time.Minute):
		t.Fatalf("%s: still running after two minutes:\n%s", ex.text, x.shown.String())
	}
}

// parseOnly checks that a command's flags parse, where it cannot run: the
// command with --help, which cobra gives only for flags it parsed.
func (d *docRun) parseOnly(t *testing.T, ex docExample, args []string) {
	r := cli(t, "", append(slices.Clone(args), "--help")...)
	if r.code != exitOK {
		t.Fatalf("%s:%d: %s: its flags do not parse:\n%s", ex.page, ex.line, ex.text, r.stderr)
	}
}

// expand turns a word of a documented strata command into the arguments
// that run it here: ~ and globs expanded, /tmp and /dev/shm in the page's
// directory, the development data where it is, URLs served by the test.
// skip says why the command cannot run.
func (d *docRun) expand(t *testing.T, x *docExec, w shWord, s string) (args []string, skip string) {
	dev := false
	switch {
	case w.tilde && strings.HasPrefix(s, "~/"):
		s = filepath.Join(d.home, s[2:])
	case strings.HasPrefix(s, "/tmp/"):
		s = filepath.Join(d.dir, s)
	case s == "/dev/shm":
		s = filepath.Join(d.dir, "shm")
	case strings.HasPrefix(s, "../shared/"):
		s = filepath.Join(d.repo, s)
		root := filepath.Join(d.repo, "..", "shared", "data")
		if _, err := os.Stat(root); err != nil {
			return []string{s}, "the project's development data (../shared/data) is absent"
		}
		dev = true
	case strings.HasPrefix(s, docLiveURL):
		s = d.liveURL(t, x) + strings.TrimPrefix(s, docLiveURL)
	case strings.HasPrefix(s, "postgres://") || strings.HasPrefix(s, "postgresql://"):
		// Every PostgreSQL URL of a page is one schema of the test server.
		if os.Getenv(pgtest.Env) == "" {
			return []string{s}, "a PostgreSQL server: " + pgtest.Env + " is unset"
		}
		if d.pg == "" {
			d.pg = pgtest.URL(d.page)
		}
		s = d.pg
	default:
		for _, m := range docModelURLs {
			if strings.HasPrefix(s, m) {
				s = d.modelURL(t, x, m) + strings.TrimPrefix(s, m)
			}
		}
	}
	if why, ok := d.unmade[s]; ok {
		return []string{s}, "it reads " + s + ", which a command skipped before would have made: " + why
	}
	if !w.glob {
		return []string{s}, ""
	}
	matches, err := filepath.Glob(s)
	if err != nil {
		t.Fatal(err)
	}
	if len(matches) == 0 {
		return []string{s}, "" // as a shell leaves it: the command says what is missing
	}
	if dev && len(matches) > docDevDataFiles {
		t.Logf("%s: the %d smallest of its %d files", s, docDevDataFiles, len(matches))
		size := func(p string) int64 {
			fi, err := os.Stat(p)
			if err != nil {
				t.Fatal(err)
			}
			return fi.Size()
		}
		slices.SortStableFunc(matches, func(a, b string) int { return cmp.Compare(size(a), size(b)) })
		matches = matches[:docDevDataFiles]
		slices.Sort(matches)
	}
	return matches, ""
}

// path returns a file of a redirection or an rm in the page's directory.
func (d *docRun) path(t *testing.T, p string) string {
	as, skip := d.expand(t, nil, shWord{s: p}, p)
	if skip != "" || len(as) != 1 {
		t.Fatalf("%s: not a file the test can have", p)
	}
	return as[0]
}

// liveURL returns the base URL of the running agent an example reads: the
// page's agent, or the one of the example's special.
func (d *docRun) liveURL(t *testing.T, x *docExec) string {
	if x != nil && x.special != nil && x.special.kind == "cut-backup" {
		mux := http.NewServeMux()
		mux.HandleFunc(debughttp.DefaultPrefix+"/backup", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set(debughttp.HandlerHeader, debughttp.HandlerVersion)
			w.Header().Set("Content-Length", "16777216")
			w.Write(make([]byte, 1<<20))
		})
		srv := httptest.NewServer(mux)
		t.Cleanup(srv.Close)
		x.undo = append(x.undo, [2]string{srv.URL, docLiveURL})
		return srv.URL
	}
	live := d.live
	if x != nil && x.live != "" {
		live = x.live
	}
	if live == "" {
		d.live = d.serveLive(d.page, debughttp.Options{})
		live = d.live
	}
	if x != nil {
		x.undo = append(x.undo, [2]string{live, docLiveURL})
	}
	return live
}

// serveLive starts a running agent with opts, its database the seed's
// incident (session mig), for as long as t runs, and returns its base URL.
func (d *docRun) serveLive(t *testing.T, opts debughttp.Options) string {
	db := filepath.Join(t.TempDir(), "agent.db")
	mustCLI(t, "replay", db, filepath.Join(d.repo, "testdata", "incident", "migration.jsonl"))
	return strings.TrimSuffix(liveAgent(t, db, opts), debughttp.DefaultPrefix)
}

// modelURL returns the stand-in for the model server at doc (scheme and
// host) for this example.
func (d *docRun) modelURL(t *testing.T, x *docExec, doc string) string {
	if u, ok := x.models[doc]; ok {
		return u
	}
	u, err := url.Parse(doc)
	if err != nil {
		t.Fatal(err)
	}
	hostPort := u.Host
	if u.Port() == "" {
		hostPort += ":443"
	}
	if u.Hostname() == "localhost" {
		hostPort = "127.0.0.1:" + u.Port()
	}
	kind := "faithful"
	if x.special != nil {
		kind = x.special.kind
	}
	var base string
	if kind == "no-server" {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		base = "http://" + ln.Addr().String()
		ln.Close()
	} else {
		srv := httptest.NewServer(docModel(t, kind))
		t.Cleanup(srv.Close)
		base = srv.URL
	}
	x.undo = append(x.undo, [2]string{base, doc}, [2]string{strings.TrimPrefix(base, "http://"), hostPort})
	x.models[doc] = base
	return base
}

// docModel is an OpenAI-compatible chat-completions server: faithful (it
// copies the required claims from the prompt), prose-model (an answer that
// is not JSON) or unauthorized (401 without a key).
func docModel(t *testing.T, kind string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if kind == "unauthorized" && r.Header.Get("Authorization") == "" {
			w.WriteHeader(http.StatusUnauthorized)
			io.WriteString(w, `{"error":{"message":"Incorrect API key provided","type":"invalid_request_error"}}`)
			return
		}
		var req struct {
			Messages []struct{ Role, Content string }
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || len(req.Messages) == 0 {
			t.Errorf("stand-in model: request %+v, %v", req, err)
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		content := "I went through the session: the migration is done."
		if kind != "prose-model" {
			_, block, _ := strings.Cut(req.Messages[len(req.Messages)-1].Content, "```json\n")
			block, _, _ = strings.Cut(block, "\n```")
			answer, _ := json.Marshal(map[string]any{"narrative": "what the agent did", "claims": json.RawMessage(block)})
			content = string(answer)
		}
		json.NewEncoder(w).Encode(map[string]any{"choices": []any{map[string]any{
			"finish_reason": "stop", "message": map[string]any{"role": "assistant", "content": content}}}})
	})
}

// curl does what the docs' curl commands do: GET (or -X METHOD) a URL,
// -s, -o FILE, -w '%{http_code}\n'.
func (d *docRun) curl(t *testing.T, x *docExec, args []string, out io.Writer) {
	method, target, write, body := http.MethodGet, "", "", out
	for i := 0; i < len(args); i++ {
		switch a := args[i]; a {
		case "-s":
		case "-X":
			i++
			method = args[i]
		case "-o":
			i++
			if args[i] != "/dev/null" {
				t.Fatalf("curl -o %s: only /dev/null", args[i])
			}
			body = io.Discard
		case "-w":
			i++
			write = args[i]
		default:
			if strings.HasPrefix(a, "-") || target != "" {
				t.Fatalf("curl %s: no rule for it", a)
			}
			as, _ := d.expand(t, x, shWord{s: a}, a)
			target = as[0]
		}
	}
	req, err := http.NewRequest(method, target, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if _, err := io.Copy(body, resp.Body); err != nil {
		t.Fatal(err)
	}
	if write != "" {
		if write != `%{http_code}\n` {
			t.Fatalf("curl -w %q: no rule for it", write)
		}
		fmt.Fprintf(out, "%d\n", resp.StatusCode)
	}
}

// docJQ runs the docs' jq filters, written out in Go: a filter without a
// rule here fails the test.
func docJQ(t *testing.T, args []string, in io.Reader, out io.Writer) {
	raw := slices.Contains(args, "-r")
	args = slices.DeleteFunc(slices.Clone(args), func(a string) bool { return a == "-c" || a == "-r" })
	if len(args) != 1 {
		t.Fatalf("jq %q: no rule for it", args)
	}
	b, err := io.ReadAll(in)
	if err != nil {
		t.Fatal(err)
	}
	switch args[0] {
	case ".source":
		var v struct{ Source json.RawMessage }
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(out, "%s\n", v.Source)
	case ".hookSpecificOutput.additionalContext":
		var v struct {
			HookSpecificOutput struct{ AdditionalContext string } `json:"hookSpecificOutput"`
		}
		if err := json.Unmarshal(b, &v); err != nil || !raw {
			t.Fatalf("jq %q: %v (a rule for -r only)", args[0], err)
		}
		io.WriteString(out, v.HookSpecificOutput.AdditionalContext)
	case ".sessions[] | .id as $s | .events[] | .session = $s":
		var v struct {
			Sessions []struct {
				ID     string
				Events []map[string]any
			}
		}
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatal(err)
		}
		for _, s := range v.Sessions {
			for _, e := range s.Events {
				e["session"] = s.ID
				line, _ := json.Marshal(e)
				fmt.Fprintf(out, "%s\n", line)
			}
		}
	default:
		t.Fatalf("jq %q: no rule for it", args[0])
	}
}

// docVolatile are the parts of an output that differ from run to run.
var docVolatile = regexp.MustCompile(`retrying in [0-9.]+(ns|µs|ms|s)`)

// normalize turns an example's output back into the doc's words.
func (d *docRun) normalize(x *docExec, s string) string {
	for _, u := range x.undo {
		s = strings.ReplaceAll(s, u[0], u[1])
	}
	s = strings.ReplaceAll(s, filepath.Join(d.dir, "tmp"), "/tmp")
	s = strings.ReplaceAll(s, filepath.Join(d.dir, "shm"), "/dev/shm")
	s = strings.ReplaceAll(s, d.home, "~")
	s = strings.ReplaceAll(s, d.dir+string(filepath.Separator), "")
	return strings.TrimRight(docVolatile.ReplaceAllString(s, "retrying in D"), "\n")
}

// docCompare compares the output a console block shows with got; a line
// "..." or "…" stands for any lines. It returns "" when they match.
func docCompare(shown []string, got string) string {
	var segs [][]string
	cur := []string{}
	for _, l := range shown {
		l = strings.TrimPrefix(l, "^C") // the terminal's echo of Ctrl-C
		l = docVolatile.ReplaceAllString(l, "retrying in D")
		if l == "..." || l == "…" {
			segs = append(segs, cur)
			cur = []string{}
			continue
		}
		cur = append(cur, l)
	}
	segs = append(segs, cur)
	lines := strings.Split(got, "\n")
	if len(segs) == 1 {
		if want := strings.Join(segs[0], "\n"); want != got {
			return firstDiff(got, want)
		}
		return ""
	}
	if !slices.Equal(lines[:min(len(lines), len(segs[0]))], segs[0]) {
		return "the lines before the first ... differ: " + firstDiff(strings.Join(lines, "\n"), strings.Join(segs[0], "\n"))
	}
	lines = lines[len(segs[0]):]
	last := segs[len(segs)-1]
	for _, seg := range segs[1 : len(segs)-1] {
		i := -1
		for j := 0; j+len(seg) <= len(lines); j++ {
			if slices.Equal(lines[j:j+len(seg)], seg) {
				i = j
				break
			}
		}
		if i < 0 {
			return fmt.Sprintf("no lines %q", seg)
		}
		lines = lines[i+len(seg):]
	}
	if len(lines) < len(last) || !slices.Equal(lines[len(lines)-len(last):], last) {
		return fmt.Sprintf("the output does not end with %q", last)
	}
	return ""
}

// syncBuffer is a bytes.Buffer that goroutines may write at once: a
// command's stdout and stderr, as a terminal shows them.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// notifyWriter writes to w and sends the first match of re's first group
// in what was written.
type notifyWriter struct {
	w     io.Writer
	re    *regexp.Regexp
	found chan<- string
	mu    sync.Mutex
	seen  bytes.Buffer
	sent  bool
}

func (n *notifyWriter) Write(p []byte) (int, error) {
	n.mu.Lock()
	if !n.sent {
		n.seen.Write(p)
		if m := n.re.FindSubmatch(n.seen.Bytes()); m != nil {
			n.found <- string(m[1])
			n.sent = true
		}
	}
	n.mu.Unlock()
	return n.w.Write(p)
}

// TestDocs_Usage: the README's table of commands and the Usage of the
// package doc give each command as its --help's Usage line does.
func TestDocs_Usage(t *testing.T) {
	repo, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	root := newRootCommand()
	root.InitDefaultCompletionCmd()
	readme := string(readBytes(t, filepath.Join(repo, "README.md")))
	godoc := string(readBytes(t, "doc.go"))
	rows := map[string]string{}
	for _, l := range strings.Split(readme, "\n") {
		if m := regexp.MustCompile("^\\| `(strata [a-z]+[^`]*)`").FindStringSubmatch(l); m != nil {
			rows[strings.Fields(m[1])[1]] = strings.ReplaceAll(m[1], `\|`, "|")
		}
	}
	var usage []string // the package doc's Usage lines, continuations joined
	for _, l := range strings.Split(godoc, "\n") {
		switch {
		case strings.HasPrefix(l, "//\tstrata "):
			usage = append(usage, strings.TrimPrefix(l, "//\t"))
		case strings.HasPrefix(l, "//\t   ") && len(usage) > 0:
			usage[len(usage)-1] += " " + strings.TrimSpace(strings.TrimPrefix(l, "//\t"))
		}
	}
	for _, c := range root.Commands() {
		if c.Hidden || c.Name() == "help" {
			continue
		}
		want := "strata " + c.Use
		if c.HasSubCommands() { // completion: strata completion [command]
			var names []string
			for _, s := range c.Commands() {
				names = append(names, s.Name())
			}
			want = c.CommandPath() + " " + strings.Join(names, "|")
		}
		if got, ok := rows[c.Name()]; !ok {
			t.Errorf("README.md: no row for %s in the table of commands", c.Name())
		} else if got != want {
			t.Errorf("README.md: the row of %s is\n  %s\nits --help says\n  %s", c.Name(), got, want)
		}
		if !slices.Contains(usage, want) {
			t.Errorf("doc.go: no Usage line %q", want)
		}
		delete(rows, c.Name())
	}
	for name := range rows {
		t.Errorf("README.md: a row for %s, which is no command", name)
	}
}

// TestDocs_Flags: every --flag that a page, a --help or the package doc
// gives a command, in code spans, code blocks and synopses, is one of its
// flags.
func TestDocs_Flags(t *testing.T) {
	repo, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	root := newRootCommand()
	texts := map[string]string{"doc.go": string(readBytes(t, "doc.go"))}
	for _, page := range docPages(t, repo) {
		texts[page] = string(readBytes(t, filepath.Join(repo, page)))
	}
	for _, c := range root.Commands() {
		texts[c.Name()+" --help"] = c.Long
		for _, sub := range c.Commands() {
			texts[c.Name()+" "+sub.Name()+" --help"] = sub.Long
		}
	}
	for name, text := range texts {
		for _, span := range docCommandSpans(name, text) {
			for _, part := range strings.Split(span, " | ") {
				docCheckFlags(t, root, name, part)
			}
		}
	}
}

// docCommandSpans returns the strata commands of a text: in Markdown its
// code spans and the lines of its code blocks, in a Go comment the lines of
// its code blocks (a tab after //), in a --help text its indented lines.
func docCommandSpans(name, text string) []string {
	var spans []string
	var lines []string
	switch {
	case strings.HasSuffix(name, ".md"):
		for _, m := range regexp.MustCompile("`([^`\n]+)`").FindAllStringSubmatch(text, -1) {
			spans = append(spans, m[1])
		}
		for _, b := range docBlocks(text) {
			lines = append(lines, b.lines...)
		}
	case strings.HasSuffix(name, ".go"):
		for _, l := range strings.Split(text, "\n") {
			if strings.HasPrefix(l, "//\t") {
				lines = append(lines, l)
			}
		}
	default:
		for _, l := range strings.Split(text, "\n") {
			if strings.HasPrefix(l, " ") {
				lines = append(lines, l)
			}
		}
	}
	for _, l := range lines {
		l = strings.TrimPrefix(strings.TrimSpace(strings.TrimPrefix(l, "//")), "$ ")
		for _, p := range []string{"strata ", "./strata ", "go run ./cmd/strata "} {
			if strings.HasPrefix(l, p) {
				spans = append(spans, l)
			}
		}
	}
	return spans
}

// commandWithFlag reports whether a command under c, at any depth, has
// the flag name.
func commandWithFlag(c *cobra.Command, name string) bool {
	return slices.ContainsFunc(c.Commands(), func(sub *cobra.Command) bool {
		return sub.Flags().Lookup(name) != nil || commandWithFlag(sub, name)
	})
}

// docCheckFlags fails t when span, a strata command as a doc gives it,
// names a flag its command does not have.
func docCheckFlags(t *testing.T, root *cobra.Command, where, span string) {
	words := strings.Fields(span)
	if args, ok := strataArgs(words); ok {
		words = args
	}
	if len(words) == 0 {
		return
	}
	cmd, _, err := root.Find(words[:1])
	if err != nil || cmd == root || cmd.Name() != words[0] {
		if words[0] == "strata" || strings.HasPrefix(words[0], "-") {
			cmd = root
		} else {
			return
		}
	}
	rest := words[1:]
	if cmd == root {
		rest = words
	}
	for len(rest) > 0 && cmd.HasSubCommands() { // a subcommand: claude-code install
		sub, _, err := cmd.Find(rest[:1])
		if err != nil || sub == cmd || sub.Name() != rest[0] {
			break
		}
		cmd, rest = sub, rest[1:]
	}
	for _, f := range regexp.MustCompile(`(?:^|[\s\[|(])--([a-z][a-z0-9-]*)`).FindAllStringSubmatch(strings.Join(rest, " "), -1) {
		if f[1] == "help" || cmd.Flags().Lookup(f[1]) != nil || cmd.InheritedFlags().Lookup(f[1]) != nil {
			continue
		}
		if cmd == root && commandWithFlag(root, f[1]) {
			continue // a flag of some command, named beside the command line
		}
		t.Errorf("%s: %q names --%s, which %s does not have", where, span, f[1], cmd.CommandPath())
	}
}

// anyCommandHasFlag reports whether a command under c, at any depth, has
