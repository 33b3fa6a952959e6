package main

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/strata-go/strata/debughttp"
)

func TestSessions(t *testing.T) {
	t.Parallel()
	other := writeFile(t, "other.jsonl", `{"session":"other one","kind":"user","text":"hi","time":"2025-06-07T08:09:10Z"}`+"\n")
	db := replayed(t, []string{"--every", "0", "--every-events", "5", "--fold", "2", "--summarizer", "lossy", "--drop", "open"}, incident(t), other)

	out := mustCLI(t, "sessions", db)
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 3 || !regexp.MustCompile(`^SESSION +EVENTS +TURNS +NODES +REFUSALS +LAST EVENT$`).MatchString(lines[0]) {
		t.Fatalf("sessions:\n%s", out)
	}
	for i, re := range []string{
		`^mig +41 +8 +8 \(L1=5 L2=2 L3=1\) +3 +\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$`,
		`^"other one" +1 +1 +0 +0 +2025-06-07T08:09:10Z$`,
	} {
		if !regexp.MustCompile(re).MatchString(lines[i+1]) {
			t.Errorf("line %d %q does not match %s", i+2, lines[i+1], re)
		}
	}

	var got []sessionLine
	js := mustCLI(t, "sessions", "--json", db)
	if err := json.Unmarshal([]byte(js), &got); err != nil {
		t.Fatalf("%v\n%s", err, js)
	}
	if len(got) != 2 {
		t.Fatalf("sessions --json:\n%s", js)
	}
	mig, one := got[0], got[1]
	if mig.ID != "mig" || mig.Events != 41 || mig.HeadSeq != 41 || mig.Turns != 8 || mig.Nodes != 8 ||
		mig.NodesByDepth[1] != 5 || mig.NodesByDepth[3] != 1 || mig.Refusals != 3 || mig.MarkersInvalid != 6 || mig.LastTime.IsZero() {
		t.Errorf("mig: %+v", mig)
	}
	if one.ID != "other one" || one.Events != 1 || one.Nodes != 0 || one.NodesByDepth == nil ||
		!one.LastTime.Equal(time.Date(2025, 6, 7, 8, 9, 10, 0, time.UTC)) {
		t.Errorf("other one: %+v", one)
	}
	if !strings.Contains(js, `"nodes_by_depth": {}`) {
		t.Errorf("an empty nodes_by_depth is not {}:\n%s", js)
	}

	// The URL of a live agent's handler gives the same bytes.
	url := liveAgent(t, db, debughttp.Options{})
	if r := mustCLI(t, "sessions", url); r != out {
		t.Errorf("sessions URL:\n%s", firstDiff(r, out))
	}
	if r := mustCLI(t, "sessions", "--json", url); r != js {
		t.Errorf("sessions --json URL:\n%s", firstDiff(r, js))
	}
}

func TestSessions_EmptyAndErrors(t *testing.T) {
	t.Parallel()
	empty := replayed(t, nil, writeFile(t, "empty.jsonl", ""))
	if out := mustCLI(t, "sessions", "--json", empty); out != "[]\n" {
		t.Errorf("sessions --json of an empty database: %q", out)
	}
	if out := mustCLI(t, "sessions", empty); !strings.HasPrefix(out, "SESSION") || strings.Count(out, "\n") != 1 {
		t.Errorf("sessions of an empty database: %q", out)
	}
	wantCode(t, cli(t, "", "sessions"), exitUsage)
	wantCode(t, cli(t, "", "sessions", empty, empty), exitUsage)
	r := cli(t, "", "sessions", empty+".absent")
	wantCode(t, r, exitError)
	if !strings.Contains(r.stderr, "does not exist") {
		t.Errorf("stderr %q", r.stderr)
	}
}
