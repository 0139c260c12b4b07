//go:build !wgpio_framecheck

package dataplane

// frameCheck: see framecheck.go.
const frameCheck = false
