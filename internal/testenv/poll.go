package testenv

import "time"

// PollUntil polls cond every 20 ms until it holds (true) or timeout
// passes (false).
func PollUntil(timeout time.Duration, cond func() bool) bool {
	for deadline := time.Now().Add(timeout); ; time.Sleep(20 * time.Millisecond) {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}
