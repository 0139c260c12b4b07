//go:build linux

package main

import (
	"errors"
	"fmt"
	"syscall"
	"testing"

	"golang.zx2c4.com/wireguard/conn"
)

// failingBind is a conn.Bind whose Send returns err.
type failingBind struct {
	conn.Bind
	err error
}

func (b failingBind) Send([][]byte, conn.Endpoint) error { return b.err }

// TestCountingBindSend: countingBind counts each batch sent, and each
// batch whose send failed by the errno's reason, returning the wrapped
// Bind's error unchanged; a send that succeeded after UDP GSO was turned
// off (conn.ErrUDPGSODisabled without RetryErr) counts as sent.
func TestCountingBindSend(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want udpDropReason // numUDPDropReasons: sent
	}{
		{nil, numUDPDropReasons},
		{conn.ErrUDPGSODisabled{}, numUDPDropReasons},
		{conn.ErrUDPGSODisabled{RetryErr: syscall.EMSGSIZE}, udpDropTooBig},
		{fmt.Errorf("write udp: %w", syscall.ENETUNREACH), udpDropNoRoute},
		{syscall.EHOSTUNREACH, udpDropNoRoute},
		{syscall.EAFNOSUPPORT, udpDropNoRoute},
		{syscall.EPERM, udpDropRefused},
		{syscall.ENOBUFS, udpDropFull},
		{syscall.EIO, udpDropSendError},
		{errors.New("not an errno"), udpDropSendError},
	} {
		b := &countingBind{Bind: failingBind{err: tc.err}}
		bufs := make([][]byte, 3)
		if err := b.Send(bufs, nil); err != tc.err {
			t.Errorf("Send with %v = %v, want the wrapped Bind's error", tc.err, err)
		}
		want := UDPStats{TXPackets: 3}
		if tc.want != numUDPDropReasons {
			want = UDPStats{}
			want.Drops[tc.want] = 3
		}
		if got := b.Stats(); got != want {
			t.Errorf("Send with %v: Stats = %+v, want %+v", tc.err, got, want)
		}
	}
}
