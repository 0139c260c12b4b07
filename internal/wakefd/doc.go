// Package wakefd is a file descriptor that one goroutine makes readable and
// another polls for (POLLIN) and drains: a wake-up across poll(2).
// dataplane.Waiter's doorbell and memport's WaitFDs are made of it.
//
// On Linux it is one eventfd(2), written and read 8 bytes at a time (the
// read end is the write end; eventfd.go). Elsewhere it is a non-blocking
// pipe(2), a byte a signal, drained until empty (pipe.go). The build tag
// wgpio_wakepipe puts the pipe in on Linux too, so that the fallback's
// tests, and those of dataplane and memport over it, run on Linux
// (.ci/run does).
//
// The descriptors are plain ints that the caller owns. Signal is safe from
// any goroutine; Close must not run concurrently with Signal or Drain, nor
// precede them (a closed number may be reused).
package wakefd
