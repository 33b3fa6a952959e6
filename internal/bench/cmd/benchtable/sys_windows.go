package main

import "os"

// syncDisks does nothing: Windows has no sync(2) of every file system.
func syncDisks() {}

// maxRSS is 0: Windows reports no peak resident memory of an ended
// process through os.ProcessState.
func maxRSS(*os.ProcessState) int64 { return 0 }
