// Package plural formats counts with their noun in messages meant for
// people (errors, logs, command output): "1 RX queue", "2 RX queues".
package plural

import "strconv"

// Count is n followed by one when n is 1, else by many: Count(1, "queue",
// "queues") is "1 queue", Count(0, "entry", "entries") "0 entries"
// (English takes the plural for every count but one, zero and negative
// counts included).
func Count(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}
