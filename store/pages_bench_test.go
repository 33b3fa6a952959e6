package store_test

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/strata-go/strata/internal/bench"
	"github.com/strata-go/strata/store"
)

// BenchmarkReplayPages replays the real sessions as scenario 3 does
// (bench.ReplayStrataWith: runs of 256 events, extractive compaction on a
// second goroutine, NoSync) into each format, and reports the tree pages
// each commit wrote: the pages reachable from the newest meta page that
// were not reachable before the commit, read from the file at every
// commit (store's "commit" test hook). Per bucket too: "root" (the root
// bucket's own pages), "session" (a session's bucket), "sub" (the buckets
// inside it), "e", "h", "j". The README's pages per commit come from it:
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
	for _, f := range []int{2, 4, 5} {
		b.Run(fmt.Sprint("format", f), func(b *testing.B) {
			b.ReportAllocs()
			var commits, total int
			byBucket := map[string]int{}
			for i := 0; i < b.N; i++ {
				path := filepath.Join(b.TempDir(), "strata.db")
				var prev map[uint64]string
				clear := store.SetTestHook(func(step string) error {
					if step != "commit" {
						return nil
					}
					cur, ok := treePages(path)
					if !ok {
						return nil
					}
					if prev != nil {
						for id, l := range cur {
							if _, ok := prev[id]; !ok {
								byBucket[l]++
								total++
							}
						}
						commits++
					}
					prev = cur
					return nil
				})
				_, _, err := bench.ReplayStrataWith(path, sessions, store.Options{NoSync: true, Format: f})
				clear()
				if err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(total)/float64(commits), "pages/commit")
			for l, n := range byBucket {
				b.ReportMetric(float64(n)/float64(commits), l+"-pages/commit")
			}
		})
	}
	// The peer: bare bbolt, a bucket per session, one commit per append
	// of the same runs (bench.ReplayPeer), no summaries.
	b.Run("bbolt", func(b *testing.B) {
		var commits, total int
		byBucket := map[string]int{}
		for i := 0; i < b.N; i++ {
			p, err := bench.OpenPeer(bench.PeerBolt, b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			prev, _ := treePages(p.Path())
			for j := range sessions {
				s := &sessions[j]
				for from := 0; from < len(s.Events); from += bench.ReplayBatch {
					if err := p.Append(s.ID, s.Events[from:min(from+bench.ReplayBatch, len(s.Events))]...); err != nil {
						b.Fatal(err)
					}
					cur, _ := treePages(p.Path())
					for id, l := range cur {
						if _, ok := prev[id]; !ok {
							byBucket[l]++
							total++
						}
					}
					commits++
					prev = cur
				}
			}
			p.Close()
		}
		b.ReportMetric(float64(total)/float64(commits), "pages/commit")
		for l, n := range byBucket {
			b.ReportMetric(float64(n)/float64(commits), l+"-pages/commit")
		}
	})
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
		case key == "meta" || key == "e" || key == "h" || key == "j":
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
