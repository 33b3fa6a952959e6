package strata

// The backends store.Open finds by a database's path or URL (package
// backend's registry): importing this package — for its effect alone,
// import _ "github.com/strata-go/strata" — links both in, as a
// database/sql driver is linked in. A program that opens only files imports
// backend/boltfile instead, and leaves PostgreSQL's client out.
import (
	_ "github.com/strata-go/strata/backend/boltfile"
	_ "github.com/strata-go/strata/backend/postgres"
)
