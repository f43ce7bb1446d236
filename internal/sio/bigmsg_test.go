package sio

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestLargeMessagesIntact sends large events from several goroutines and
// clients at once, over both transports, to the echo handler, which acks
// each with its own arguments: every answer must be its request's,
// byte for byte. The large messages go through the pooled buffers, the
// event loop's own frame buffers, writev and the client's in-place
// masking, so a buffer reused too early would show here as a mixed-up
// answer.
func TestLargeMessagesIntact(t *testing.T) {
	_, url := startServer(t, Options{MaxPayload: 4 << 20}, &echoHandler{})
	for _, tr := range []Transport{WebSocketOnly, PollingFirst} {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		var wg sync.WaitGroup
		errs := make(chan error, 64)
		for c := 0; c < 3; c++ {
			s, err := Dial(ctx, url, ClientOptions{Namespace: "/smcp", Transport: tr})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Disconnect()
			for g := 0; g < 3; g++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; i < 8; i++ {
						size := []int{60 << 10, 70 << 10, 300 << 10, 1 << 20, 10}[(c+g+i)%5]
						tag := fmt.Sprintf("%d-%d-%d-", c, g, i)
						arg, _ := json.Marshal(tag + strings.Repeat(tag[:1], size))
						done := make(chan error, 1)
						s.Request("echo", Message{Args: []json.RawMessage{arg, json.RawMessage(`{"n":1}`)}}, 10*time.Second, func(m Message, err error) {
							switch {
							case err != nil:
								done <- err
							case len(m.Args) != 2 || string(m.Args[0]) != string(arg) || string(m.Args[1]) != `{"n":1}`:
								done <- fmt.Errorf("answer to %s differs (%d args)", tag, len(m.Args))
							default:
								done <- nil
							}
						})
						if err := <-done; err != nil {
							errs <- err
							return
						}
					}
				}()
			}
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("transport %d: %v", tr, err)
		}
	}
}
