package main

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
)

func TestStats(t *testing.T) {
	t.Parallel()
	db := replayed(t, []string{"--every", "0", "--every-events", "5", "--fold", "2", "--summarizer", "lossy", "--drop", "open"}, incident(t))
	out := mustCLI(t, "stats", db)
	for _, re := range []string{
		`(?m)^session mig: events=41 turns=8$`,
		`(?m)^  nodes=8 L1=5 L2=2 L3=1 roots=2 frame_version=\d+$`,
		`(?m)^  markers valid=2 invalid=6$`,
		`(?m)^  refusals=3 closure=3 retention=0 artifact=0 constraint=0 request=0 plan=0 depth=0 size=0 output=0$`,
		`(?m)^total sessions=1: events=41 turns=8$`,
		`(?m)^  raw bytes=\d+ per_event=\d+\.\d last_event=\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$`,
		`(?m)^file bytes=\d+ per_event=\d+\.\d$`,
	} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("stats lacks %s:\n%s", re, out)
		}
	}

	var st struct {
		Sessions []struct {
			ID              string         `json:"id"`
			Events          int            `json:"events"`
			NodesByDepth    map[string]int `json:"nodes_by_depth"`
			MarkersValid    int            `json:"markers_valid"`
			MarkersInvalid  int            `json:"markers_invalid"`
			RefusalsByClass map[string]int `json:"refusals_by_class"`
		} `json:"sessions"`
		Total struct {
			Events int `json:"events"`
		} `json:"total"`
		FileBytes     int64   `json:"file_bytes"`
		BytesPerEvent float64 `json:"bytes_per_event"`
	}
	js := mustCLI(t, "stats", "--json", db)
	if err := json.Unmarshal([]byte(js), &st); err != nil {
		t.Fatalf("%v\n%s", err, js)
	}
	if len(st.Sessions) != 1 || st.Sessions[0].Events != 41 || st.Total.Events != 41 ||
		st.Sessions[0].NodesByDepth["3"] != 1 || st.Sessions[0].RefusalsByClass["closure"] != 3 ||
		st.FileBytes <= 0 || st.BytesPerEvent <= 0 {
		t.Errorf("stats --json:\n%s", js)
	}

	empty := replayed(t, nil, writeFile(t, "empty.jsonl", ""))
	if js := mustCLI(t, "stats", "--json", empty); !strings.Contains(js, `"sessions": []`) {
		t.Errorf("stats --json of an empty database:\n%s", js)
	}
	wantCode(t, cli(t, "", "stats"), exitUsage)
}

// --session counts one session, its total its own; bytes_per_event is the
// raw events' bytes per event; file_bytes is the whole file's, and
// file_bytes_per_event, the file's per event, is given only when every
// session is counted. The total has no id, frame_version or last_time. An
// unknown session is an error naming the command that lists them.
func TestStats_Session(t *testing.T) {
	t.Parallel()
	db := replayed(t, []string{"--every", "2"}, incident(t), writeFile(t, "x.jsonl", `{"session":"other","kind":"user","text":"hi"}`+"\n"))
	type counts struct {
		ID            *string `json:"id"`
		FrameVersion  *uint64 `json:"frame_version"`
		Events        uint64  `json:"events"`
		RawBytes      uint64  `json:"raw_bytes"`
		BytesPerEvent float64 `json:"bytes_per_event"`
		LastTime      string  `json:"last_time"`
	}
	type doc struct {
		Sessions          []counts `json:"sessions"`
		Total             counts   `json:"total"`
		FileBytes         int64    `json:"file_bytes"`
		FileBytesPerEvent *float64 `json:"file_bytes_per_event"`
		BytesPerEvent     float64  `json:"bytes_per_event"`
	}
	decode := func(args ...string) doc {
		t.Helper()
		js := mustCLI(t, args...)
		var d doc
		if err := json.Unmarshal([]byte(js), &d); err != nil {
			t.Fatalf("%v\n%s", err, js)
		}
		return d
	}
	all := decode("stats", "--json", db)
	one := decode("stats", "--json", "--session", "mig", db)
	if len(all.Sessions) != 2 || len(one.Sessions) != 1 || *one.Sessions[0].ID != "mig" || *all.Sessions[0].ID != "mig" ||
		one.Sessions[0].RawBytes != all.Sessions[0].RawBytes || one.Sessions[0].LastTime != all.Sessions[0].LastTime {
		t.Fatalf("stats --session mig: %+v\nall: %+v", one, all)
	}
	if one.Total.ID != nil || all.Total.ID != nil || one.Total.LastTime != "" || one.Total.FrameVersion != nil || all.Total.FrameVersion != nil {
		t.Errorf("the total has an id, a last time or a frame version: %+v", one.Total)
	}
	if one.Sessions[0].FrameVersion == nil || all.Sessions[1].FrameVersion == nil || *all.Sessions[1].FrameVersion != 0 {
		t.Errorf("a session has no frame version: %+v", all.Sessions)
	}
	if one.Total.Events != 41 || one.Total.RawBytes != one.Sessions[0].RawBytes || all.Total.RawBytes != all.Sessions[0].RawBytes+all.Sessions[1].RawBytes {
		t.Errorf("totals: one %+v, all %+v", one.Total, all.Total)
	}
	for _, d := range []doc{all, one} {
		ev := float64(d.Total.Events)
		if d.BytesPerEvent != float64(d.Total.RawBytes)/ev || d.Total.BytesPerEvent != d.BytesPerEvent || d.FileBytes <= 0 {
			t.Errorf("per event: %+v", d)
		}
	}
	if all.FileBytesPerEvent == nil || *all.FileBytesPerEvent != float64(all.FileBytes)/float64(all.Total.Events) || *all.FileBytesPerEvent <= all.BytesPerEvent {
		t.Errorf("file bytes per event of every session: %v, file bytes %d, events %d", all.FileBytesPerEvent, all.FileBytes, all.Total.Events)
	}
	if one.FileBytesPerEvent != nil || one.FileBytes != all.FileBytes {
		t.Errorf("stats --session mig: file_bytes_per_event %v, file_bytes %d (the file's %d)", one.FileBytesPerEvent, one.FileBytes, all.FileBytes)
	}
	if out := mustCLI(t, "stats", "--session", "mig", db); !regexp.MustCompile(`(?m)^file bytes=\d+$`).MatchString(out) {
		t.Errorf("stats --session mig: the file's line is not its size alone:\n%s", out)
	}
	if s := all.Sessions[0]; s.BytesPerEvent != float64(s.RawBytes)/float64(s.Events) || s.LastTime == "" {
		t.Errorf("session: %+v", s)
	}
	if out := mustCLI(t, "stats", "--session", "other", db); !strings.HasPrefix(out, "session other: events=1 turns=1\n") || strings.Contains(out, "session mig") {
		t.Errorf("stats --session other:\n%s", out)
	}

	r := cli(t, "", "stats", "--session", "absent", db)
	wantCode(t, r, exitError)
	if !strings.HasSuffix(r.stderr, "Hint: to list the sessions, run: strata sessions "+db+"\n") {
		t.Errorf("stderr %q", r.stderr)
	}
	wantCode(t, cli(t, "", "stats", "--session", "", db), exitOK) // "" is every session
	wantCode(t, cli(t, "", "stats", "--session", "a\nb", db), exitUsage)
}
