//go:build linux

package fastgw

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/wgpio/wgpio/dataplane"
	"github.com/wgpio/wgpio/dataplane/afxdp"
)

// TestFramesPerQueue: the frame memory a queue takes by default, and the
// figure the documents that tell a user what RLIMIT_MEMLOCK to give say.
func TestFramesPerQueue(t *testing.T) {
	if framesPerQueue != 17408 {
		t.Errorf("framesPerQueue = %d, want 17,408 (change the documents below with it)", framesPerQueue)
	}
	const mib = 68
	if got := framesPerQueue * dataplane.DefaultFrameSize; got != mib<<20 {
		t.Errorf("%d frames of %d bytes = %d bytes, want %d MiB", framesPerQueue, dataplane.DefaultFrameSize, got, mib)
	}
	for _, f := range []string{"../../README.md", "../../dist/wgpio.service", "../../examples/gateway/README.md"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), "68 MiB per") {
			t.Errorf("%s does not say 68 MiB per queue", f)
		}
		if strings.Contains(string(b), "80 MiB per") {
			t.Errorf("%s still says 80 MiB per queue", f)
		}
	}
}

// TestMemlockInOurTerms: a start refused for RLIMIT_MEMLOCK tells a user
// of this package how to make the UMEM smaller in its Config's terms
// (Frames, Queues, the default's size), not afxdp's Config.NumFrames,
// which the gateway sets itself; the error is still afxdp.ErrMemlock and
// the errno, and an advice already given in a caller's terms is kept.
func TestMemlockInOurTerms(t *testing.T) {
	inner := &afxdp.MemlockError{Limit: "now 8192 KiB, hard limit 8192 KiB",
		Err: fmt.Errorf("eth0: register UMEM of 71303168 bytes: %w", os.NewSyscallError("setsockopt XDP_UMEM_REG", unix.ENOMEM))}
	err := fmt.Errorf("fastgw: WAN: %w", afxdp.MemlockInTermsOf(fmt.Errorf("afxdp: eth0: %w", inner), memlockSmaller))
	msg := err.Error()
	if !errors.Is(err, afxdp.ErrMemlock) || !errors.Is(err, unix.ENOMEM) {
		t.Errorf("%v is not afxdp.ErrMemlock and ENOMEM", err)
	}
	if strings.Contains(msg, "NumFrames") {
		t.Errorf("%q names afxdp's Config.NumFrames, which fastgw sets itself", msg)
	}
	for _, want := range []string{"fastgw: WAN: afxdp: eth0: ", "now 8192 KiB", "LimitMEMLOCK=infinity", "Config.Frames", "17,408 of 4 KiB a queue, 68 MiB", "Config.Queues", "register UMEM"} {
		if !strings.Contains(msg, want) {
			t.Errorf("%q lacks %q", msg, want)
		}
	}
	if framesPerQueue != 17408 || framesPerQueue*dataplane.DefaultFrameSize != 68<<20 {
		t.Errorf("memlockSmaller's figures (17,408 frames, 68 MiB a queue) are no longer framesPerQueue's")
	}
	again := afxdp.MemlockInTermsOf(err, "run fewer queues")
	if msg := again.Error(); !strings.Contains(msg, "or run fewer queues)") || strings.Contains(msg, "Config.Frames") || !strings.HasPrefix(msg, "fastgw: WAN: afxdp: eth0: ") {
		t.Errorf("a caller's own advice over fastgw's: %q", msg)
	}
	if plain := errors.New("x"); afxdp.MemlockInTermsOf(plain, memlockSmaller) != plain || afxdp.MemlockInTermsOf(nil, memlockSmaller) != nil {
		t.Errorf("an error without a MemlockError changed")
	}
}
