package plural

import "testing"

func TestCount(t *testing.T) {
	for _, tc := range []struct {
		n    int
		want string
	}{
		{0, "0 RX queues"},
		{1, "1 RX queue"},
		{2, "2 RX queues"},
		{-1, "-1 RX queues"},
	} {
		if got := Count(tc.n, "RX queue", "RX queues"); got != tc.want {
			t.Errorf("Count(%d, \"RX queue\", \"RX queues\") = %q, want %q", tc.n, got, tc.want)
		}
	}
}
