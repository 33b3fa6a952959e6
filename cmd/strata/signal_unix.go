//go:build unix

package main

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// signalName names sig as the system does ("SIGINT").
func signalName(sig syscall.Signal) string { return unix.SignalName(sig) }
