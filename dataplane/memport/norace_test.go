//go:build !race

package memport_test

const raceEnabled = false
