//go:build !wgpio_framecheck

package memport_test

// frameCheck: built with wgpio_framecheck, a frame freed twice panics
// (dataplane's framecheck.go).
const frameCheck = false
