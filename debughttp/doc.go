// Package debughttp serves a running agent's strata database over HTTP, for
// inspection while the agent holds it: bbolt's file lock keeps every other
// process (`strata dump agent.db`) out of a database a live process has
// open for writing, so the process itself has to answer. Mount it the way
// net/http/pprof is mounted:
//
//	debughttp.Register(mux, db, debughttp.Options{})   // under /debug/strata/
//
// or let it listen on its own — on loopback by default (Listen refuses an
// address other hosts could reach unless Options.Token is set):
//
//	ln, err := debughttp.Listen("", debughttp.Options{}) // 127.0.0.1:6060
//	go debughttp.Serve(ctx, ln, db, debughttp.Options{})
//
// and read it with the strata command, which takes the URL wherever it
// takes a database to read:
//
//	strata dump http://127.0.0.1:6060/debug/strata
//	strata backup http://127.0.0.1:6060/debug/strata agent-copy.db
//
// or watch it in a browser at http://127.0.0.1:6060/debug/strata/ui/ (see
// The page, below). `strata serve DB` serves a database file the same way.
//
// # Endpoints
//
// Each answers GET and HEAD only, from ONE read transaction (DB.View), so
// that what it shows is consistent while the agent goes on appending:
//
//   - {prefix}/ — an index: the handler, the format version, the sessions
//     (id, head_seq, turn, frame) and the endpoints, as JSON.
//
//   - {prefix}/dump — `strata dump`: ?format=json (the default; the JSON
//     document of `strata dump --json`), text or dot; ?raw=1 adds the raw
//     events; ?session=ID dumps one session, and with &from=SEQ&to=SEQ
//     only its nodes and events overlapping that seq range (json and text).
//     Streamed: one record in memory at a time.
//
//   - {prefix}/stats[?session=ID] — `strata stats --json [--session ID]`,
//     byte for byte.
//
//   - {prefix}/resume?session=ID[&marker=ID|latest][&format=text] — the
//     resumed context as `strata resume --json` prints it, or its text.
//
//   - {prefix}/session?session=ID[&history=all] — what the page shows of
//     one session, as JSON: its info, roots, nodes per depth (tiers),
//     uncompacted tail, markers and checkpoints (counted; every valid one
//     and the last 50 invalid listed, all with history=all), refusals
//     (counted; the last 50 listed, all with history=all, with the failures
//     each names), the latest resume's source, reason and sha256 (its nodes
//     and events counted, not included), the calls open at its head,
//     and its forks (a fork's origin is its info's fork; forks_error says
//     why they are unknown when another session's origin is damaged).
//
//   - {prefix}/sessions — the session list the page filters: each session's
//     info, the times of its first and last events and how many calls are
//     open at its head.
//
// The index and the session list give a session whose records are damaged
// as its id and "damage", the error reading it, and no other field, and
// list the others whole: one session's damage is its own.
//
//   - {prefix}/events?session=ID — a window of the session's events, the
//     page's timeline: &from=SEQ&to=SEQ the range (default the whole log),
//     &q=TEXT, &item=ID|KEY|ID@SEQ and &marked=1 filters, the first limit
//     matches when from is given, else the last (&limit=N, DefaultEvents,
//     at most MaxEvents), each text clipped to &clip=BYTES (DefaultClip;
//     0 whole).
//
//   - {prefix}/nodes?session=ID — every summary node of the session, with
//     its narrative and claims.
//
//   - {prefix}/backup — a hot backup, with Content-Length set to its size,
//     so that a client sees a cut transfer as one: the whole database file
//     as of the transaction (Snapshot.WriteTo), streamed. Of a database
//     that is not a file (PostgreSQL), a new bbolt file of every session
//     in the transaction — the one DB.BackupFile and `strata backup URL
//     FILE` write (Snapshot.CopyFile) — built in a temporary directory
//     (os.TempDir), sent once whole and the transaction ended, then
//     removed; a HEAD builds it too, for its length.
//
//   - {prefix}/ui/ (PagePath) — the page.
//
// Errors are JSON, {"error": "..."} plus "damaged": true when the error is
// damage found in the database, with a status that says what is wrong:
// 400 a bad or unknown query parameter, 401 a missing or wrong token, 404 an
// unknown session, marker or endpoint, 405 a method other than GET or HEAD,
// 500 damage found while reading, 503 a closed database. An error found
// after a streamed body has begun aborts the response (the client sees a
// cut body, never a complete-looking wrong one). Every response carries the
// header Strata-Handler (HandlerHeader), by which a client tells a strata
// handler from any other server.
//
// # The page
//
// {prefix}/ui/ is a web page for a person watching the agent: plain HTML,
// CSS and JavaScript embedded in the package, which asks for nothing but
// the handler's endpoints (it works offline) and only reads. It lists the
// sessions, searchable by id and filtered to the refused ones, those with
// open calls or the recent ones, and shows the selected one's frame as
// tiers, a timeline of its events (a window of the events endpoint, at the
// head by default, with search, each tool call with its output, failures
// and rejections marked, times, long texts collapsed), every root node's
// narrative (labelled as the summarizer's words, unchecked) and verified
// claims, the resumed context's text, the refused compactions with links
// to the events they name, and the markers and checkpoints: the valid ones,
// the invalidated history on demand. It polls the index 1.5 seconds after
// each answer and reads what changed, so it follows the agent as it
// appends and compacts. Every string from the database is written into the
// page as text, never as markup, control characters as their escapes,
// under a Content-Security-Policy that allows no inline script.
// A browser's GET of {prefix}/ (one that accepts text/html) is redirected
// to the page.
//
// The page's files hold no data: they are served without Options.Token,
// which a browser cannot send when it navigates. Every request for data
// carries it: the page asks for it, or takes it once from the address's
// fragment, {prefix}/ui/#token=..., which never leaves the browser.
//
// # Caveats
//
// The handler exposes the agent's WHOLE transcript — every user message,
// tool call and result, file contents in artifacts, and a copy of the
// database — to whoever can reach it. Bind it to loopback
// (127.0.0.1:6060), never to a public interface; set Options.Token to demand
// "Authorization: Bearer <token>" (compared in constant time), and put it
// behind TLS and your own authentication when it must cross a network: New
// returns a plain http.Handler to wrap. Responses say Cache-Control:
// no-store.
//
// A request holds a read transaction for as long as its body takes to
// send: a slow client of a large dump or backup keeps bbolt from reusing
// the pages freed meanwhile (the file may grow), and DB.Close waits for it.
// Serve it with timeouts (http.Server.WriteTimeout) that fit your database.
// A backup of PostgreSQL holds its transaction only while its file is
// built, but that file takes the store's size in os.TempDir ($TMPDIR)
// until it is sent, and the answer starts only once it is built.
package debughttp
