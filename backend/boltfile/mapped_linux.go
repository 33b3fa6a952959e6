package boltfile

import (
	"syscall"
	"unsafe"
)

// releaseRange tells the kernel that the pages of bbolt's map that b (a
// slice of it) covers need not stay in the process's resident set: they
// stay in the page cache and are read back from there on the next access
// (madvise MADV_DONTNEED on a shared file mapping drops the process's page
// table entries, never the file's data). bbolt maps the whole file, so a
// read that walks a file larger than memory would otherwise grow the
// resident set to the size of the file. It is safe at any time: bbolt
// does not write through its map.
func releaseRange(b []byte) {
	if len(b) == 0 {
		return
	}
	_, _, _ = syscall.Syscall(syscall.SYS_MADVISE, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), syscall.MADV_DONTNEED)
}
