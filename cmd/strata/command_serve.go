package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"time"

	"github.com/cockroachdb/errors"
	"github.com/spf13/cobra"

	"github.com/strata-go/strata/backend/postgres"
	"github.com/strata-go/strata/debughttp"
	"github.com/strata-go/strata/store"
)

// serveOptions are the flags and arguments of `strata serve`.
type serveOptions struct {
	addr    string
	timeout time.Duration
	db      string
}

// newServeCommand returns `strata serve`.
func newServeCommand() *cobra.Command {
	o := &serveOptions{}
	cmd := &cobra.Command{
		Use:   "serve [--addr HOST:PORT] DB",
		Short: "Serve a database's web page and JSON endpoints, read-only",
		Long: `Serve the database DB, a file or a postgres:// URL, over HTTP the way a
running agent's debug handler serves its own database: the web page at
/debug/strata/ui/ (the sessions; for one session its frame by tier,
markers, refused compactions, checkpoints and resumed context) and the JSON
endpoints under /debug/strata/ that the reading commands take as a URL
(strata dump http://127.0.0.1:6060/debug/strata). The URL to open is
printed on stderr.

A file is opened read-only for each request and closed after it: nothing is
written, and the file's lock is held only while a request is answered, so
a process that writes it now and then (strata claude-code hook, replay,
import) goes on working beside the page; a request waits up to --timeout
for such a writer, then gets 503 naming it. A database an agent holds open
is served by the agent itself, at the same paths; serve gives up on it
after --timeout saying another process holds it. A postgres:// database is
opened once, as many processes share it anyway: each request reads one
snapshot of it while its writers go on appending, and its backup endpoint
serves the bbolt file strata backup URL FILE writes, built in a temporary
file first. The URL is printed without its password.

--addr must be a loopback address unless the environment variable
STRATA_DEBUG_TOKEN is set: then every request for data must carry
"Authorization: Bearer <token>", and the page asks for the token (or takes it
from the address's #token=...). A damaged record gets an error answer (500,
{"error": ...}) and the server goes on serving the rest. Ctrl-C (or SIGTERM)
stops it, and the exit status is 130 (143 after SIGTERM), as for every
command.`,
		Args: exactArgs("DB"),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.db = args[0]
			if err := o.validate(); err != nil {
				return err
			}
			return o.run(cmd.Context(), cmd.ErrOrStderr())
		},
	}
	cmd.Flags().StringVar(&o.addr, "addr", debughttp.DefaultAddr, "the address to listen on (host:port; port 0 picks a free one)")
	addTimeoutFlag(cmd, &o.timeout)
	return cmd
}

// validate checks the flags and the argument; its errors are bad usage.
func (o *serveOptions) validate() error {
	if isURL(o.db) {
		return &usageError{err: errors.WithHintf(errors.Newf("serve takes a database file or a postgres:// URL, not a debug handler's URL: %s", o.db),
			"a running agent serves its own page: open %s/ui/", o.db)}
	}
	_, port, err := net.SplitHostPort(o.addr)
	if err == nil {
		_, err = net.LookupPort("tcp", port)
	}
	if err != nil {
		return usagef("--addr %q: %v (want host:port, e.g. %s)", o.addr, err, debughttp.DefaultAddr)
	}
	return checkTimeout(o.timeout)
}

// run serves the database until ctx is done: the process is interrupted
// (runMain).
func (o *serveOptions) run(ctx context.Context, errOut io.Writer) (err error) {
	db, err := openReadOnly(o.db, o.timeout)
	if err != nil {
		return err
	}
	var view debughttp.Viewer = db
	if postgres.IsURL(o.db) {
		defer closeDB(db, &err)
	} else {
		if err := db.Close(); err != nil {
			return err
		}
		view = fileViewer{path: o.db, timeout: o.timeout}
	}
	opts := debughttp.Options{Token: os.Getenv(envToken)}
	ln, err := debughttp.Listen(o.addr, opts)
	if errors.Is(err, debughttp.ErrNotLoopback) {
		return &usageError{err: errors.WithHintf(errors.Newf("--addr %s is not a loopback address", o.addr),
			"serve on 127.0.0.1 or [::1], or set %s to a token every request must carry (and put TLS in front beyond one machine)", envToken)}
	}
	if err != nil {
		return err
	}
	base := "http://" + browsable(ln.Addr()) + debughttp.DefaultPrefix
	fmt.Fprintf(errOut, "serving %s read-only: open %s%s (Ctrl-C stops)\n", shownDB(o.db), base, debughttp.PagePath)
	if opts.Token != "" {
		fmt.Fprintf(errOut, "requests must carry the token of %s; the page asks for it\n", envToken)
	}
	if err := debughttp.Serve(ctx, ln, view, opts); err != nil {
		return err
	}
	fmt.Fprintln(errOut, "serve: stopped")
	return nil
}

// fileViewer is a database file opened read-only for each View and closed
// after it: strata serve holds the file's lock only while it answers.
type fileViewer struct {
	path    string
	timeout time.Duration
}

// View opens the file, runs fn on a snapshot of it and closes it.
func (v fileViewer) View(fn func(*store.Snapshot) error) (err error) {
	db, err := openReadOnly(v.path, v.timeout)
	if err != nil {
		return err
	}
	defer closeDB(db, &err)
	return db.View(fn)
}

// browsable returns the address a browser on this machine opens for a
// listener's address: an unspecified IP (every interface) is reached as
// loopback.
func browsable(a net.Addr) string {
	tcp, ok := a.(*net.TCPAddr)
	if !ok {
		return a.String()
	}
	if tcp.IP.IsUnspecified() {
		ip := net.IPv4(127, 0, 0, 1)
		if tcp.IP.To4() == nil {
			ip = net.IPv6loopback
		}
		return net.JoinHostPort(ip.String(), fmt.Sprint(tcp.Port))
	}
	return tcp.String()
}
