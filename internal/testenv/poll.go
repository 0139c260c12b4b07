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

// ReturnsWithin runs f on a goroutine of its own and waits up to timeout
// for it: returned is false when f still runs then (left running: the
// caller's test fails), else err is f's result.
func ReturnsWithin(timeout time.Duration, f func() error) (returned bool, err error) {
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err = <-done:
		return true, err
	case <-time.After(timeout):
		return false, nil
	}
}
