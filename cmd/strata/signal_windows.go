package main

import (
	"strconv"
	"syscall"
)

// signalName names the signals Windows delivers to a console program (an
// interrupt, a termination), others by number.
func signalName(sig syscall.Signal) string {
	switch sig {
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGTERM:
		return "SIGTERM"
	}
	return "signal " + strconv.Itoa(int(sig))
}
