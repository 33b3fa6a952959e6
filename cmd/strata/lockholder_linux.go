package main

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// lockHolders returns the processes that hold a lock on the file at path,
// each as "process PID (COMMAND)", read from /proc/locks; nil when none is
// found (or the system does not say). bbolt locks with flock(2).
func lockHolders(path string) []string {
	fi, err := os.Stat(path)
	if err != nil {
		return nil
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	f, err := os.Open("/proc/locks")
	if err != nil {
		return nil
	}
	defer f.Close()
	dev := uint64(st.Dev)
	want := lockID{major: uint64(unix.Major(dev)), minor: uint64(unix.Minor(dev)), inode: st.Ino}
	var out []string
	seen := map[int]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// "1: FLOCK  ADVISORY  WRITE 2269 fe:00:10092577 0 EOF"; a waiter's
		// line has "->" after the number.
		fields := strings.Fields(sc.Text())
		if len(fields) < 6 || fields[1] == "->" || fields[1] != "FLOCK" {
			continue
		}
		pid, err := strconv.Atoi(fields[4])
		if err != nil || pid == os.Getpid() || seen[pid] {
			continue
		}
		if id, ok := parseLockID(fields[5]); !ok || id != want {
			continue
		}
		seen[pid] = true
		holder := fmt.Sprintf("process %d", pid)
		if comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); err == nil {
			holder += " (" + strings.TrimSpace(string(comm)) + ")"
		}
		out = append(out, holder)
	}
	return out
}

// lockID is the file a line of /proc/locks is about.
type lockID struct{ major, minor, inode uint64 }

// parseLockID parses "MAJOR:MINOR:INODE", the device numbers in hex.
func parseLockID(s string) (lockID, bool) {
	parts := strings.Split(s, ":")
	if len(parts) != 3 {
		return lockID{}, false
	}
	major, err1 := strconv.ParseUint(parts[0], 16, 32)
	minor, err2 := strconv.ParseUint(parts[1], 16, 32)
	inode, err3 := strconv.ParseUint(parts[2], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return lockID{}, false
	}
	return lockID{major: major, minor: minor, inode: inode}, true
}
