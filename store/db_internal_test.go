package store

import (
	"strings"
	"testing"
)

// TestCorrupt_ClipsAHugeKey: a damaged leaf element can claim a key of
// gigabytes, its slice reaching far past its page. The error naming it
// shows its first bytes and its length, and reads no further.
func TestCorrupt_ClipsAHugeKey(t *testing.T) {
	const shown = 256 // bytes of a key an error quotes
	key := make([]byte, 200<<20)
	key[0] = 'k'
	msg := corrupt("s", "roots", key, nil).Error()
	if len(msg) > 4*shown+200 || !strings.Contains(msg, `"k\x00`) || !strings.Contains(msg, "(209715200 bytes)") {
		t.Errorf("error of %d bytes: %.300s", len(msg), msg)
	}
}
