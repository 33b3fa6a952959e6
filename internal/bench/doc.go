// Package bench measures strata against the two things a user would build
// instead: bare bbolt (the floor strata builds on) and SQLite through the
// pure-Go driver modernc.org/sqlite (WAL, synchronous=FULL and NORMAL), each
// storing the same events, msgpack-encoded exactly as strata encodes them,
// with the same durability (one fsync'd commit per acknowledged append;
// SQLite NORMAL is shown as the usual weaker setting). On PostgreSQL,
// strata is measured beside PostgresPeer, a table with one INSERT per event
// on the same server; those benchmarks (BenchmarkPostgres*) skip unless
// STRATA_TEST_POSTGRES names a server.
//
// The scenarios are functions of this package, so that the Go benchmarks
// (bench_test.go, with b.ReportAllocs) and the comparison table
// (go run ./internal/bench/cmd/benchtable) run the same code. The default
// `go test ./...` runs only a smoke pass (TestSmoke): every scenario at a
// tiny size, checking that the peers store what strata stores; it never
// asserts a timing. The 1M-event and 1 GB cases run only when asked:
//
//	go run ./internal/bench/cmd/benchtable                 # the table (a few minutes)
//	go run ./internal/bench/cmd/benchtable -large          # with 1M events of history and a 1 GB dump
//	go test ./internal/bench -run '^$' -bench . -benchtime 500x
//	STRATA_BENCH_LARGE=1 go test ./internal/bench -run '^$' -bench History -timeout 1h
//
// The real sessions of ../shared/data/real are used where present (the
// replay scenario needs them); elsewhere synthetic events of the same shape
// stand in.
//
// # Caveats
//
// Ratios are what this package reports, never absolute timings: every peer
// runs in the same process, on the same disk, in the same run. fsync costs
// dominate durable appends, and differ by an order of magnitude between
// disks; a figure from another machine compares only as a ratio.
package bench
