package store

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"syscall"
	"unsafe"
)

// releaseMapped tells the kernel that the pages of the file at path that
// this process has mapped need not stay in its resident set: they stay in
// the page cache and are read back from there on the next access
// (madvise MADV_DONTNEED on a shared file mapping drops the process's page
// table entries, never the file's data). bbolt maps the whole file, so a
// read that walks a database larger than memory would otherwise grow the
// resident set to the size of the file.
//
// The mapping is found in /proc/self/maps by the file's inode. It is safe
// at any time: a value read earlier from the mapping is read back from the
// page cache, and bbolt does not write through its mapping.
func releaseMapped(path string) {
	fi, err := os.Stat(path)
	if err != nil {
		return
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return
	}
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		return
	}
	defer f.Close()
	ino := []byte(strconv.FormatUint(st.Ino, 10))
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// start-end perms offset dev inode path
		fields := bytes.Fields(sc.Bytes())
		if len(fields) < 6 || !bytes.Equal(fields[4], ino) {
			continue
		}
		addr := bytes.SplitN(fields[0], []byte("-"), 2)
		if len(addr) != 2 {
			continue
		}
		start, err1 := strconv.ParseUint(string(addr[0]), 16, 64)
		end, err2 := strconv.ParseUint(string(addr[1]), 16, 64)
		if err1 != nil || err2 != nil || end <= start {
			continue
		}
		_, _, _ = syscall.Syscall(syscall.SYS_MADVISE, uintptr(start), uintptr(end-start), syscall.MADV_DONTNEED)
	}
}

// releaseRange is releaseMapped for the part of the mapping that b (a
// slice of it, from its start) covers: one madvise, for a walk that knows
// where the map is.
func releaseRange(b []byte) {
	if len(b) == 0 {
		return
	}
	_, _, _ = syscall.Syscall(syscall.SYS_MADVISE, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), syscall.MADV_DONTNEED)
}
