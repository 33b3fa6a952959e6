package main

import (
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// completionTimeout bounds the wait for a database's lock while a shell
// completes a session id: a held database completes nothing, at once.
const completionTimeout = 100 * time.Millisecond

// completeSessions makes the shell complete cmd's --session with the
// session ids of the database file the command line names so far (its
// --db, or its first argument). A URL, a missing file or a held one
// completes nothing.
func completeSessions(cmd *cobra.Command) {
	_ = cmd.RegisterFlagCompletionFunc("session", func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		path := ""
		if f := cmd.Flags().Lookup("db"); f != nil {
			path = f.Value.String()
		}
		if path == "" && len(args) > 0 {
			path = args[0]
		}
		if path == "" || isURL(path) {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		db, err := openReadOnly(path, completionTimeout)
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		defer db.Close()
		ids, err := db.Sessions()
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var out []string
		for _, id := range ids {
			if strings.HasPrefix(id, toComplete) {
				out = append(out, id)
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	})
}
