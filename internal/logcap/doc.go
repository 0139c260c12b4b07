// Package logcap caps the log lines of one kind that one operation may
// write: a change of 100,000 peers that fails the same way for each must
// log a few lines and a count, not 100,000 lines.
package logcap
