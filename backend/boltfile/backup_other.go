//go:build !unix

package boltfile

import (
	"os"
	"time"
)

// lockTemp does nothing where there is no flock: see backup_unix.go.
func lockTemp(*os.File) {}

// sweepTemps removes nothing where a live writer's file cannot be told from
// a dead one's.
func sweepTemps(string, time.Time) int { return 0 }
