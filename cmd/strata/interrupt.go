package main

import (
	"context"
	"io"
)

// contextReader reads r until ctx ends. A Read blocked on a pipe or a
// terminal returns ctx's error as soon as ctx ends, so that Ctrl-C stops a
// command reading stdin; the blocked read goes on in the background and
// its bytes are dropped.
type contextReader struct {
	ctx     context.Context
	r       io.Reader
	results chan readResult
	reading bool   // a read of r is in progress in the background
	buf     []byte // bytes read from r and not yet returned
	err     error  // the error of the read that gave buf, returned after it
}

// readResult is what one background Read gave.
type readResult struct {
	b   []byte
	err error
}

// newContextReader returns r read under ctx.
func newContextReader(ctx context.Context, r io.Reader) *contextReader {
	return &contextReader{ctx: ctx, r: r, results: make(chan readResult, 1)}
}

// Read implements io.Reader.
func (c *contextReader) Read(p []byte) (int, error) {
	if len(c.buf) > 0 {
		n := copy(p, c.buf)
		c.buf = c.buf[n:]
		return n, nil
	}
	if c.err != nil {
		return 0, c.err
	}
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	if !c.reading {
		c.reading = true
		go func() {
			b := make([]byte, 64<<10)
			n, err := c.r.Read(b)
			c.results <- readResult{b[:n], err}
		}()
	}
	select {
	case res := <-c.results:
		c.reading = false
		n := copy(p, res.b)
		if c.buf = res.b[n:]; len(c.buf) == 0 {
			return n, res.err
		}
		c.err = res.err
		return n, nil
	case <-c.ctx.Done():
		return 0, c.ctx.Err()
	}
}
