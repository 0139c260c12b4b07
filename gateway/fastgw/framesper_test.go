//go:build linux

package fastgw

import (
	"os"
	"strings"
	"testing"

	"github.com/wgpio/wgpio/dataplane"
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
