//go:build linux

package chachapoly

import (
	"testing"

	"golang.org/x/sys/unix"
)

// TestMaxLen: the longest Data every implementation seals is 2^31-64
// bytes; a longer one panics before anything is touched. At 2^31-1 the
// limit let Data of 2^31-48 bytes and more through, whose seal job's
// length (the one-time key's block and the message) overflowed an int32:
// the SIMD kernels skipped the lane and Seal returned the plaintext with
// a zero tag. (The Data are views of 2 GiB of address space reserved
// without memory: check reads only their lengths.)
func TestMaxLen(t *testing.T) {
	raw := [KeySize]byte{1}
	var k Key
	k.Set(&raw)
	defer k.Zero()
	space, err := unix.Mmap(-1, 0, 1<<31-1, unix.PROT_NONE, unix.MAP_PRIVATE|unix.MAP_ANON|unix.MAP_NORESERVE)
	if err != nil {
		t.Skipf("reserve 2 GiB of address space: %v", err)
	}
	defer unix.Munmap(space)
	long := func(n int) []Packet {
		return []Packet{{Key: &k, Data: space[:n]}}
	}
	if msg := refused(func() { check(long(maxLen)) }); msg != "" {
		t.Errorf("check(Data of %d bytes) panicked: %s", maxLen, msg)
	}
	const want = "chachapoly: packet longer than 2 GiB - 64 bytes"
	for _, n := range []int{maxLen + 1, 1<<31 - 48, 1<<31 - 1} {
		if msg := refused(func() { Seal(long(n)) }); msg != want {
			t.Errorf("Seal(Data of %d bytes) panicked with %q, want %q", n, msg, want)
		}
	}
	if 64+maxLen-TagSize > 1<<31-1 {
		t.Errorf("a seal job of Data of maxLen bytes, %d, overflows an int32", 64+maxLen-TagSize)
	}
}

// refused reports what f panicked with ("" if it did not).
func refused(f func()) (msg string) {
	defer func() {
		if r := recover(); r != nil {
			msg, _ = r.(string)
			if msg == "" {
				msg = "a panic that is not a string"
			}
		}
	}()
	f()
	return ""
}
