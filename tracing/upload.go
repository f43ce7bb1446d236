package tracing

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"path"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel"
	"google.golang.org/protobuf/encoding/protowire"
)

// uploader POSTs encoded OTLP/HTTP trace export requests to a collector,
// configured by the standard OTEL_EXPORTER_OTLP_* environment as
// OpenTelemetry's own OTLP/HTTP exporter (otlptracehttp) is, and retries
// them as the OTLP specification says. It replaces that exporter's
// transport so that a binary links neither gRPC nor the proto structs:
// the body arrives already encoded, and the answer is read with protowire.
//
// The settings (signal-specific variables win over the generic ones):
//
//   - OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: the full URL, used as given (a
//     URL with no path is sent to "/"); else OTEL_EXPORTER_OTLP_ENDPOINT
//     with "/v1/traces" appended to its path; else
//     http://localhost:4318/v1/traces. Only scheme, host, port and path
//     are used (the specification allows ignoring the rest, and the SDK
//     does). A value that is not an http or https URL with a host is an
//     error of [newUploader].
//   - OTEL_EXPORTER_OTLP_[TRACES_]HEADERS: "k=v,k2=v2", values
//     URL-decoded; the traces variable replaces the whole generic set, as
//     in the SDK. Malformed entries are skipped and reported.
//   - OTEL_EXPORTER_OTLP_[TRACES_]TIMEOUT: milliseconds (default 10 s)
//     that one call of upload may take, retries included.
//   - OTEL_EXPORTER_OTLP_[TRACES_]COMPRESSION: "gzip" or "none".
//   - OTEL_EXPORTER_OTLP_[TRACES_]CERTIFICATE: a PEM file of the CAs to
//     trust instead of the system's; OTEL_EXPORTER_OTLP_[TRACES_]CLIENT_CERTIFICATE
//     and _CLIENT_KEY: the client's certificate for mutual TLS. A file
//     that cannot be read or parsed is reported and ignored, as the SDK
//     does; TLS files with an http endpoint are an error, as in the SDK.
//
// OTEL_EXPORTER_OTLP_[TRACES_]INSECURE is not read: the specification
// makes it a gRPC setting, the endpoint's scheme says it for OTLP/HTTP.
// (The SDK reads it, and with "true" sends to an https endpoint in the
// clear.) OTEL_EXPORTER_OTLP_[TRACES_]PROTOCOL is [New]'s to check.
//
// Every problem that does not stop the uploader is reported through
// otel.Handle, OpenTelemetry's error handler, as the SDK reports its own.
//
// An uploader is safe for concurrent use. It starts no goroutine; the
// idle keep-alive connections of its HTTP transport live until [close].
type uploader struct {
	url         string      // where to POST, scheme://host[:port]/path
	header      http.Header // the custom headers, User-Agent and Content-Type
	gzip        bool        // compress bodies with gzip
	timeout     time.Duration
	client      *http.Client
	transport   *http.Transport
	closed      atomic.Bool
	initial     time.Duration // first backoff interval
	maxInterval time.Duration // the backoff interval grows to this at most
	maxElapsed  time.Duration // no retry starts this long after the first attempt
	// sleep waits d or until ctx ends (ctx's error then); tests replace it
	// to see the waits without spending them.
	sleep func(ctx context.Context, d time.Duration) error
}

// Defaults and bounds of the uploader, those of otlptracehttp v1.47.0
// unless said otherwise.
const (
	// upDefaultEndpoint is OTLP/HTTP's default collector URL for traces.
	upDefaultEndpoint = "http://localhost:4318"
	upTracesPath      = "/v1/traces"
	upDefaultTimeout  = 10 * time.Second
	// The SDK's default retry configuration (its backoff is
	// cenkalti/backoff's exponential one: randomization factor 0.5,
	// multiplier 1.5).
	upInitialInterval = 5 * time.Second
	upMaxInterval     = 30 * time.Second
	upMaxElapsed      = time.Minute
	upJitter          = 0.5
	upMultiplier      = 1.5
	// upMaxRequest is the largest body upload sends (the SDK's limit,
	// before compression).
	upMaxRequest = 64 << 20
	// upWriteBuffer is the write buffer of an HTTP/1 connection to the
	// collector: room for a batch of OpenTelemetry's default size (512
	// spans) and its headers. A larger body (a hub's batch, see hubBSP)
	// fills it once and goes the rest of the way straight to the
	// connection, a write or two more per request.
	upWriteBuffer = 128 << 10
	// upMaxResponse is the most of a response body that is read; the SDK
	// reads 4 MiB, but an answer (a partial success or a Status) needs a
	// few hundred bytes, and the rest is a misbehaving server's.
	upMaxResponse = 64 << 10
	// upMaxDrain is how much more of a response body is read and thrown
	// away so that its connection can be reused; past it the connection
	// is closed instead.
	upMaxDrain = 64 << 10
	// upMaxMessage bounds a server's message quoted in an error.
	upMaxMessage = 256
	// upUserAgent names this exporter to the collector, without the Go
	// version or the host.
	upUserAgent    = "a2c-go-otlp/1"
	upContentType  = "application/x-protobuf"
	upGzip         = "gzip"
	upEnvNamespace = "OTEL_EXPORTER_OTLP_"
	upTracesSignal = "TRACES_"
)

var (
	// errUploadConfig is wrapped by the errors of newUploader: the
	// environment asks for something the uploader cannot do.
	errUploadConfig = errors.New("tracing: OTLP exporter configuration")
	// errUploadClosed is returned by upload after close.
	errUploadClosed = errors.New("tracing: OTLP exporter closed")
)

// upStatusError is the error of a response that is not a success.
type upStatusError struct {
	url     string // the endpoint, without credentials
	status  string // the HTTP status line's code and text, "400 Bad Request"
	code    int
	message string // the server's message (google.rpc.Status.message, or text), cut
}

func (e *upStatusError) Error() string {
	if e.message == "" {
		return fmt.Sprintf("tracing: OTLP export to %s: %s", e.url, e.status)
	}
	return fmt.Sprintf("tracing: OTLP export to %s: %s: %q", e.url, e.status, e.message)
}

// upRetryable says whether an HTTP status is one that OTLP/HTTP retries;
// every other failure status must not be.
func upRetryable(code int) bool {
	switch code {
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}

// newUploader reads the OTEL_EXPORTER_OTLP_* settings through getenv
// (see [uploader]) and returns an uploader for them. Its errors wrap
// errUploadConfig: a malformed endpoint, a scheme other than http and
// https, TLS files with an http endpoint. Other problems (a malformed
// header entry, timeout or compression, an unreadable certificate file)
// are reported through otel.Handle and leave the default.
func newUploader(getenv func(string) string) (*uploader, error) {
	env := func(name string) (string, string) {
		for _, n := range []string{upEnvNamespace + upTracesSignal + name, upEnvNamespace + name} {
			if v := strings.TrimSpace(getenv(n)); v != "" {
				return n, v
			}
		}
		return "", ""
	}
	u := &uploader{
		timeout:     upDefaultTimeout,
		initial:     upInitialInterval,
		maxInterval: upMaxInterval,
		maxElapsed:  upMaxElapsed,
		sleep:       upSleep,
	}

	endpoint, err := upEndpoint(getenv)
	if err != nil {
		return nil, err
	}
	u.url = endpoint.String()

	u.header = make(http.Header)
	u.header.Set("User-Agent", upUserAgent)
	if name, v := env("HEADERS"); v != "" {
		for k, val := range upParseHeaders(name, v) {
			u.header.Set(k, val)
		}
	}
	// Ours, whatever the custom headers say: the body is what these say.
	u.header.Set("Content-Type", upContentType)
	u.header.Del("Content-Encoding")

	// A value that is not a number of milliseconds keeps the generic
	// value, then the default, as in the SDK (which applies the generic
	// variable first and lets a valid traces one override it).
	for _, name := range []string{upEnvNamespace + "TIMEOUT", upEnvNamespace + upTracesSignal + "TIMEOUT"} {
		v := strings.TrimSpace(getenv(name))
		if v == "" {
			continue
		}
		ms, err := strconv.Atoi(v)
		if err != nil || ms <= 0 {
			otel.Handle(fmt.Errorf("tracing: %s=%q is not a positive number of milliseconds: ignored", name, v))
			continue
		}
		u.timeout = time.Duration(ms) * time.Millisecond
	}

	if name, v := env("COMPRESSION"); v != "" {
		switch strings.ToLower(v) {
		case upGzip:
			u.gzip = true
		case "none":
		default:
			otel.Handle(fmt.Errorf("tracing: %s=%q: unknown compression, none used", name, v))
		}
	}

	tlsConf := upTLSConfig(getenv)
	if tlsConf != nil && endpoint.Scheme != "https" {
		return nil, fmt.Errorf("%w: TLS certificates are set but the endpoint %s is not https", errUploadConfig, endpoint.Redacted())
	}

	// net/http's default transport, copied rather than cloned: the
	// default may have been replaced or changed by another package. Its
	// connection limits and idle timeouts are the SDK's too.
	u.transport = &http.Transport{
		Proxy: http.ProxyFromEnvironment,
		DialContext: (&net.Dialer{
			Timeout:   30 * time.Second,
			KeepAlive: 30 * time.Second,
		}).DialContext,
		TLSClientConfig:       tlsConf,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          100,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: 1 * time.Second,
		// A batch's body (tens of KiB) fits in the connection's write
		// buffer with the headers, so it goes out in one write. With
		// net/http's 4 KiB buffer, the rest of a body past it was
		// copied through a 32 KiB buffer allocated for every request.
		WriteBufferSize: upWriteBuffer,
	}
	// No Timeout here: each upload's context carries the deadline.
	u.client = &http.Client{Transport: u.transport}
	return u, nil
}

// upEndpoint is the URL the environment names (see [uploader]).
func upEndpoint(getenv func(string) string) (*url.URL, error) {
	signal := upEnvNamespace + upTracesSignal + "ENDPOINT"
	generic := upEnvNamespace + "ENDPOINT"
	name, raw := signal, strings.TrimSpace(getenv(signal))
	if raw == "" {
		name, raw = generic, strings.TrimSpace(getenv(generic))
	}
	if raw == "" {
		name, raw = "", upDefaultEndpoint
	}
	parsed, err := url.Parse(raw)
	if err != nil {
		// The value is not repeated: it may hold credentials. url.Parse's
		// inner error names the part that is wrong.
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err
		}
		return nil, fmt.Errorf("%w: %s is not a URL: %w", errUploadConfig, name, err)
	}
	if parsed.Scheme != "http" && parsed.Scheme != "https" || parsed.Host == "" {
		return nil, fmt.Errorf("%w: %s=%q is not an http or https URL with a host", errUploadConfig, name, parsed.Redacted())
	}
	p := parsed.Path
	switch name {
	case signal:
		// Used as given; the specification asks for "/" when there is no
		// path at all.
		if p == "" {
			p = "/"
		}
	default:
		// The base URL of every signal: "/v1/traces" below its path, one
		// slash between them (path.Join, as the SDK, which also cleans
		// "." and ".." and doubled slashes).
		p = path.Join(p, upTracesPath)
	}
	return &url.URL{Scheme: parsed.Scheme, Host: parsed.Host, Path: p}, nil
}

// upParseHeaders reads "k=v,k2=v2" as the SDK does: a key is trimmed
// and must be an HTTP token, a value is URL-decoded (percent escapes
// only: "+" stays a plus) and trimmed; an entry without "=", with an
// invalid key or with an invalid escape is skipped and reported. We also
// skip a value that decodes to a control character (a newline would make
// every request invalid); the SDK keeps it.
func upParseHeaders(name, v string) map[string]string {
	out := make(map[string]string)
	i := 0
	for entry := range strings.SplitSeq(v, ",") {
		i++
		k, val, ok := strings.Cut(entry, "=")
		k = strings.TrimSpace(k)
		if !ok || !upToken(k) {
			// The entry is not repeated: headers often carry credentials.
			otel.Handle(fmt.Errorf("tracing: %s: entry %d is not key=value with a valid key: skipped", name, i))
			continue
		}
		dec, err := url.PathUnescape(val)
		if err != nil || !upHeaderValue(dec) {
			otel.Handle(fmt.Errorf("tracing: %s: the value of %s is not a valid URL-encoded header value: skipped", name, k))
			continue
		}
		out[k] = strings.TrimSpace(dec)
	}
	return out
}

// upToken says whether k is a non-empty HTTP token (RFC 9110), the form
// of a header name.
func upToken(k string) bool {
	if k == "" {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// upHeaderValue says whether v may be sent as a header value: no control
// characters but tab.
func upHeaderValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < ' ' && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}

// upTLSConfig is the TLS configuration the certificate variables ask
// for, or nil when they ask for none. As in the SDK, the generic file is
// read first and a traces one that loads replaces it; a file that cannot
// be read or parsed is reported and ignored (the export then fails at
// the handshake, with the TLS error).
func upTLSConfig(getenv func(string) string) *tls.Config {
	var roots *x509.CertPool
	var certs []tls.Certificate
	for _, prefix := range []string{upEnvNamespace, upEnvNamespace + upTracesSignal} {
		if file := strings.TrimSpace(getenv(prefix + "CERTIFICATE")); file != "" {
			pem, err := os.ReadFile(file)
			pool := x509.NewCertPool()
			switch {
			case err != nil:
				otel.Handle(fmt.Errorf("tracing: %sCERTIFICATE: %w: ignored", prefix, err))
			case !pool.AppendCertsFromPEM(pem):
				otel.Handle(fmt.Errorf("tracing: %sCERTIFICATE: %s holds no PEM certificate: ignored", prefix, file))
			default:
				roots = pool
			}
		}
		certFile := strings.TrimSpace(getenv(prefix + "CLIENT_CERTIFICATE"))
		keyFile := strings.TrimSpace(getenv(prefix + "CLIENT_KEY"))
		if certFile == "" && keyFile == "" {
			continue
		}
		if certFile == "" || keyFile == "" {
			otel.Handle(fmt.Errorf("tracing: %sCLIENT_CERTIFICATE and %sCLIENT_KEY go together: ignored", prefix, prefix))
			continue
		}
		cert, err := upKeyPair(certFile, keyFile)
		if err != nil {
			otel.Handle(fmt.Errorf("tracing: %sCLIENT_CERTIFICATE/KEY: %w: ignored", prefix, err))
			continue
		}
		certs = []tls.Certificate{cert}
	}
	if roots == nil && certs == nil {
		return nil
	}
	return &tls.Config{RootCAs: roots, Certificates: certs}
}

// upKeyPair loads a PEM certificate and its key.
func upKeyPair(certFile, keyFile string) (tls.Certificate, error) {
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return tls.Certificate{}, err
	}
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.X509KeyPair(certPEM, keyPEM)
}

// upGzipPool keeps gzip writers (each holds about 800 KiB of state)
// between uploads.
var upGzipPool = sync.Pool{New: func() any { return gzip.NewWriter(io.Discard) }}

// upload sends body (a binary-encoded ExportTraceServiceRequest) and
// retries as OTLP/HTTP says, until ctx ends, the uploader's timeout
// passes, or a minute has gone by since the first attempt.
//
// It returns nil when the collector accepted the request, partially
// included: a partial success (spans rejected, or a warning) is reported
// through otel.Handle, since retrying would not help. An error status
// other than 429, 502, 503 and 504 fails at once, with the server's
// message; those four and network failures are retried with a
// randomized exponential backoff, or after the server's Retry-After when
// it is longer. A retry that could not start before the deadline is not
// waited for: upload returns the last failure at once.
//
// upload does not read body after it returns, so the caller may reuse
// it. upload after close returns errUploadClosed.
func (u *uploader) upload(ctx context.Context, body []byte) error {
	if u.closed.Load() {
		return errUploadClosed
	}
	if len(body) > upMaxRequest {
		return fmt.Errorf("tracing: OTLP export: request of %d bytes exceeds the limit of %d", len(body), upMaxRequest)
	}
	// The requests read the upload's own copy of the body (the gzipped
	// bytes are one already). The transport may still be reading a
	// request's body after its response has come back (a server may
	// answer before it has read everything), so after upload has
	// returned: the caller's buffer must not be what it reads. The copy
	// also lets net/http see a body in memory (a *bytes.Reader), which it
	// writes with the headers in one write (see upWriteBuffer); a body of
	// any other type has the headers flushed first and is copied through
	// a 32 KiB buffer net/http allocates for every request.
	var data []byte
	if u.gzip {
		var err error
		if data, err = upCompress(body); err != nil {
			return fmt.Errorf("tracing: OTLP export: gzip: %w", err)
		}
	} else {
		data = bytes.Clone(body)
	}

	ctx, cancel := context.WithTimeout(ctx, u.timeout)
	defer cancel()

	// The retry loop. Invariants:
	//   - one attempt at a time; each attempt is a new request over the
	//     same bytes (data), with the same headers;
	//   - every wait (the attempt itself, the backoff) ends with ctx,
	//     which carries the uploader's timeout: upload never outlives it;
	//   - the base interval grows by upMultiplier per retry up to
	//     maxInterval, and each wait is the base randomized by ±upJitter
	//     (the SDK's backoff, so a fleet of exporters does not retry in
	//     step), or the server's Retry-After when that is longer;
	//   - a wait that would end past ctx's deadline or past maxElapsed is
	//     not started: upload gives up at once, with the last failure.
	start := time.Now()
	interval := u.initial
	var last error // the last failure that was not ctx's end, for the final error
	for attempt := 1; ; attempt++ {
		retryAfter, err := u.uploadOnce(ctx, data)
		if err == nil {
			return nil
		}
		var perm *upPermanent
		if errors.As(err, &perm) {
			return perm.err
		}
		if ctx.Err() != nil {
			// The attempt failed because ctx ended (or ended meanwhile):
			// the failure before it, if any, says more than ctx.
			if last != nil {
				err = last
			}
			return fmt.Errorf("tracing: OTLP export: %w after %d attempts; last failure: %w", context.Cause(ctx), attempt, err)
		}
		last = err

		wait := upRandomize(interval)
		interval = min(time.Duration(float64(interval)*upMultiplier), u.maxInterval)
		wait = max(wait, retryAfter)
		if u.maxElapsed > 0 && time.Since(start)+wait > u.maxElapsed {
			return fmt.Errorf("tracing: OTLP export: gave up after %d attempts in %v: %w", attempt, u.maxElapsed, err)
		}
		if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) < wait {
			return fmt.Errorf("tracing: OTLP export: gave up after %d attempts, the next (in %v) would pass the deadline: %w", attempt, wait.Round(time.Millisecond), err)
		}
		if werr := u.sleep(ctx, wait); werr != nil {
			return fmt.Errorf("tracing: OTLP export: %w after %d attempts; last failure: %w", werr, attempt, err)
		}
	}
}

// upPermanent marks a failure that retrying cannot mend.
type upPermanent struct{ err error }

func (e *upPermanent) Error() string { return e.err.Error() }
func (e *upPermanent) Unwrap() error { return e.err }

// uploadOnce makes one attempt. A nil error is a success (a partial one is
// reported here); an *upPermanent is a failure not to retry; any other
// error may be retried, after retryAfter at least if the server said so.
func (u *uploader) uploadOnce(ctx context.Context, data []byte) (retryAfter time.Duration, err error) {
	// (NewRequest sets the length and GetBody of a *bytes.Reader, and
	// sends an empty one as no body.)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.url, bytes.NewReader(data))
	if err != nil {
		return 0, &upPermanent{fmt.Errorf("tracing: OTLP export: %w", err)}
	}
	req.Header = u.header.Clone()
	if u.gzip {
		req.Header.Set("Content-Encoding", upGzip)
	}

	resp, err := u.client.Do(req)
	if err != nil {
		// A failure to connect, or a connection lost before the answer:
		// OTLP/HTTP retries these (the SDK only "temporary" ones), but a
		// certificate the client refuses or a TLS alert from the server
		// will not change by retrying. Errors of the request itself (a
		// header or URL net/http refuses) cannot happen: newUploader
		// checked both. (http.Client's errors name the URL without its
		// password.)
		if upTLSFailure(err) {
			return 0, &upPermanent{fmt.Errorf("tracing: OTLP export: %w", err)}
		}
		return 0, fmt.Errorf("tracing: OTLP export: %w", err)
	}
	// Read a bounded prefix of the answer, then drain a bounded amount
	// more so that the connection can carry the next request; a body
	// larger than that closes the connection instead. Both reads end with
	// ctx, as the response's body belongs to the request.
	msg, readErr := io.ReadAll(io.LimitReader(resp.Body, upMaxResponse+1))
	tooLarge := len(msg) > upMaxResponse
	if tooLarge {
		msg = msg[:upMaxResponse]
	}
	_, _ = io.CopyN(io.Discard, resp.Body, upMaxDrain)
	resp.Body.Close()

	protobuf := upIsProtobuf(resp.Header.Get("Content-Type"))
	if resp.StatusCode >= 200 && resp.StatusCode <= 299 {
		// Accepted: whatever goes wrong reading the answer is reported,
		// not returned (the SDK returns it, which would count the spans
		// as lost and make a retrying caller send them twice).
		switch {
		case readErr != nil:
			otel.Handle(fmt.Errorf("tracing: OTLP export: reading the answer: %w", readErr))
		case tooLarge:
			otel.Handle(fmt.Errorf("tracing: OTLP export: answer larger than %d bytes: not read", upMaxResponse))
		case protobuf:
			upPartialSuccess(msg)
		}
		return 0, nil
	}

	serr := &upStatusError{url: req.URL.Redacted(), status: resp.Status, code: resp.StatusCode, message: upMessage(msg, protobuf)}
	if !upRetryable(resp.StatusCode) {
		return 0, &upPermanent{serr}
	}
	return upRetryAfter(resp.Header.Get("Retry-After")), serr
}

// upTLSFailure says whether err is a TLS failure that a retry would
// meet again: the server's certificate is not trusted, the server sent an
// alert (crypto/tls's "remote error": it refused our certificate, or we
// sent none), or it does not speak TLS at all.
//
// With TLS 1.3 a server checks the client's certificate after the
// client's handshake is over, and may close the connection before its
// alert is read: the client then sees a broken pipe or a reset, which
// looks like any lost connection and is retried until the deadline.
func upTLSFailure(err error) bool {
	var verr *tls.CertificateVerificationError
	var alert tls.AlertError
	var rec tls.RecordHeaderError
	var op *net.OpError
	return errors.As(err, &verr) || errors.As(err, &alert) || errors.As(err, &rec) ||
		errors.As(err, &op) && op.Op == "remote error"
}

// upIsProtobuf says whether a Content-Type is OTLP's binary protobuf.
func upIsProtobuf(ct string) bool {
	mt, _, _ := strings.Cut(ct, ";")
	return strings.EqualFold(strings.TrimSpace(mt), upContentType)
}

// upPartialSuccess reports the partial_success of an
// ExportTraceServiceResponse, if it says anything, through otel.Handle.
// OTLP forbids retrying it: the server kept what it could.
func upPartialSuccess(b []byte) {
	var rejected int64
	var message string
	var set bool
	err := fields(b, func(num protowire.Number, typ protowire.Type, ps []byte, _ uint64) error {
		if num != pbResponsePartial || typ != protowire.BytesType {
			return nil
		}
		set = true
		// Several occurrences merge, the last scalar wins, as in a decoded
		// message.
		return fields(ps, func(num protowire.Number, typ protowire.Type, v []byte, x uint64) error {
			switch {
			case num == pbPartialRejected && typ == protowire.VarintType:
				rejected = int64(x)
			case num == pbPartialMessage && typ == protowire.BytesType:
				message = upCut(v)
			}
			return nil
		})
	})
	switch {
	case err != nil:
		otel.Handle(errors.New("tracing: OTLP export accepted, but its answer is not an ExportTraceServiceResponse"))
	case set && (rejected != 0 || message != ""):
		if message == "" {
			message = "no message"
		}
		otel.Handle(fmt.Errorf("tracing: OTLP partial success: %q (%d spans rejected)", message, rejected))
	}
}

// upMessage is what a failed response says: the message of the
// google.rpc.Status that OTLP asks for when the body is protobuf, else
// the body if it is text (a proxy's answer), cut to upMaxMessage bytes.
func upMessage(b []byte, protobuf bool) string {
	if protobuf {
		var message string
		err := fields(b, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
			if num == pbRPCStatusMessage && typ == protowire.BytesType {
				message = upCut(v)
			}
			return nil
		})
		if err == nil {
			return message
		}
	}
	text := upCut(bytes.TrimSpace(b))
	if !utf8.ValidString(text) {
		return "" // binary: nothing useful to quote
	}
	for _, r := range text {
		if r < ' ' && r != '\n' && r != '\r' && r != '\t' {
			return ""
		}
	}
	return text
}

// upCut is b as a string of at most upMaxMessage bytes, cut on a
// character boundary.
func upCut(b []byte) string {
	if len(b) <= upMaxMessage {
		return string(b)
	}
	n := upMaxMessage
	for n > 0 && !utf8.RuneStart(b[n]) {
		n--
	}
	return string(b[:n]) + "…"
}

// upRetryAfter reads a Retry-After header: seconds, or an HTTP date (both
// forms of RFC 9110; OTLP names seconds, the SDK reads both). Anything
// else is no advice.
func upRetryAfter(v string) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseInt(v, 10, 64); err == nil {
		// A day is past any deadline of an export; the bound keeps the
		// sums of the retry loop from overflowing.
		return time.Duration(min(max(s, 0), 86400)) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return min(max(time.Until(t), 0), 24*time.Hour)
	}
	return 0
}

// upRandomize is d randomized uniformly within ±upJitter of itself.
func upRandomize(d time.Duration) time.Duration {
	f := 1 + upJitter*(2*rand.Float64()-1)
	return time.Duration(float64(d) * f)
}

// upSleep waits d, or until ctx ends, with ctx's cause then.
func upSleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// upCompress is body gzipped.
func upCompress(body []byte) ([]byte, error) {
	var buf bytes.Buffer
	buf.Grow(len(body)/4 + 64)
	gz := upGzipPool.Get().(*gzip.Writer)
	defer upGzipPool.Put(gz)
	gz.Reset(&buf)
	if _, err := gz.Write(body); err != nil {
		return nil, err
	}
	if err := gz.Close(); err != nil {
		return nil, err
	}
	gz.Reset(io.Discard) // drop the reference to buf
	return buf.Bytes(), nil
}

// close releases the idle connections of the uploader's transport, and
// with them the transport's goroutines; the uploader starts none of its
// own. Call it after the last upload has returned: an upload after it
// fails with errUploadClosed.
func (u *uploader) close() {
	u.closed.Store(true)
	u.transport.CloseIdleConnections()
}
