//go:build !linux

package procs

// Elsewhere the REST and gRPC front ends run without a keeper.
const keeperSupported = false

func rawSleep(int64) {}
