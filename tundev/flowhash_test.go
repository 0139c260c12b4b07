package tundev

import "testing"

func TestFlowHashStable(t *testing.T) {
	a := []byte{0x45, 0, 0, 28, 0, 0, 0x40, 0, 64, 17, 0, 0, 198, 18, 0, 1, 198, 18, 0, 2, 0x30, 0x39, 0, 7, 0, 8, 0, 0}
	b := append([]byte(nil), a...)
	b[27] = 0xff // payload/checksum differ, flow the same
	if FlowHash(a) != FlowHash(b) {
		t.Error("FlowHash differs within one flow")
	}
	c := append([]byte(nil), a...)
	c[21] = 0x3a // other source port
	if FlowHash(a) == FlowHash(c) {
		t.Error("FlowHash equal for different source ports (unlikely)")
	}
}
