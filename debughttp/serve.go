package debughttp

import (
	"context"
	"net"
	"net/http"
	"time"

	"github.com/cockroachdb/errors"
)

// DefaultAddr is where Listen listens when given no address: loopback only,
// the port net/http/pprof users know.
const DefaultAddr = "127.0.0.1:6060"

// Listen listens on addr for Serve: DefaultAddr when addr is empty. An
// address that is not loopback (":6060", "0.0.0.0:6060", a host's own
// address) is refused with ErrNotLoopback unless opts.Token is set — the
// handler then asks every request for it.
func Listen(addr string, opts Options) (net.Listener, error) {
	if addr == "" {
		addr = DefaultAddr
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, errors.Wrapf(err, "debughttp: address %q", addr)
	}
	if !loopback(host) && opts.Token == "" {
		return nil, errors.WithHint(errors.Wrapf(ErrNotLoopback, "%q", addr),
			"listen on 127.0.0.1 or [::1], or set Options.Token (and serve it behind TLS beyond one machine)")
	}
	ln, err := net.Listen("tcp", addr)
	return ln, errors.Wrapf(err, "debughttp: listen %s", addr)
}

// loopback reports whether host names only this machine: localhost or a
// loopback IP. An empty host is every interface.
func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Serve answers the requests ln accepts with New(db, opts), mounted under
// opts.Prefix, until ctx is done; then it stops accepting, waits up to five
// seconds for the requests in flight and returns nil. A request's read
// transaction lasts as long as its body takes to send: the server bounds a
// request's headers to ten seconds, and leaves the body unbounded (a large
// backup takes what it takes).
func Serve(ctx context.Context, ln net.Listener, db Viewer, opts Options) error {
	mux := http.NewServeMux()
	Register(mux, db, opts)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return errors.Wrap(err, "debughttp: serve")
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil {
		_ = srv.Close()
	}
	if err := <-done; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return errors.Wrap(err, "debughttp: serve")
	}
	return nil
}
