package tracing

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// Options configure [New].
type Options struct {
	// Service is the service.name of the spans unless OTEL_SERVICE_NAME
	// or OTEL_RESOURCE_ATTRIBUTES says otherwise: "a2c-server",
	// "a2c-computer", "a2c-agent", "a2c-up", "aiod".
	Service string
	// Recorder, if set, keeps this process's spans in memory (for the
	// console and "a2c call --trace"), whatever the environment says.
	Recorder *Recorder
	// Hub says the process relays calls (a2c server, a2c up): one relay
	// record, three spans, for every call through it. Its batch
	// processor then defaults to larger requests than OpenTelemetry's
	// (see hubBSP); OTEL_BSP_* still override.
	Hub bool
	// Getenv reads the environment; default os.Getenv (tests set it).
	Getenv func(string) string
}

// Tracing is a process's tracing as [New] set it up from the environment
// and the options.
type Tracing struct {
	// Provider is the provider to hand to the components (server.Config,
	// computer.Options, agent.Options, aiod.Config), or nil when tracing
	// is off: nothing is exported and nothing recorded, and components
	// given no provider start no spans.
	Provider trace.TracerProvider
	// Exporting says that spans are exported over OTLP/HTTP.
	Exporting bool
	// Recorder is Options.Recorder.
	Recorder *Recorder

	sdk *sdktrace.TracerProvider
}

// ErrProtocol is returned by New when the environment asks for an OTLP
// protocol other than http/protobuf (the only one exported).
var ErrProtocol = errors.New("tracing: unsupported OTLP protocol")

// New sets up tracing from the standard OpenTelemetry environment:
//
//   - OTEL_SDK_DISABLED=true turns export off.
//   - OTEL_TRACES_EXPORTER names the exporters: "otlp" exports, "none"
//     (or nothing else we know) does not. Unset, spans are exported only
//     when OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT
//     is set: a process that was not asked exports nothing.
//   - OTEL_EXPORTER_OTLP_[TRACES_]PROTOCOL must be http/protobuf (the
//     default) when exporting; grpc and http/json are refused with
//     [ErrProtocol] rather than silently dropping spans.
//   - The exporter itself reads the rest (endpoint, headers, timeout,
//     compression, certificates), the batch processor OTEL_BSP_*, the
//     sampler OTEL_TRACES_SAMPLER[_ARG], and the resource
//     OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES.
//
// With no export and no recorder the result's Provider is nil. Shutdown
// flushes and stops what New started.
func New(ctx context.Context, o Options) (*Tracing, error) {
	getenv := o.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	export, err := wantsExport(getenv)
	if err != nil {
		return nil, err
	}
	t := &Tracing{Recorder: o.Recorder, Exporting: export}
	if !export && o.Recorder == nil {
		return t, nil
	}
	sampler, fixed := samplerFromEnv(getenv)
	opts := []sdktrace.TracerProviderOption{sdktrace.WithIDGenerator(IDGenerator()), sdktrace.WithSampler(sampler)}
	if o.Service == "" {
		o.Service = "a2c"
	}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(attribute.String("service.name", o.Service)))
	if err != nil {
		return nil, fmt.Errorf("tracing: resource: %w", err)
	}
	if fromEnv, err := resource.New(ctx, resource.WithFromEnv()); err == nil {
		if merged, err := resource.Merge(res, fromEnv); err == nil {
			res = merged
		}
	}
	opts = append(opts, sdktrace.WithResource(res))
	if o.Recorder != nil {
		opts = append(opts, sdktrace.WithSpanProcessor(o.Recorder))
	}
	var bat *batcher
	if export {
		up, err := newUploader(getenv)
		if err != nil {
			return nil, fmt.Errorf("tracing: OTLP exporter: %w", err)
		}
		def := defaultBSP
		if o.Hub {
			def = hubBSP
		}
		bat = newBatcher(up.upload, up.close, getenv, def)
		opts = append(opts, sdktrace.WithSpanProcessor(bat))
	}
	t.sdk = sdktrace.NewTracerProvider(opts...)
	t.Provider = &Provider{TracerProvider: t.sdk, sampler: sampler, relays: relaySamplingOf(sampler, fixed), res: res, rec: o.Recorder, exp: bat, service: serviceName(res)}
	return t, nil
}

// Provider is the tracer provider [New] builds: the OpenTelemetry SDK's,
// which makes every span but the hub's, and a path that takes the hub's
// [Relay] records without SDK spans (see [RecordRelay]): sampled by the
// same sampler, kept in the same Recorder, exported by the same exporter.
type Provider struct {
	*sdktrace.TracerProvider

	sampler sdktrace.Sampler
	relays  relaySampling // how the sampler decides on relay records
	res     *resource.Resource
	rec     *Recorder // nil: none
	exp     *batcher  // nil: no export
	service string    // service.name, for the Recorder's spans
}

// relayParent is what the sampler is told of a relay span's parent, the
// Agent's span: remote and sampled, as Start tells the SDK. The samplers
// samplerFromEnv makes read only that of a parent (whether it is valid,
// remote and sampled, and its trace state, empty here), never its ids,
// so one context serves every call and the relay's path allocates none.
var relayParent = trace.ContextWithRemoteSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{
	TraceID: trace.TraceID{1}, SpanID: trace.SpanID{1}, TraceFlags: trace.FlagsSampled, Remote: true,
}))

// relaySampling is how a Provider samples the hub's relay records:
// every one, none, or each by its trace id.
type relaySampling uint8

const (
	relaysAsk  relaySampling = iota // ask the sampler, with each record's trace id
	relaysAll                       // the sampler keeps every relay span
	relaysNone                      // the sampler drops every relay span
)

// relaySamplingOf is how sampler decides on relay records. When its
// decision does not depend on the trace id (fixed; see samplerFromEnv),
// it is asked once, here, rather than for every call.
func relaySamplingOf(sampler sdktrace.Sampler, fixed bool) relaySampling {
	if !fixed {
		return relaysAsk
	}
	if relayDecision(sampler, trace.TraceID{1}) == sdktrace.Drop {
		return relaysNone
	}
	return relaysAll
}

// relayDecision is sampler's decision on the relay span of trace tid.
func relayDecision(sampler sdktrace.Sampler, tid trace.TraceID) sdktrace.SamplingDecision {
	return sampler.ShouldSample(sdktrace.SamplingParameters{
		ParentContext: relayParent, TraceID: tid, Name: SpanHubRelay, Kind: trace.SpanKindServer,
	}).Decision
}

// recordRelay takes a relayed call's record (see [RecordRelay]).
func (p *Provider) recordRelay(r *Relay) {
	// This runs on the relay's own path (the hub's event loop), so it
	// does the least it can: a copy for the exporter, which derives and
	// draws the ids and encodes the spans on its goroutine. Ids are made
	// here only for a sampler that reads the trace id and for the
	// Recorder, whose spans must have the ids the export sends.
	var ids relayIDs
	switch p.relays {
	case relaysNone:
		return
	case relaysAsk:
		ids.derive(r)
		if relayDecision(p.sampler, ids.trace) == sdktrace.Drop {
			return
		}
	}
	r.boundRest()
	if p.rec != nil {
		if !ids.derived() {
			ids.derive(r)
		}
		ids.draw()
	}
	if p.exp != nil {
		p.exp.addRelay(p.res, r, &ids) // a copy, whole: see batcher.export
	}
	if p.rec != nil {
		r.bound()
		p.rec.addRelay(r, &ids, p.service)
	}
}

// serviceName is res's service.name.
func serviceName(res *resource.Resource) string {
	if res == nil {
		return ""
	}
	v, _ := res.Set().Value("service.name")
	return v.AsString()
}

// samplerFromEnv is the sampler OTEL_TRACES_SAMPLER and
// OTEL_TRACES_SAMPLER_ARG name, as the SDK reads them: always_on,
// always_off, traceidratio, and parentbased_ each of them
// (parentbased_always_on, the default, for a name it does not know); a
// ratio outside [0, 1] or not a number is 1. It is read here, not by the
// SDK, so that the hub's relay records are sampled as its spans are.
// fixed reports whether its decision on a relay span (whose parent, the
// Agent's span, is remote and sampled) is the same for every trace id:
// true but for traceidratio, for a parentbased_ sampler keeps every
// child of a sampled remote parent.
func samplerFromEnv(getenv func(string) string) (sampler sdktrace.Sampler, fixed bool) {
	ratio := func() sdktrace.Sampler {
		arg := strings.TrimSpace(getenv("OTEL_TRACES_SAMPLER_ARG"))
		if arg == "" {
			return sdktrace.TraceIDRatioBased(1)
		}
		f, err := strconv.ParseFloat(arg, 64)
		if err != nil || f < 0 || f > 1 {
			otel.Handle(fmt.Errorf("tracing: OTEL_TRACES_SAMPLER_ARG %q is not a ratio from 0 to 1: sampling every trace", arg))
			f = 1
		}
		return sdktrace.TraceIDRatioBased(f)
	}
	name := strings.ToLower(strings.TrimSpace(getenv("OTEL_TRACES_SAMPLER")))
	switch name {
	case "always_on":
		return sdktrace.AlwaysSample(), true
	case "always_off":
		return sdktrace.NeverSample(), true
	case "traceidratio":
		return ratio(), false
	case "parentbased_always_off":
		return sdktrace.ParentBased(sdktrace.NeverSample()), true
	case "parentbased_traceidratio":
		return sdktrace.ParentBased(ratio()), true
	case "", "parentbased_always_on":
	default:
		otel.Handle(fmt.Errorf("tracing: OTEL_TRACES_SAMPLER %q is not a sampler this process knows: using parentbased_always_on", name))
	}
	return sdktrace.ParentBased(sdktrace.AlwaysSample()), true
}

// Shutdown flushes the exporter (within ctx) and stops the provider. It
// is safe on a nil Tracing and when tracing is off.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if t == nil || t.sdk == nil {
		return nil
	}
	return t.sdk.Shutdown(ctx)
}

// ExitTimeout bounds the last export of [Tracing.Close].
const ExitTimeout = 5 * time.Second

// Close is Shutdown within ExitTimeout: what a process does at its end,
// so that a collector that does not answer cannot hold the exit.
func (t *Tracing) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), ExitTimeout)
	defer cancel()
	return t.Shutdown(ctx)
}

// ForceFlush exports the spans ended so far (within ctx).
func (t *Tracing) ForceFlush(ctx context.Context) error {
	if t == nil || t.sdk == nil {
		return nil
	}
	return t.sdk.ForceFlush(ctx)
}

// wantsExport applies the rules of New to the environment.
func wantsExport(getenv func(string) string) (bool, error) {
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return false, nil
	}
	export := false
	if v := strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")); v != "" {
		for _, name := range strings.Split(v, ",") {
			switch strings.TrimSpace(strings.ToLower(name)) {
			case "otlp":
				export = true
			case "none":
				return false, nil
			}
		}
	} else {
		export = getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
	}
	if !export {
		return false, nil
	}
	proto := strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"))
	if proto == "" {
		proto = strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_PROTOCOL"))
	}
	if proto != "" && proto != "http/protobuf" {
		return false, fmt.Errorf("%w %q: use http/protobuf", ErrProtocol, proto)
	}
	return true, nil
}
