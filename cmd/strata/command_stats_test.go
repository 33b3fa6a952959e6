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
		`(?m)^  refusals=3 closure=3 retention=0 artifact=0 constraint=0 depth=0 size=0 output=0$`,
		`(?m)^total sessions=1: events=41 turns=8$`,
		`(?m)^file bytes=\d+ bytes_per_event=\d+\.\d$`,
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
