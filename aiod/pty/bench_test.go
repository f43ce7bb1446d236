package pty

import (
	"bytes"
	"slices"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// BenchmarkWSEcho measures a keystroke's round trip over a loopback
// WebSocket: input "x" typed at the prompt, until the output frame
// echoing it arrives. It reports p50 and p99.
func BenchmarkWSEcho(b *testing.B) {
	h := newHarness(b, Config{}, nil)
	id := h.session(nil)
	c, _, err := h.dial("/v2/pty/sessions/" + id + "/ws")
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	if f, _ := next(b, c, 5*time.Second); f.Type != "ready" {
		b.Fatalf("%+v", f)
	}
	in := []byte(`{"type":"input","data":"x"}`)
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if i%64 == 63 { // keep the line short (no wrap): erase it
			b.StopTimer()
			_ = c.WriteMessage(websocket.TextMessage, []byte(`{"type":"input","data":"\u0015"}`))
			until(b, c, "\x1b[K", 5*time.Second) // readline has cleared the line
			b.StartTimer()
		}
		start := time.Now()
		if err := c.WriteMessage(websocket.TextMessage, in); err != nil {
			b.Fatal(err)
		}
		for {
			_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
			_, msg, err := c.ReadMessage()
			if err != nil {
				b.Fatal(err)
			}
			if bytes.Contains(msg, []byte(`"output"`)) && bytes.Contains(msg, []byte("x")) {
				break
			}
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}
