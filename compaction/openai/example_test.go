package openai_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"

	"github.com/strata-go/strata/compaction"
	"github.com/strata-go/strata/compaction/openai"
	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/tier"
)

// exampleModel is a stand-in for a model server: an OpenAI-compatible
// /v1/chat/completions that copies the required claims from the prompt, as
// a model following it does, and writes a one-line narrative.
func exampleModel() *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Messages []struct{ Role, Content string }
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, `{"error":{"message":"bad request"}}`, http.StatusBadRequest)
			return
		}
		prompt := req.Messages[len(req.Messages)-1].Content
		_, block, _ := strings.Cut(prompt, "```json\n")
		block, _, _ = strings.Cut(block, "\n```")
		var claims json.RawMessage = []byte(block)
		answer, _ := json.Marshal(map[string]any{
			"narrative": "The user asked for a reversible citext migration; the rollback script is written.",
			"claims":    claims,
		})
		json.NewEncoder(w).Encode(map[string]any{"choices": []any{map[string]any{
			"finish_reason": "stop", "message": map[string]any{"role": "assistant", "content": string(answer)}}}})
	}))
}

// ExampleNew compacts an agent's session with a model behind an
// OpenAI-compatible endpoint (here a stand-in server; for Ollama the base
// URL is http://localhost:11434/v1), and resumes from the marker the store
// committed after checking the model's claims.
func ExampleNew() {
	server := exampleModel()
	defer server.Close()

	dir, err := os.MkdirTemp("", "strata-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	db, err := store.Open(filepath.Join(dir, "agent.db"), store.Options{Create: true})
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()

	sum, err := openai.New(openai.Config{
		BaseURL: server.URL + "/v1",
		Model:   "llama3.1:8b",
		APIKey:  "unused-by-local-servers",
		Retries: 2,
	})
	if err != nil {
		log.Fatal(err)
	}
	c, err := compaction.NewCompactor(db, compaction.Options{Summarizer: sum, Policy: compaction.Policy{EveryTurns: 1}})
	if err != nil {
		log.Fatal(err)
	}
	turns := [][]tier.Event{
		{
			{Kind: tier.KindUser, Text: "Migrate users.email to citext. It must be reversible."},
			{Kind: tier.KindConstraint, Key: "reversible", Text: "the schema migration must be reversible"},
			{Kind: tier.KindToolCall, ID: "c1", Name: "write_file", Text: "migrations/003_down.sql"},
			{Kind: tier.KindToolResult, ID: "c1", Text: "wrote 4 lines"},
			{Kind: tier.KindArtifact, Key: "migrations/003_down.sql", Text: "rollback script"},
		},
		{{Kind: tier.KindUser, Text: "Now the forward migration."}},
	}
	for _, turn := range turns {
		if _, err := db.Append("agent-1", turn...); err != nil {
			log.Fatal(err)
		}
		results, err := c.Run(context.Background(), "agent-1")
		if err != nil {
			log.Fatal(err) // a transport failure or an unusable answer: see openai.OutputError
		}
		for _, r := range results {
			fmt.Printf("compacted=%v %s seq %d..%d marker %d\n", r.Committed(), r.Depth, r.From, r.To, r.Marker)
		}
	}

	rc, err := db.Resume("agent-1", store.Latest)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("source:", rc.Source)
	for _, line := range strings.Split(string(rc.Text()), "\n") {
		if strings.HasPrefix(line, "## ") || strings.HasPrefix(line, "  ") || strings.HasPrefix(line, "- ") {
			fmt.Println(line)
		}
	}
	// Output:
	// compacted=true L1 seq 1..5 marker 1
	// source: marker
	// ## L1 summary 1, seq 1..5
	//   The user asked for a reversible citext migration; the rollback script is written.
	// - user request at seq 1: Migrate users.email to citext. It must be reversible.
	// - constraint: reversible — the schema migration must be reversible
	// - artifact: migrations/003_down.sql — rollback script
	// ## raw seq 6..6
	//     Now the forward migration.
}
