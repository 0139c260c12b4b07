package dataplane

import (
	"testing"
	"time"
)

// TestSpinnerAdapts: spins that run out shrink the budget to the floor,
// work found after a short gap grows it back toward twice that gap, never
// past the ceiling; a ceiling <= 0 never spins.
func TestSpinnerAdapts(t *testing.T) {
	us := int64(time.Microsecond)
	s := NewSpinner(50*time.Microsecond, MinSpin)
	if s.budget != 50*us {
		t.Fatalf("initial budget %d, want IdleSpin", s.budget)
	}
	// A paced sender's long gaps: every spin runs out.
	for range 10 {
		s.Miss()
	}
	if s.budget != int64(MinSpin) {
		t.Errorf("budget after 10 spins that ran out = %v, want MinSpin %v", time.Duration(s.budget), MinSpin)
	}
	// Short gaps: work found after 3 µs keeps 6 µs of spin.
	s.Hit(3 * us)
	if s.budget != 6*us {
		t.Errorf("budget after a hit at 3 µs = %v, want 6µs", time.Duration(s.budget))
	}
	// A shorter gap does not shrink it; a long one grows it to IdleSpin at most.
	s.Hit(1 * us)
	if s.budget != 6*us {
		t.Errorf("budget after a hit at 1 µs = %v, want 6µs", time.Duration(s.budget))
	}
	s.Hit(40 * us)
	if s.budget != 50*us {
		t.Errorf("budget after a hit at 40 µs = %v, want IdleSpin 50µs", time.Duration(s.budget))
	}
	// IdleSpin below minSpin: the floor is IdleSpin.
	s = NewSpinner(2*time.Microsecond, MinSpin)
	s.Miss()
	if s.budget != 2*us {
		t.Errorf("IdleSpin 2 µs: budget after a miss = %v, want 2µs", time.Duration(s.budget))
	}
	// Negative IdleSpin: never spins.
	s = NewSpinner(-1, MinSpin)
	s.Hit(10 * us)
	if s.budget != 0 {
		t.Errorf("IdleSpin < 0: budget after a hit = %v, want 0", time.Duration(s.budget))
	}
}
