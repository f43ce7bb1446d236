package tracing

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"google.golang.org/protobuf/encoding/protowire"
)

// upEnv is a getenv over m.
func upEnv(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

// upReports collects what the uploader reports through otel.Handle
// while a test runs.
type upReports struct {
	mu   sync.Mutex
	errs []string
}

func (r *upReports) all() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.errs...)
}

// upCount is how many reports contain s.
func (r *upReports) count(s string) int {
	n := 0
	for _, e := range r.all() {
		if strings.Contains(e, s) {
			n++
		}
	}
	return n
}

// upSink is the collector of the running test, if any.
var upSink atomic.Pointer[upReports]

// upCapture sends otel.Handle's reports to the returned collector until
// the test ends. OpenTelemetry's default handler delegates, once and for
// good, to the first handler set: the one set here forwards to the
// current test's collector, and logs as the default does when there is
// none. The previous handler is restored at the end.
func upCapture(t *testing.T) *upReports {
	t.Helper()
	prev := otel.GetErrorHandler()
	r := &upReports{}
	upSink.Store(r)
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		if s := upSink.Load(); s != nil {
			s.mu.Lock()
			s.errs = append(s.errs, err.Error())
			s.mu.Unlock()
			return
		}
		log.Print(err)
	}))
	t.Cleanup(func() {
		upSink.Store(nil)
		otel.SetErrorHandler(prev)
	})
	return r
}

// upNew is newUploader(env) closed at the end of the test, with the
// backoff shrunk to a millisecond and its waits recorded (and not spent)
// in *sleeps.
func upNew(t *testing.T, env map[string]string) (*uploader, *[]time.Duration) {
	t.Helper()
	u, err := newUploader(upEnv(env))
	if err != nil {
		t.Fatalf("newUploader: %v", err)
	}
	t.Cleanup(u.close)
	u.initial, u.maxInterval = time.Millisecond, 2*time.Millisecond
	var sleeps []time.Duration
	u.sleep = func(ctx context.Context, d time.Duration) error {
		sleeps = append(sleeps, d)
		return ctx.Err()
	}
	return u, &sleeps
}

// upReq is a request as a test server saw it, its body decompressed.
type upReq struct {
	method, path string
	header       http.Header
	body         []byte
	length       int64
}

// upStep is one answer of a scripted server.
type upStep struct {
	status int
	header map[string]string
	body   []byte
	hangUp bool // close the connection without an answer
	stall  bool // never answer (until the client gives up)
}

// upScript serves steps in order (the last one again once they run out)
// on 127.0.0.1 and records each request on reqs.
func upScript(t *testing.T, steps ...upStep) (*httptest.Server, chan upReq) {
	t.Helper()
	reqs := make(chan upReq, 64)
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reqs <- upRead(t, r)
		step := steps[min(int(n.Add(1))-1, len(steps)-1)]
		if step.stall {
			<-r.Context().Done()
			return
		}
		if step.hangUp {
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close()
			}
			return
		}
		for k, v := range step.header {
			w.Header().Set(k, v)
		}
		w.WriteHeader(step.status)
		w.Write(step.body)
	}))
	t.Cleanup(srv.Close)
	return srv, reqs
}

// upRead reads a request, gunzipping its body when it says gzip.
func upRead(t *testing.T, r *http.Request) upReq {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		t.Errorf("server: reading the body: %v", err)
	}
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(bytes.NewReader(body))
		if err != nil {
			t.Errorf("server: gzip: %v", err)
		} else if body, err = io.ReadAll(zr); err != nil {
			t.Errorf("server: gunzip: %v", err)
		}
	}
	return upReq{method: r.Method, path: r.URL.RequestURI(), header: r.Header.Clone(), body: body, length: r.ContentLength}
}

// upDrain is every request recorded so far.
func upDrain(reqs chan upReq) []upReq {
	var out []upReq
	for {
		select {
		case r := <-reqs:
			out = append(out, r)
		default:
			return out
		}
	}
}

// upProto encodes a message of the given string and varint fields.
func upProto(strs map[protowire.Number]string, ints map[protowire.Number]uint64) []byte {
	var b []byte
	for num, v := range ints {
		b = protowire.AppendTag(b, num, protowire.VarintType)
		b = protowire.AppendVarint(b, v)
	}
	for num, v := range strs {
		b = protowire.AppendTag(b, num, protowire.BytesType)
		b = protowire.AppendString(b, v)
	}
	return b
}

// upPartialBody is an ExportTraceServiceResponse with a partial success.
func upPartialBody(rejected uint64, msg string) []byte {
	ps := upProto(map[protowire.Number]string{2: msg}, map[protowire.Number]uint64{1: rejected})
	if msg == "" {
		ps = upProto(nil, map[protowire.Number]uint64{1: rejected})
	}
	b := protowire.AppendTag(nil, 1, protowire.BytesType)
	return protowire.AppendBytes(b, ps)
}

// upAbsent stands for a header that must not be sent.
const upAbsent = "(absent)"

var upProtoHeader = map[string]string{"Content-Type": "application/x-protobuf"}

func TestUploadEndpoint(t *testing.T) {
	const gen, sig = "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	tests := []struct {
		name string
		env  map[string]string
		want string // "" for an error
	}{
		{"default", nil, "http://localhost:4318/v1/traces"},
		{"generic no path", map[string]string{gen: "http://c:4318"}, "http://c:4318/v1/traces"},
		{"generic root", map[string]string{gen: "http://c:4318/"}, "http://c:4318/v1/traces"},
		{"generic base path", map[string]string{gen: "https://c/otlp"}, "https://c/otlp/v1/traces"},
		{"generic base path slash", map[string]string{gen: "https://c/otlp/"}, "https://c/otlp/v1/traces"},
		{"generic spaces", map[string]string{gen: "  http://c:4318  "}, "http://c:4318/v1/traces"},
		{"generic query dropped", map[string]string{gen: "http://c/b?x=1#f"}, "http://c/b/v1/traces"},
		{"signal as is", map[string]string{sig: "http://c:4318/custom/path"}, "http://c:4318/custom/path"},
		{"signal no path", map[string]string{sig: "http://c:4318"}, "http://c:4318/"},
		{"signal trailing slash kept", map[string]string{sig: "https://c/v1/traces/"}, "https://c/v1/traces/"},
		{"signal wins", map[string]string{gen: "http://g", sig: "http://s/t"}, "http://s/t"},
		{"blank signal ignored", map[string]string{gen: "http://g", sig: "  "}, "http://g/v1/traces"},
		{"scheme case", map[string]string{sig: "HTTPS://c/t"}, "https://c/t"},
		{"credentials dropped", map[string]string{sig: "https://u:p@c/t"}, "https://c/t"},
		{"no scheme", map[string]string{gen: "localhost:4318"}, ""},
		{"ip no scheme", map[string]string{gen: "127.0.0.1:4318"}, ""},
		{"other scheme", map[string]string{sig: "grpc://c:4317"}, ""},
		{"unix", map[string]string{gen: "unix:///tmp/s"}, ""},
		{"no host", map[string]string{sig: "http:///v1/traces"}, ""},
		{"malformed", map[string]string{gen: "http://[::1"}, ""},
		{"bad signal does not fall back", map[string]string{gen: "http://g", sig: "ftp://s"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u, err := newUploader(upEnv(tt.env))
			if tt.want == "" {
				if !errors.Is(err, errUploadConfig) {
					t.Fatalf("newUploader = %v, want an errUploadConfig", err)
				}
				if strings.Contains(err.Error(), "p@") {
					t.Errorf("error %q shows credentials", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("newUploader: %v", err)
			}
			defer u.close()
			if u.url != tt.want {
				t.Errorf("url = %q, want %q", u.url, tt.want)
			}
		})
	}
}

func TestUploadHeaders(t *testing.T) {
	const gen, sig = "OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS"
	tests := []struct {
		name    string
		env     map[string]string
		want    map[string]string // headers that must be sent, upAbsent for none
		reports int               // entries reported as malformed
	}{
		{"two", map[string]string{gen: "a=1,b=2"}, map[string]string{"A": "1", "B": "2"}, 0},
		{"url-decoded", map[string]string{gen: "k=v%20w%2Cx,p=a+b"}, map[string]string{"K": "v w,x", "P": "a+b"}, 0},
		{"trimmed", map[string]string{gen: " k = v , j= w "}, map[string]string{"K": "v", "J": "w"}, 0},
		{"empty value", map[string]string{gen: "k="}, map[string]string{"K": ""}, 0},
		{"value with =", map[string]string{gen: "Authorization=Basic dXNlcg=="}, map[string]string{"Authorization": "Basic dXNlcg=="}, 0},
		{"no equals", map[string]string{gen: "novalue,k=v"}, map[string]string{"K": "v", "Novalue": upAbsent}, 1},
		{"bad key", map[string]string{gen: "bad key=v,k=v"}, map[string]string{"K": "v", "Bad key": upAbsent}, 1},
		{"empty key", map[string]string{gen: "=v,k=v"}, map[string]string{"K": "v"}, 1},
		{"bad escape", map[string]string{gen: "x=%zz,k=v"}, map[string]string{"K": "v", "X": upAbsent}, 1},
		{"control char", map[string]string{gen: "x=a%0Ab,k=v"}, map[string]string{"K": "v", "X": upAbsent}, 1},
		{"signal replaces all", map[string]string{gen: "a=1,b=2", sig: "b=3"}, map[string]string{"A": upAbsent, "B": "3"}, 0},
		{"blank signal ignored", map[string]string{gen: "a=1", sig: " "}, map[string]string{"A": "1"}, 0},
		{"content type is ours", map[string]string{gen: "Content-Type=text/plain,Content-Encoding=br"},
			map[string]string{"Content-Type": upContentType, "Content-Encoding": upAbsent}, 0},
		{"user agent overridable", map[string]string{gen: "User-Agent=mine"}, map[string]string{"User-Agent": "mine"}, 0},
		{"default user agent", nil, map[string]string{"User-Agent": upUserAgent}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reports := upCapture(t)
			srv, reqs := upScript(t, upStep{status: 200})
			env := map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": srv.URL + "/v1/traces"}
			for k, v := range tt.env {
				env[k] = v
			}
			u, _ := upNew(t, env)
			if err := u.upload(context.Background(), []byte("x")); err != nil {
				t.Fatalf("upload: %v", err)
			}
			got := (<-reqs).header
			for k, want := range tt.want {
				if vs := got.Values(k); want == upAbsent && len(vs) != 0 || want != upAbsent && (len(vs) != 1 || vs[0] != want) {
					t.Errorf("header %s = %q, want %q", k, vs, want)
				}
			}
			if n := reports.count("OTEL_EXPORTER_OTLP_HEADERS"); n != tt.reports {
				t.Errorf("%d header reports, want %d: %q", n, tt.reports, reports.all())
			}
		})
	}
}

func TestUploadCompression(t *testing.T) {
	body := bytes.Repeat([]byte("span "), 10000)
	tests := []struct {
		name, gen, sig string
		gzip           bool
		reports        int
	}{
		{"default none", "", "", false, 0},
		{"none", "none", "", false, 0},
		{"gzip", "gzip", "", true, 0},
		{"gzip any case", "GZip", "", true, 0},
		{"signal wins", "gzip", "none", false, 0},
		{"signal gzip", "none", "gzip", true, 0},
		{"unknown", "zstd", "", false, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reports := upCapture(t)
			srv, reqs := upScript(t, upStep{status: 200})
			u, _ := upNew(t, map[string]string{
				"OTEL_EXPORTER_OTLP_ENDPOINT":           srv.URL,
				"OTEL_EXPORTER_OTLP_COMPRESSION":        tt.gen,
				"OTEL_EXPORTER_OTLP_TRACES_COMPRESSION": tt.sig,
			})
			if err := u.upload(context.Background(), body); err != nil {
				t.Fatalf("upload: %v", err)
			}
			r := <-reqs
			if !bytes.Equal(r.body, body) {
				t.Errorf("server read %d bytes, want the %d sent", len(r.body), len(body))
			}
			enc := r.header.Get("Content-Encoding")
			switch {
			case tt.gzip && (enc != "gzip" || r.length >= int64(len(body)) || r.length <= 0):
				t.Errorf("Content-Encoding %q, Content-Length %d: want gzip, smaller than %d", enc, r.length, len(body))
			case !tt.gzip && (enc != "" || r.length != int64(len(body))):
				t.Errorf("Content-Encoding %q, Content-Length %d: want none, %d", enc, r.length, len(body))
			}
			if n := reports.count("COMPRESSION"); n != tt.reports {
				t.Errorf("%d compression reports, want %d: %q", n, tt.reports, reports.all())
			}
		})
	}
}

// upPKI is a CA, a server certificate for 127.0.0.1 and a client
// certificate, both signed by the CA, written as PEM files in dir.
type upPKI struct {
	pool                      *x509.CertPool
	server                    tls.Certificate
	caFile, certFile, keyFile string
}

func upNewPKI(t *testing.T, dir string) *upPKI {
	t.Helper()
	key := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	write := func(name, typ string, der []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	now := time.Now()
	caKey := key()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "upload test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	leaf := func(serial int64, usage x509.ExtKeyUsage) ([]byte, *ecdsa.PrivateKey) {
		k := key()
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "upload test"},
			NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
			IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &k.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		return der, k
	}
	p := &upPKI{pool: x509.NewCertPool()}
	p.pool.AddCert(ca)
	p.caFile = write("ca.pem", "CERTIFICATE", caDER)
	srvDER, srvKey := leaf(2, x509.ExtKeyUsageServerAuth)
	p.server = tls.Certificate{Certificate: [][]byte{srvDER}, PrivateKey: srvKey}
	cliDER, cliKey := leaf(3, x509.ExtKeyUsageClientAuth)
	p.certFile = write("client.pem", "CERTIFICATE", cliDER)
	keyDER, err := x509.MarshalPKCS8PrivateKey(cliKey)
	if err != nil {
		t.Fatal(err)
	}
	p.keyFile = write("client-key.pem", "PRIVATE KEY", keyDER)
	return p
}

func TestUploadTLS(t *testing.T) {
	dir := t.TempDir()
	pki := upNewPKI(t, dir)
	other := upNewPKI(t, t.TempDir()) // a CA that did not sign the server
	const (
		ca, sigCA   = "OTEL_EXPORTER_OTLP_CERTIFICATE", "OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE"
		cert, key   = "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE", "OTEL_EXPORTER_OTLP_CLIENT_KEY"
		sCert, sKey = "OTEL_EXPORTER_OTLP_TRACES_CLIENT_CERTIFICATE", "OTEL_EXPORTER_OTLP_TRACES_CLIENT_KEY"
	)
	missing := filepath.Join(dir, "missing.pem")
	tests := []struct {
		name   string
		env    map[string]string
		mutual bool   // the server requires a client certificate
		want   string // "" for success, else a part of upload's error
		// refused: the server refuses the client (no certificate). With
		// TLS 1.3 the client may see the alert, or only a closed
		// connection, which is retried: the timeout is short.
		refused    bool
		reports    string // a report newUploader must make
		configFail bool   // newUploader must fail (http endpoint)
	}{
		{name: "CA", env: map[string]string{ca: pki.caFile}},
		{name: "no CA", env: nil, want: "certificate"},
		{name: "wrong CA", env: map[string]string{ca: other.caFile}, want: "certificate"},
		{name: "signal CA wins", env: map[string]string{ca: other.caFile, sigCA: pki.caFile}},
		{name: "unreadable CA ignored", env: map[string]string{ca: missing}, want: "certificate", reports: "CERTIFICATE"},
		{name: "unreadable signal CA keeps generic", env: map[string]string{ca: pki.caFile, sigCA: missing}, reports: "TRACES_CERTIFICATE"},
		{name: "not PEM", env: map[string]string{ca: pki.keyFile + "x"}, want: "certificate", reports: "CERTIFICATE"},
		{name: "mTLS", env: map[string]string{ca: pki.caFile, cert: pki.certFile, key: pki.keyFile}, mutual: true},
		{name: "mTLS signal pair", env: map[string]string{ca: pki.caFile, sCert: pki.certFile, sKey: pki.keyFile}, mutual: true},
		{name: "mTLS no client cert", env: map[string]string{ca: pki.caFile}, mutual: true, refused: true},
		{name: "mTLS half pair", env: map[string]string{ca: pki.caFile, cert: pki.certFile}, mutual: true, refused: true, reports: "go together"},
		{name: "mTLS unreadable key", env: map[string]string{ca: pki.caFile, cert: pki.certFile, key: missing}, mutual: true, refused: true, reports: "CLIENT_CERTIFICATE/KEY"},
		{name: "http endpoint with TLS files", env: map[string]string{ca: pki.caFile}, configFail: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reports := upCapture(t)
			var reqs atomic.Int32
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				reqs.Add(1)
				io.Copy(io.Discard, r.Body)
			}))
			srv.TLS = &tls.Config{Certificates: []tls.Certificate{pki.server}}
			if tt.mutual {
				srv.TLS.ClientAuth, srv.TLS.ClientCAs = tls.RequireAndVerifyClientCert, pki.pool
			}
			srv.Config.ErrorLog = log.New(io.Discard, "", 0) // handshake failures are expected
			srv.StartTLS()
			defer srv.Close()
			env := map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": srv.URL}
			if tt.refused {
				env["OTEL_EXPORTER_OTLP_TIMEOUT"] = "500"
			}
			if tt.configFail {
				env["OTEL_EXPORTER_OTLP_ENDPOINT"] = strings.Replace(srv.URL, "https:", "http:", 1)
			}
			for k, v := range tt.env {
				env[k] = v
			}
			if tt.configFail {
				if _, err := newUploader(upEnv(env)); !errors.Is(err, errUploadConfig) {
					t.Fatalf("newUploader = %v, want an errUploadConfig", err)
				}
				return
			}
			u, sleeps := upNew(t, env)
			if tt.reports != "" && reports.count(tt.reports) == 0 {
				t.Errorf("no report naming %s: %q", tt.reports, reports.all())
			}
			err := u.upload(context.Background(), []byte("spans"))
			switch {
			case tt.refused && (err == nil || reqs.Load() != 0):
				t.Fatalf("upload = %v, %d requests served; want an error, none served", err, reqs.Load())
			case tt.refused:
			case tt.want == "" && err != nil:
				t.Fatalf("upload: %v", err)
			case tt.want == "" && reqs.Load() != 1:
				t.Errorf("server saw %d requests, want 1", reqs.Load())
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("upload = %v, want an error about %q", err, tt.want)
			case tt.want != "" && len(*sleeps) != 0:
				t.Errorf("a TLS failure was retried (%d waits): %v", len(*sleeps), err)
			}
		})
	}
}

func TestUploadRetry(t *testing.T) {
	status := func(msg string) []byte {
		return upProto(map[protowire.Number]string{2: msg}, map[protowire.Number]uint64{1: 3})
	}
	ok := upStep{status: 200, header: upProtoHeader}
	tests := []struct {
		name     string
		steps    []upStep
		requests int
		sleeps   int           // waits between attempts
		minSleep time.Duration // the first wait is at least this
		timeout  string        // OTEL_EXPORTER_OTLP_TIMEOUT
		want     []string      // parts of the error; nil for success
	}{
		{name: "503 then success", steps: []upStep{{status: 503}, ok}, requests: 2, sleeps: 1},
		{name: "429 502 504 then success", steps: []upStep{{status: 429}, {status: 502}, {status: 504}, ok}, requests: 4, sleeps: 3},
		{name: "server hangs up then success", steps: []upStep{{hangUp: true}, ok}, requests: 2, sleeps: 1},
		{name: "Retry-After seconds", steps: []upStep{{status: 429, header: map[string]string{"Retry-After": "3"}}, ok},
			requests: 2, sleeps: 1, minSleep: 3 * time.Second},
		{name: "Retry-After date", steps: []upStep{{status: 503, header: map[string]string{"Retry-After": time.Now().Add(5 * time.Second).UTC().Format(http.TimeFormat)}}, ok},
			requests: 2, sleeps: 1, minSleep: 3 * time.Second},
		{name: "Retry-After past the deadline", steps: []upStep{{status: 503, header: map[string]string{"Retry-After": "30"}}, ok},
			requests: 1, sleeps: 0, want: []string{"503 Service Unavailable", "deadline"}},
		{name: "deadline names the last answer", steps: []upStep{{status: 503}, {stall: true}}, timeout: "300",
			requests: 2, sleeps: 1, want: []string{"deadline exceeded after 2 attempts", "503 Service Unavailable"}},
		{name: "Retry-After ignored on 400", steps: []upStep{{status: 400, header: map[string]string{"Retry-After": "1"}}, ok},
			requests: 1, want: []string{"400 Bad Request"}},
		{name: "400 with Status", steps: []upStep{{status: 400, header: upProtoHeader, body: status("span 3 has no trace id")}},
			requests: 1, want: []string{"400 Bad Request", `"span 3 has no trace id"`}},
		{name: "413", steps: []upStep{{status: 413, header: upProtoHeader, body: status("too big")}}, requests: 1, want: []string{"413", "too big"}},
		{name: "500 not retried", steps: []upStep{{status: 500}, ok}, requests: 1, want: []string{"500 Internal Server Error"}},
		{name: "404 text", steps: []upStep{{status: 404, header: map[string]string{"Content-Type": "text/plain"}, body: []byte("no route\n")}},
			requests: 1, want: []string{"404 Not Found", `"no route"`}},
		{name: "binary text not quoted", steps: []upStep{{status: 403, body: []byte{0xff, 0x00, 0x01}}}, requests: 1, want: []string{"403 Forbidden"}},
		{name: "long Status cut", steps: []upStep{{status: 400, header: upProtoHeader, body: status(strings.Repeat("é", 1000))}},
			requests: 1, want: []string{strings.Repeat("é", upMaxMessage/2) + `…"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, reqs := upScript(t, tt.steps...)
			u, sleeps := upNew(t, map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": srv.URL, "OTEL_EXPORTER_OTLP_COMPRESSION": "gzip",
				"OTEL_EXPORTER_OTLP_TIMEOUT": tt.timeout})
			body := []byte("the same bytes every time")
			err := u.upload(context.Background(), body)
			got := upDrain(reqs)
			if len(got) != tt.requests {
				t.Errorf("server saw %d requests, want %d", len(got), tt.requests)
			}
			for i, r := range got {
				if !bytes.Equal(r.body, body) || r.method != http.MethodPost || r.path != "/v1/traces" {
					t.Errorf("request %d: %s %s %q, want the original", i, r.method, r.path, r.body)
				}
			}
			if len(*sleeps) != tt.sleeps {
				t.Errorf("%d waits %v, want %d", len(*sleeps), *sleeps, tt.sleeps)
			}
			if tt.minSleep > 0 && len(*sleeps) > 0 && (*sleeps)[0] < tt.minSleep {
				t.Errorf("waited %v, want Retry-After's %v at least", (*sleeps)[0], tt.minSleep)
			}
			if tt.want == nil {
				if err != nil {
					t.Fatalf("upload: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("upload succeeded, want an error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if len(err.Error()) > 600 {
				t.Errorf("error is %d bytes long", len(err.Error()))
			}
		})
	}
}

// TestUploadBackoff runs the real waits, shrunk: the backoff grows and
// is randomized within the SDK's bounds, and a server that never recovers
// is given up at the deadline.
func TestUploadBackoff(t *testing.T) {
	srv, reqs := upScript(t, upStep{status: 503})
	u, _ := upNew(t, map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": srv.URL, "OTEL_EXPORTER_OTLP_TIMEOUT": "300"})
	var waits []time.Duration
	u.initial, u.maxInterval = 2*time.Millisecond, 8*time.Millisecond
	u.sleep = func(ctx context.Context, d time.Duration) error {
		waits = append(waits, d)
		return upSleep(ctx, d)
	}
	err := u.upload(context.Background(), []byte("x"))
	if err == nil || !strings.Contains(err.Error(), "503") {
		t.Fatalf("upload = %v, want the last 503", err)
	}
	// Every wait is followed by an attempt, but the deadline may cut the
	// last one before its request reaches the server.
	if n := len(upDrain(reqs)); n < 3 || n != len(waits)+1 && n != len(waits) {
		t.Fatalf("%d requests after %d waits, want one more request than waits (or as many), and a few", n, len(waits))
	}
	base := float64(u.initial)
	for i, w := range waits {
		if lo, hi := time.Duration(base*(1-upJitter)), time.Duration(base*(1+upJitter)); w < lo || w > hi {
			t.Errorf("wait %d = %v, want within [%v, %v]", i, w, lo, hi)
		}
		base = min(base*upMultiplier, float64(u.maxInterval))
	}

	// The elapsed bound: no retry starts past it.
	waits = nil
	u.maxElapsed = time.Millisecond
	if err := u.upload(context.Background(), []byte("x")); err == nil || !strings.Contains(err.Error(), "gave up after 1 attempts") {
		t.Errorf("upload = %v, want given up after the first attempt", err)
	}
}

func TestUploadTimeout(t *testing.T) {
	release := make(chan struct{})
	arrived := make(chan struct{}, 16)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		select { // never answers
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer srv.Close()
	defer close(release)
	tests := []struct {
		name   string
		env    map[string]string
		cancel bool // the caller cancels once the request arrived
		want   error
	}{
		{"timeout", map[string]string{"OTEL_EXPORTER_OTLP_TIMEOUT": "200"}, false, context.DeadlineExceeded},
		{"signal timeout wins", map[string]string{"OTEL_EXPORTER_OTLP_TIMEOUT": "600000", "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT": "200"}, false, context.DeadlineExceeded},
		{"bad signal timeout keeps generic", map[string]string{"OTEL_EXPORTER_OTLP_TIMEOUT": "200", "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT": "soon"}, false, context.DeadlineExceeded},
		{"caller cancels", nil, true, context.Canceled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			upCapture(t)
			env := map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": srv.URL}
			for k, v := range tt.env {
				env[k] = v
			}
			u, _ := upNew(t, env)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- u.upload(ctx, []byte("x")) }()
			if tt.cancel {
				<-arrived
				cancel()
			}
			select {
			case err := <-done:
				if !errors.Is(err, tt.want) {
					t.Fatalf("upload = %v, want %v", err, tt.want)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("upload still waiting after 10 s")
			}
		})
	}
}

func TestUploadTimeoutSetting(t *testing.T) {
	tests := []struct {
		env     map[string]string
		want    time.Duration
		reports int
	}{
		{nil, 10 * time.Second, 0},
		{map[string]string{"OTEL_EXPORTER_OTLP_TIMEOUT": "2500"}, 2500 * time.Millisecond, 0},
		{map[string]string{"OTEL_EXPORTER_OTLP_TIMEOUT": "2500", "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT": "700"}, 700 * time.Millisecond, 0},
		{map[string]string{"OTEL_EXPORTER_OTLP_TIMEOUT": "0"}, 10 * time.Second, 1},
		{map[string]string{"OTEL_EXPORTER_OTLP_TIMEOUT": "-5"}, 10 * time.Second, 1},
		{map[string]string{"OTEL_EXPORTER_OTLP_TIMEOUT": "1.5"}, 10 * time.Second, 1},
	}
	for _, tt := range tests {
		reports := upCapture(t)
		u, _ := upNew(t, tt.env)
		if u.timeout != tt.want {
			t.Errorf("%v: timeout %v, want %v", tt.env, u.timeout, tt.want)
		}
		if n := reports.count("TIMEOUT"); n != tt.reports {
			t.Errorf("%v: %d reports, want %d", tt.env, n, tt.reports)
		}
	}
}

func TestUploadPartialSuccess(t *testing.T) {
	tests := []struct {
		name   string
		header map[string]string
		body   []byte
		want   string // a part of the one report; "" for none
	}{
		{"rejected", upProtoHeader, upPartialBody(3, "spans too old"), `"spans too old" (3 spans rejected)`},
		{"rejected no message", upProtoHeader, upPartialBody(2, ""), "(2 spans rejected)"},
		{"warning", upProtoHeader, upPartialBody(0, "deprecated attribute"), `"deprecated attribute" (0 spans rejected)`},
		{"empty partial success", upProtoHeader, upPartialBody(0, ""), ""},
		{"full success", upProtoHeader, nil, ""},
		{"unknown fields skipped", upProtoHeader, append(upProto(map[protowire.Number]string{7: "x"}, nil), upPartialBody(1, "m")...), `"m" (1 spans rejected)`},
		{"content type parameters", map[string]string{"Content-Type": "application/x-protobuf; charset=binary"}, upPartialBody(1, "m"), "1 spans rejected"},
		{"not protobuf", map[string]string{"Content-Type": "text/plain"}, upPartialBody(1, "m"), ""},
		{"malformed", upProtoHeader, []byte{0x0a, 0x10, 0x01}, "not an ExportTraceServiceResponse"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reports := upCapture(t)
			srv, reqs := upScript(t, upStep{status: 200, header: tt.header, body: tt.body})
			u, sleeps := upNew(t, map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": srv.URL})
			if err := u.upload(context.Background(), []byte("x")); err != nil {
				t.Fatalf("upload = %v, want nil: a partial success is no failure", err)
			}
			if n := len(upDrain(reqs)); n != 1 || len(*sleeps) != 0 {
				t.Errorf("%d requests, %d waits: a partial success must not be retried", n, len(*sleeps))
			}
			got := reports.all()
			switch {
			case tt.want == "" && len(got) != 0:
				t.Errorf("reports %q, want none", got)
			case tt.want != "" && (len(got) != 1 || !strings.Contains(got[0], tt.want)):
				t.Errorf("reports %q, want one with %q", got, tt.want)
			}
		})
	}
}

// TestUploadLargeResponse: a server that answers without end costs a
// bounded read, success or failure.
func TestUploadLargeResponse(t *testing.T) {
	tests := []struct {
		name   string
		status int
		ct     string
		want   string // a part of the error, or of the report on success
	}{
		{"success", 200, upContentType, "answer larger than"},
		{"failure", 400, "text/plain", `400 Bad Request: "xxxxxxxx`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reports := upCapture(t)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				io.Copy(io.Discard, r.Body)
				w.Header().Set("Content-Type", tt.ct)
				w.WriteHeader(tt.status)
				chunk := bytes.Repeat([]byte("x"), 32<<10)
				for r.Context().Err() == nil {
					if _, err := w.Write(chunk); err != nil {
						return
					}
				}
			}))
			defer srv.Close()
			u, _ := upNew(t, map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": srv.URL, "OTEL_EXPORTER_OTLP_TIMEOUT": "5000"})
			err := u.upload(context.Background(), []byte("x"))
			if tt.status == 200 {
				if err != nil {
					t.Fatalf("upload: %v", err)
				}
				if reports.count(tt.want) != 1 {
					t.Errorf("reports %q, want one with %q", reports.all(), tt.want)
				}
				return
			}
			var serr *upStatusError
			if !errors.As(err, &serr) || !strings.Contains(err.Error(), tt.want) || len(serr.message) > upMaxMessage+len("…") {
				t.Fatalf("upload = %.300v, want a status error with a cut message", err)
			}
		})
	}
}

// TestUploadConnections: answers are drained so that one connection
// carries every upload, and close releases it.
func TestUploadConnections(t *testing.T) {
	var opened atomic.Int32
	closed := make(chan struct{}, 16)
	answer := bytes.Repeat([]byte("y"), upMaxResponse+upMaxDrain/2) // read, then drained
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/plain")
		w.Write(answer)
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		switch s {
		case http.StateNew:
			opened.Add(1)
		case http.StateClosed:
			closed <- struct{}{}
		}
	}
	srv.Start()
	defer srv.Close()
	upCapture(t)
	u, _ := upNew(t, map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": srv.URL})
	for i := range 3 {
		if err := u.upload(context.Background(), []byte("x")); err != nil {
			t.Fatalf("upload %d: %v", i, err)
		}
	}
	if n := opened.Load(); n != 1 {
		t.Errorf("%d connections for 3 uploads, want 1", n)
	}
	u.close()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("the connection is still open 5 s after close")
	}
	if err := u.upload(context.Background(), []byte("x")); !errors.Is(err, errUploadClosed) {
		t.Errorf("upload after close = %v, want errUploadClosed", err)
	}
}

// upLateTransport answers 400 at once and keeps the request's body, to
// read it after RoundTrip returned, as a RoundTripper may (net/http's
// writes a body on, in its own goroutine, when the answer comes first).
type upLateTransport struct{ bodies chan io.ReadCloser }

func (l *upLateTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	l.bodies <- r.Body
	return &http.Response{StatusCode: 400, Status: "400 Bad Request", Header: http.Header{}, Body: http.NoBody, Request: r}, nil
}

// TestUploadBodyNotReadAfterReturn: once upload returned, the transport
// reads nothing more of the caller's buffer, which the caller may reuse:
// a body read late gives the batch as it was sent.
func TestUploadBodyNotReadAfterReturn(t *testing.T) {
	for _, compression := range []string{"none", "gzip"} {
		u, _ := upNew(t, map[string]string{"OTEL_EXPORTER_OTLP_COMPRESSION": compression})
		late := &upLateTransport{bodies: make(chan io.ReadCloser, 1)}
		u.client.Transport = late
		want := bytes.Repeat([]byte("spans"), 1000)
		body := bytes.Clone(want)
		if err := u.upload(context.Background(), body); err == nil || !strings.Contains(err.Error(), "400") {
			t.Fatalf("upload = %v, want the 400", err)
		}
		for i := range body { // the caller reuses its buffer
			body[i] = 0
		}
		var r io.Reader = <-late.bodies
		if compression == "gzip" {
			zr, err := gzip.NewReader(r)
			if err != nil {
				t.Fatalf("gzip: %v", err)
			}
			r = zr
		}
		if got, err := io.ReadAll(r); err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s: a body read after upload returned gives %d bytes (%v), want the %d bytes sent", compression, len(got), err, len(want))
		}
	}
}

// TestUploadParity: with the same environment, OpenTelemetry's exporter
// and the uploader send to the same URL with the same method, headers
// and body.
func TestUploadParity(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string // "@" stands for the server's URL
	}{
		{"generic base", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "@/base/", "OTEL_EXPORTER_OTLP_COMPRESSION": "gzip",
			"OTEL_EXPORTER_OTLP_HEADERS": "x-api-key=abc%20def,Tenant=t1, bad entry ,x-empty="}},
		{"generic root", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "@", "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION": "none"}},
		{"signal path", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "@/ignored", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "@/custom/traces",
			"OTEL_EXPORTER_OTLP_HEADERS": "a=1,b=2", "OTEL_EXPORTER_OTLP_TRACES_HEADERS": "b=3,c=%3D"}},
		{"signal no path", map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "@", "OTEL_EXPORTER_OTLP_COMPRESSION": "none",
			"OTEL_EXPORTER_OTLP_TRACES_COMPRESSION": "gzip"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			upCapture(t)
			srv, reqs := upScript(t, upStep{status: 200, header: upProtoHeader})
			for k, v := range tt.env {
				t.Setenv(k, strings.ReplaceAll(v, "@", srv.URL))
			}

			ctx := context.Background()
			exp, err := otlptracehttp.New(ctx)
			if err != nil {
				t.Fatalf("otlptracehttp: %v", err)
			}
			tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
			_, span := tp.Tracer("parity").Start(ctx, "span")
			span.End()
			if err := tp.Shutdown(ctx); err != nil {
				t.Fatalf("shutdown: %v", err)
			}
			sdk := <-reqs

			u, err := newUploader(os.Getenv)
			if err != nil {
				t.Fatalf("newUploader: %v", err)
			}
			defer u.close()
			if err := u.upload(ctx, sdk.body); err != nil {
				t.Fatalf("upload: %v", err)
			}
			ours := <-reqs

			if ours.method != sdk.method || ours.path != sdk.path {
				t.Errorf("we sent %s %s, the SDK %s %s", ours.method, ours.path, sdk.method, sdk.path)
			}
			if !bytes.Equal(ours.body, sdk.body) {
				t.Errorf("bodies differ")
			}
			for k := range sdk.header {
				switch k {
				case "User-Agent", "Content-Length", "Transfer-Encoding":
					continue // ours names this project; both lengths are right
				}
				if got, want := ours.header.Values(k), sdk.header.Values(k); strings.Join(got, "\n") != strings.Join(want, "\n") {
					t.Errorf("header %s: we sent %q, the SDK %q", k, got, want)
				}
			}
			for k := range ours.header {
				if sdk.header.Values(k) == nil && k != "User-Agent" && k != "Content-Length" {
					t.Errorf("header %s: we sent %q, the SDK nothing", k, ours.header.Values(k))
				}
			}
			if ua := ours.header.Get("User-Agent"); ua != upUserAgent {
				t.Errorf("User-Agent %q, want %q", ua, upUserAgent)
			}
		})
	}
}

// FuzzUploadAnswer feeds a collector's answers (a body, a Retry-After, a
// headers variable) to the uploader's readers: none may panic, a quoted
// message stays within its bound, and no advice waits past a day.
func FuzzUploadAnswer(f *testing.F) {
	f.Add([]byte{0x0a, 0x05, 0x08, 0x03, 0x12, 0x01, 'x'}, "3", "a=b,c=%20d")
	f.Add([]byte("<html>bad gateway</html>"), "Wed, 02 Dec 2026 07:00:00 GMT", "=,,x")
	f.Add([]byte{0x12, 0xff, 0xff, 0xff, 0xff, 0x0f}, "-1", "k=%zz")
	f.Fuzz(func(t *testing.T, body []byte, retryAfter, headers string) {
		upPartialSuccess(body)
		for _, protobuf := range []bool{true, false} {
			if m := upMessage(body, protobuf); len(m) > upMaxMessage+len("…") {
				t.Fatalf("message of %d bytes", len(m))
			}
		}
		if d := upRetryAfter(retryAfter); d < 0 || d > 24*time.Hour {
			t.Fatalf("Retry-After %q: %v", retryAfter, d)
		}
		for k, v := range upParseHeaders("OTEL_EXPORTER_OTLP_HEADERS", headers) {
			if !upToken(k) || !upHeaderValue(v) {
				t.Fatalf("header %q: %q kept", k, v)
			}
		}
	})
}
