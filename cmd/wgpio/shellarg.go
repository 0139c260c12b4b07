//go:build linux

package main

import "strings"

// shellQuote is s as one word of a POSIX shell command line, for the
// commands wgpio's messages suggest (a file name with a space or a quote
// in it, pasted unquoted, named two files): s itself when it holds only
// characters no shell treats specially, else s in single quotes, each
// single quote of s ending the quoted part, escaped by a backslash, and
// opening the next.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789@%+=:,./_-") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
