package tracing

import (
	"context"
	"errors"
	"maps"
	"testing"
	"time"
)

func TestWantsExport(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		want bool
		err  bool
	}{
		{"nothing", nil, false, false},
		{"endpoint", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, true, false},
		{"traces endpoint", map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/v1/traces"}, true, false},
		{"exporter otlp", map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, true, false},
		{"exporter list", map[string]string{"OTEL_TRACES_EXPORTER": "console, OTLP"}, true, false},
		{"exporter none", map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, false, false},
		{"exporter unknown", map[string]string{"OTEL_TRACES_EXPORTER": "zipkin", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, false, false},
		{"disabled", map[string]string{"OTEL_SDK_DISABLED": "TRUE", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, false, false},
		{"not disabled", map[string]string{"OTEL_SDK_DISABLED": "false", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, true, false},
		{"http/protobuf", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"}, true, false},
		{"grpc refused", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, false, true},
		{"http/json refused", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, false, true},
		{"traces protocol wins", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
			"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf"}, true, false},
		{"grpc without export", map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := wantsExport(func(k string) string { return tc.env[k] })
			if got != tc.want || (err != nil) != tc.err || (err != nil && !errors.Is(err, ErrProtocol)) {
				t.Errorf("wantsExport = %v, %v; want %v, error %v", got, err, tc.want, tc.err)
			}
		})
	}
}

func TestNew(t *testing.T) {
	ctx := context.Background()
	none := func(string) string { return "" }
	off, err := New(ctx, Options{Getenv: none})
	if err != nil || off.Provider != nil || off.Exporting {
		t.Fatalf("no env, no recorder: %+v, %v", off, err)
	}
	if err := off.Shutdown(ctx); err != nil {
		t.Error(err)
	}
	rec := NewRecorder(0, 0)
	on, err := New(ctx, Options{Service: "a2c-test", Recorder: rec, Getenv: none})
	if err != nil || on.Provider == nil || on.Exporting {
		t.Fatalf("recorder: %+v, %v", on, err)
	}
	_, s := Start(ctx, on.Provider.Tracer("t"), HopAgent, "a", "r", SpanAgentCall)
	s.End()
	if err := on.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if spans, _ := rec.Trace(TraceID("a", "r")); len(spans) != 1 || spans[0].Service != "a2c-test" || spans[0].SpanID != SpanID(HopAgent, "a", "r").String() {
		t.Errorf("recorded = %+v", spans)
	}
	if _, err := New(ctx, Options{Getenv: func(k string) string {
		return map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}[k]
	}}); !errors.Is(err, ErrProtocol) {
		t.Errorf("grpc: %v", err)
	}
}

// TestNewBatchDefaults: a hub's batch processor defaults to hubBSP, any
// other process's to OpenTelemetry's, and OTEL_BSP_* override both.
func TestNewBatchDefaults(t *testing.T) {
	tests := []struct {
		hub             bool
		env             map[string]string
		queue, maxBatch int
	}{
		{false, nil, 2048, 512},
		{true, nil, 16384, 4096},
		{true, map[string]string{"OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "100"}, 16384, 100},
		{true, map[string]string{"OTEL_BSP_MAX_QUEUE_SIZE": "1000"}, 1000, 1000},
		{false, map[string]string{"OTEL_BSP_MAX_QUEUE_SIZE": "4096", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "1024"}, 4096, 1024},
	}
	for _, tt := range tests {
		env := map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1"}
		maps.Copy(env, tt.env)
		tr, err := New(context.Background(), Options{Hub: tt.hub, Getenv: func(k string) string { return env[k] }})
		if err != nil {
			t.Fatal(err)
		}
		b := tr.Provider.(*Provider).exp
		if b.maxQueue != tt.queue || b.maxBatch != tt.maxBatch {
			t.Errorf("hub %v, env %v: queue %d, batch %d; want %d, %d", tt.hub, tt.env, b.maxQueue, b.maxBatch, tt.queue, tt.maxBatch)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_ = tr.Shutdown(ctx)
		cancel()
	}
}
