package browser

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"
)

// TestAwaitLifecycle: the wait ends at the main frame's event of its own
// loader (also one seen before the loader was known), at a crash, and
// with errSuperseded when the frame commits another loader's document;
// other frames and loaders are ignored.
func TestAwaitLifecycle(t *testing.T) {
	nav := func(frame, parent, loader string) event {
		p, _ := json.Marshal(map[string]any{"frame": map[string]any{"id": frame, "parentId": parent, "loaderId": loader}})
		return event{Method: "Page.frameNavigated", Params: p}
	}
	life := func(frame, loader, name string) event {
		p, _ := json.Marshal(map[string]any{"frameId": frame, "loaderId": loader, "name": name})
		return event{Method: "Page.lifecycleEvent", Params: p}
	}
	for _, tc := range []struct {
		name   string
		loader string
		events []event
		want   error // nil: done; context.DeadlineExceeded: still waiting
	}{
		{"own load", "L1", []event{life("F", "L0", "load"), life("C", "L1", "load"), life("F", "L1", "load")}, nil},
		{"child frame ignored", "L1", []event{nav("C", "F", "L9"), life("F", "L1", "DOMContentLoaded")}, context.DeadlineExceeded},
		{"superseded", "L1", []event{nav("F", "", "L2")}, errSuperseded},
		{"own commit is not superseded", "L1", []event{nav("F", "", "L1")}, context.DeadlineExceeded},
		{"history: loader from the commit", "", []event{life("F", "L3", "load"), nav("F", "", "L3")}, nil},
		{"crash", "L1", []event{{Method: "Inspector.targetCrashed"}}, errCrashed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sub := &subscriber{ch: make(chan event, len(tc.events))}
			for _, e := range tc.events {
				sub.ch <- e
			}
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			defer cancel()
			if err := awaitLifecycle(ctx, sub, "F", tc.loader, "load"); !errors.Is(err, tc.want) && err != tc.want {
				t.Errorf("awaitLifecycle = %v, want %v", err, tc.want)
			}
		})
	}
}

// TestAwaited: only the events a navigation can wait for are queued for
// it.
func TestAwaited(t *testing.T) {
	for _, tc := range []struct {
		method, params string
		want           bool
	}{
		{"Page.frameNavigated", `{}`, true},
		{"Page.navigatedWithinDocument", `{}`, true},
		{"Inspector.targetCrashed", `{}`, true},
		{"Page.lifecycleEvent", `{"name":"load"}`, true},
		{"Page.lifecycleEvent", `{"name":"DOMContentLoaded"}`, true},
		{"Page.lifecycleEvent", `{"name":"networkIdle"}`, true},
		{"Page.lifecycleEvent", `{"name":"firstPaint"}`, false},
		{"Page.lifecycleEvent", `{"name":""}`, false},
		{"Page.lifecycleEvent", `not json`, false},
		{"Page.frameAttached", `{}`, false},
		{"Page.frameStartedLoading", `{}`, false},
		{"Network.requestWillBeSent", `{}`, false},
	} {
		if got := awaited(&event{Method: tc.method, Params: json.RawMessage(tc.params)}); got != tc.want {
			t.Errorf("awaited(%s %s) = %v, want %v", tc.method, tc.params, got, tc.want)
		}
	}
}
