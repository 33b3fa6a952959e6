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
// # Endpoints
//
// Each answers GET and HEAD only, from ONE read transaction (DB.View), so
// that what it shows is consistent while the agent goes on appending:
//
//   - {prefix}/ — an index: the handler, the format version, the sessions
//     (id, head_seq, turn, frame) and the endpoints, as JSON.
//   - {prefix}/dump — `strata dump`: ?format=json (the default; the JSON
//     document of `strata dump --json`), text or dot; ?raw=1 adds the raw
//     events; ?session=ID dumps one session, and with &from=SEQ&to=SEQ
//     only its nodes and events overlapping that seq range (json and text).
//     Streamed: one record in memory at a time.
//   - {prefix}/stats[?session=ID] — `strata stats --json [--session ID]`,
//     byte for byte.
//   - {prefix}/resume?session=ID[&marker=ID|latest][&format=text] — the
//     resumed context as `strata resume --json` prints it, or its text.
//   - {prefix}/backup — a hot backup: the whole database file as of the
//     transaction (Snapshot.WriteTo), streamed, with Content-Length set to
//     its size, so that a client sees a cut transfer as one.
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
package debughttp
