package store_test

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	"github.com/strata-go/strata/internal/bench"
	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/tier"
)

// BenchmarkReplayPages replays the real sessions as scenario 3 does
// (bench.ReplayStrataWith: runs of 256 events, extractive compaction on a
// second goroutine, NoSync), and reports the tree pages each commit wrote:
// the pages reachable from the newest meta page that were not reachable
// before the commit, read from the file at every commit (store's "commit"
// test hook). Per bucket too: "root" (the root bucket's own pages), "meta",
// "session" (a session's bucket), "sub" (the tables inside it). The pages
// per commit of the docs come from it:
//
//	go test ./store -run '^$' -bench ReplayPages -benchtime 1x
func BenchmarkReplayPages(b *testing.B) {
	dir := bench.RealDir()
	if dir == "" {
		b.Skip("../shared/data/real is absent")
	}
	sessions, err := bench.LoadReal(dir)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("strata", func(b *testing.B) {
		b.ReportAllocs()
		var c pageCount
		for i := 0; i < b.N; i++ {
			path := filepath.Join(b.TempDir(), "strata.db")
			c.prev = nil
			clear := store.SetTestHook(func(step string) error {
				if step == "commit" {
					c.commit(path)
				}
				return nil
			})
			_, _, err := bench.ReplayStrataWith(path, sessions, store.Options{NoSync: true}, bench.ReplayPolicy)
			clear()
			if err != nil {
				b.Fatal(err)
			}
		}
		c.report(b)
	})
	// The peer: bare bbolt, a bucket per session, one commit per append
	// of the same runs (bench.ReplayPeer), no summaries.
	b.Run("bbolt", func(b *testing.B) {
		var c pageCount
		for i := 0; i < b.N; i++ {
			p, err := bench.OpenPeer(bench.PeerBolt, b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			c.prev = nil
			c.commit(p.Path())
			if _, err := bench.ReplayPeer(countingPeer{p, &c}, sessions); err != nil {
				b.Fatal(err)
			}
			p.Close()
		}
		c.report(b)
	})
}

// pageCount counts the tree pages new at each commit of a file: the
// caller calls commit before each one (strata's "commit" hook fires before
// bbolt commits, so the file then holds the commit before) or after it.
type pageCount struct {
	prev           map[uint64]string
	commits, total int
	byBucket       map[string]int
}

func (c *pageCount) commit(path string) {
	cur, ok := treePages(path)
	if !ok {
		return
	}
	if c.prev != nil {
		if c.byBucket == nil {
			c.byBucket = map[string]int{}
		}
		for id, l := range cur {
			if _, ok := c.prev[id]; !ok {
				c.byBucket[l]++
				c.total++
			}
		}
		c.commits++
	}
	c.prev = cur
}

func (c *pageCount) report(b *testing.B) {
	b.ReportMetric(float64(c.total)/float64(c.commits), "pages/commit")
	for l, n := range c.byBucket {
		b.ReportMetric(float64(n)/float64(c.commits), l+"-pages/commit")
	}
}

// countingPeer is a peer that counts the pages of each append's commit.
type countingPeer struct {
	bench.Peer
	c *pageCount
}

func (p countingPeer) Append(session string, events ...tier.Event) error {
	err := p.Peer.Append(session, events...)
	p.c.commit(p.Path())
	return err
}

// treePages maps every page reachable from the newest meta page of the
// bbolt file at path to the kind of bucket it belongs to. ok is false
// before the file has its meta pages.
func treePages(path string) (map[uint64]string, bool) {
	data, err := os.ReadFile(path)
	const ps = 4096
	if err != nil || len(data) < 2*ps {
		return nil, false
	}
	var root, txid uint64
	for i := 0; i < 2; i++ {
		m := data[i*ps+16:]
		if t := binary.LittleEndian.Uint64(m[48:]); i == 0 || t > txid {
			txid, root = t, binary.LittleEndian.Uint64(m[16:])
		}
	}
	out := map[uint64]string{}
	var walk func(p []byte, id uint64, label string, inline bool)
	child := func(parent, key string) string {
		switch {
		case parent != "":
			return "sub"
		case key == "meta":
			return key
		}
		return "session" // strata's s/<id>, or bare bbolt's <id>
	}
	walkID := func(id uint64, label string) {
		if off := int(id) * ps; off+ps <= len(data) {
			walk(data[off:], id, label, false)
		}
	}
	walk = func(p []byte, id uint64, label string, inline bool) {
		flags, count := binary.LittleEndian.Uint16(p[8:]), int(binary.LittleEndian.Uint16(p[10:]))
		if !inline {
			for j := uint64(0); j <= uint64(binary.LittleEndian.Uint32(p[12:])); j++ {
				if label == "" {
					out[id+j] = "root"
				} else {
					out[id+j] = label
				}
			}
		}
		for i := 0; i < count; i++ {
			e := p[16+i*16:]
			if flags&0x01 != 0 { // branch
				walkID(binary.LittleEndian.Uint64(e[8:]), label)
				continue
			}
			if binary.LittleEndian.Uint32(e)&1 == 0 { // a value, not a bucket
				continue
			}
			pos, ks, vs := binary.LittleEndian.Uint32(e[4:]), binary.LittleEndian.Uint32(e[8:]), binary.LittleEndian.Uint32(e[12:])
			k, v := string(e[pos:pos+ks]), e[pos+ks:pos+ks+vs]
			if r := binary.LittleEndian.Uint64(v); r == 0 {
				walk(v[16:], 0, child(label, k), true)
			} else {
				walkID(r, child(label, k))
			}
		}
	}
	walkID(root, "")
	return out, true
}
