package companion

import (
	"encoding/json"
	"strconv"
	"strings"
)

// oneLine quotes s if it holds a line break or a control character, so
// that it stays on its line.
func oneLine(s string) string {
	if strings.IndexFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f || r == 0x85 || r == 0x2028 || r == 0x2029 }) >= 0 {
		return strconv.Quote(s)
	}
	return s
}

// JSONString returns s as a JSON string, quotes included, <, > and &
// left alone: the bytes a JSON encoder writes for it, which a backward
// search of a transcript looks for (TranscriptFile.FindLast).
func JSONString(s string) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	return strings.TrimSuffix(b.String(), "\n")
}
