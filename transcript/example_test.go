package transcript_test

import (
	"fmt"
	"strings"

	"github.com/strata-go/strata/transcript"
)

// Read an Anthropic Messages transcript in which the user refuses a tool
// use and a file is written: the events carry the rejection and the
// artifact as facts, ready for store.Append, in the session named after the
// file. Each carries the ref of the message it was made from (its position
// and a hash: these messages have no ids), by which the store knows it
// when the file is imported again.
func ExampleRead() {
	const messages = `[
 {"role": "user", "content": "Add a down migration."},
 {"role": "assistant", "content": [
   {"type": "tool_use", "id": "t1", "name": "bash", "input": {"command": "psql -f 003_up.sql"}},
   {"type": "tool_use", "id": "t2", "name": "str_replace_based_edit_tool",
    "input": {"command": "create", "path": "migrations/003_down.sql", "file_text": "DROP ..."}}]},
 {"role": "user", "content": [
   {"type": "tool_result", "tool_use_id": "t2", "content": "File created"},
   {"type": "tool_result", "tool_use_id": "t1", "is_error": true,
    "content": "The user doesn't want to proceed with this tool use. To tell you how to proceed, the user said:\nnot on prod"}]}
]`
	sessions, report, err := transcript.Read(transcript.Anthropic, strings.NewReader(messages), transcript.Options{File: "chat.json"})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, s := range sessions {
		fmt.Println("session", s.ID)
		for _, e := range s.Events {
			fmt.Println(e.Kind, e.ID, e.Key, e.Failed, e.Ref)
		}
	}
	fmt.Println(report)
	// Output:
	// session chat
	// user   false 1:b3013ff64d6123a3
	// tool_call t1  false 2:2c5689af4e819db5
	// tool_call t2  false 2:2c5689af4e819db5
	// tool_result t2  false 3:303a7bda3af2ec09
	// artifact  migrations/003_down.sql false 3:303a7bda3af2ec09
	// tool_result t1  true 3:303a7bda3af2ec09
	// rejected  tool/bash:psql -f 003_up.sql false 3:303a7bda3af2ec09
	// records=3 events=7 messages=1 calls=2 results=2 failed=1 rejected=1 artifacts=1
}
