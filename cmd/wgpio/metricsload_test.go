//go:build linux

package main

import (
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"
)

// TestMetricsScrapesBounded: at most metricsMaxScrapes scrapes of
// /metrics are gathered at once; another meanwhile is answered 503 at
// once, without gathering, and the others complete. Before, every
// concurrent scrape gathered and formatted every series: 200 at once at
// 20,000 peers (MetricsPeers = 100000) took the gateway from 220 MB to
// 3 GB, from an endpoint that may listen on every address.
func TestMetricsScrapesBounded(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	entered := make(chan struct{}, 2*metricsMaxScrapes)
	release := make(chan struct{})
	stats := func() GatewayStats {
		entered <- struct{}{}
		<-release
		return GatewayStats{}
	}
	if err := serveMetrics(slog.New(slog.DiscardHandler), ln, "wg0", stats, nil, 0, newReloadState(time.Now())); err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String() + "/metrics"
	client := &http.Client{Timeout: time.Minute}
	get := func() (int, error) {
		resp, err := client.Get(url)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, nil
	}

	var wg sync.WaitGroup
	codes := make([]int, metricsMaxScrapes)
	for i := range metricsMaxScrapes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes[i], _ = get()
		}()
	}
	for range metricsMaxScrapes {
		<-entered
	}
	extra := make(chan int, 1)
	go func() {
		code, err := get()
		if err != nil {
			t.Errorf("the scrape past the limit: %v", err)
		}
		extra <- code
	}()
	select {
	case code := <-extra:
		if code != http.StatusServiceUnavailable {
			t.Errorf("the scrape past %d at once: status %d, want 503", metricsMaxScrapes, code)
		}
	case <-entered:
		t.Errorf("a scrape past %d at once was gathered too", metricsMaxScrapes)
		close(release)
		<-extra
		wg.Wait()
		return
	}
	close(release)
	wg.Wait()
	for i, c := range codes {
		if c != http.StatusOK {
			t.Errorf("scrape %d within the limit: status %d, want 200", i, c)
		}
	}
}
