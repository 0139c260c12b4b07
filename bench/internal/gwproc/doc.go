// Package gwproc runs a gateway under test as its own process and reads
// what it costs from procfs (proc(5)): CPU time from /proc/<pid>/stat
// (utime + stime, in clock ticks, counting threads that have exited) and
// context switches from /proc/<pid>/task/<tid>/status
// (voluntary_ctxt_switches + nonvoluntary_ctxt_switches, summed over the
// live threads).
//
// Linux only (procfs, the parent-death signal): on other systems the
// package holds this documentation alone, so that `go build ./...` passes
// there (README, "Portability").
package gwproc
