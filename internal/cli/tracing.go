package cli

import (
	"context"
	"log/slog"

	"github.com/a2c-smcp/a2c-go/tracing"
)

// startTracing sets up this command's tracing from the OTEL_* environment
// (see tracing.New), keeping spans in rec when it is set; hub says the
// command runs a hub (tracing.Options.Hub). The returned
// stop flushes the exporter, within a bound, at the command's end.
func startTracing(ctx context.Context, service string, hub bool, rec *tracing.Recorder, log *slog.Logger) (*tracing.Tracing, func(), error) {
	t, err := tracing.New(ctx, tracing.Options{Service: service, Hub: hub, Recorder: rec})
	if err != nil {
		return nil, nil, usageError{err.Error()}
	}
	if t.Exporting {
		log.Info("tracing: exporting spans over OTLP/HTTP", "service", service)
	}
	stop := func() {
		if err := t.Close(); err != nil {
			log.Warn("tracing: flushing spans at exit", "err", err)
		}
	}
	return t, stop, nil
}
