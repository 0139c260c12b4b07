package fastgw_test

import (
	"testing"

	"github.com/wgpio/wgpio/internal/demo"
)

func TestDebugW2W(t *testing.T) {
	for _, sc := range []demo.SiteConfig{{PeerFastPath: true}, {PeerFastPath: true, Routed: true}, {PeerFastPath: true, Queues: 2, SourcePorts: 16}} {
		s := newSite(t, sc)
		out, _ := s.HostA.Run("ping", "-c", "3", "-W", "1", demo.HostB4.String())
		t.Logf("%+v: %s", sc, out)
		t.Logf("A drops %s, B drops %s", dropsString(s.Gateway), dropsString(s.PeerGateway))
		t.Logf("A stats %+v", s.Gateway.Engine().Stats()[0])
		t.Logf("B stats %+v", s.PeerGateway.Engine().Stats()[0])
		t.Logf("A dev %+v", s.Gateway.Device().Stats())
		t.Logf("B dev %+v", s.PeerGateway.Device().Stats())
	}
}
