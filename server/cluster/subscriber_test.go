package cluster

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/a2c-smcp/a2c-go/internal/redistest"
)

// sink records what a subscriber delivers and resumes.
type sink struct {
	mu      sync.Mutex
	got     map[string][]string
	resumed [][]string
}

func (k *sink) deliver(ch string, p []byte) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.got == nil {
		k.got = map[string][]string{}
	}
	k.got[ch] = append(k.got[ch], string(p))
}

func (k *sink) resume(chs []string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.resumed = append(k.resumed, slices.Sorted(slices.Values(chs)))
}

func (k *sink) has(ch, payload string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return slices.Contains(k.got[ch], payload)
}

func (k *sink) count(ch string) int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.got[ch])
}

// resumedAll reports whether the Resumed calls so far named every ch.
func (k *sink) resumedAll(chs ...string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, ch := range chs {
		if !slices.ContainsFunc(k.resumed, func(r []string) bool { return slices.Contains(r, ch) }) {
			return false
		}
	}
	return true
}

func (k *sink) resumes() [][]string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return slices.Clone(k.resumed)
}

// noLeaks fails the test if, once its cleanups (registered after this
// call) have run, more goroutines are left than when it started.
func noLeaks(t *testing.T) {
	base := runtime.NumGoroutine()
	t.Cleanup(func() {
		deadline := time.Now().Add(3 * time.Second)
		for runtime.NumGoroutine() > base {
			if time.Now().After(deadline) {
				buf := make([]byte, 1<<20)
				t.Fatalf("goroutines: %d, were %d\n%s", runtime.NumGoroutine(), base, buf[:runtime.Stack(buf, true)])
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
}

func startSubscriber(t *testing.T, cfg subscriberConfig, k *sink) *subscriber {
	t.Helper()
	cfg.Deliver, cfg.Resumed = k.deliver, k.resume
	if cfg.OpTimeout == 0 {
		cfg.OpTimeout = 2 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	cfg.ClientName = "a2c-test-sub"
	if subOnLoop && cfg.Poller == nil {
		cfg.Poller = newTestLoop(t)
	}
	s := newSubscriber(cfg)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func addrOf(r *redistest.Server) string { return strings.TrimPrefix(r.URL(), "redis://") }

func publish(t *testing.T, r *redistest.Server, ch, payload string) int {
	t.Helper()
	n, err := r.Do("PUBLISH", ch, payload)
	if err != nil {
		t.Fatal(err)
	}
	k, _ := strconv.Atoi(n)
	return k
}

func TestSubscriberSingle(t *testing.T) {
	r := redistest.Start(t)
	noLeaks(t)
	k := &sink{}
	s := startSubscriber(t, subscriberConfig{Addrs: []string{addrOf(r)}}, k)
	ctx := context.Background()
	office, node := "a2c:{o1}:ev", "a2c:{n1}:ch"
	if err := s.Subscribe(ctx, office, node); err != nil {
		t.Fatal(err)
	}
	if err := s.Subscribe(ctx, office); err != nil { // already: at once
		t.Fatal(err)
	}
	if s.Conns() != 1 {
		t.Fatalf("%d connections", s.Conns())
	}
	if publish(t, r, office, "e1") != 1 || publish(t, r, node, "f\x00\r\n1") != 1 {
		t.Fatal("not subscribed in Redis")
	}
	redistest.WaitFor(t, 2*time.Second, "delivery", func() bool { return k.has(office, "e1") && k.has(node, "f\x00\r\n1") })

	s.Unsubscribe(office)
	redistest.WaitFor(t, 2*time.Second, "unsubscribed in Redis", func() bool { return publish(t, r, office, "late") == 0 })
	publish(t, r, node, "f2")
	redistest.WaitFor(t, 2*time.Second, "delivery after unsubscribe", func() bool { return k.has(node, "f2") })
	if k.count(office) != 1 {
		t.Fatalf("office channel delivered after Unsubscribe: %v", k.got[office])
	}
	// The last channel gone, so is the connection; it comes back on
	// demand.
	s.Unsubscribe(node, "never-subscribed")
	redistest.WaitFor(t, 2*time.Second, "no connection", func() bool { return s.Conns() == 0 })
	if err := s.Subscribe(ctx, office); err != nil {
		t.Fatal(err)
	}
	publish(t, r, office, "e2")
	redistest.WaitFor(t, 2*time.Second, "delivery again", func() bool { return k.has(office, "e2") })
	if len(k.resumes()) != 0 {
		t.Fatalf("Resumed with no loss: %v", k.resumes())
	}
	_ = s.Close()
	if err := s.Subscribe(ctx, "x"); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Subscribe after Close: %v", err)
	}
}

// CLIENT KILL TYPE pubsub breaks the connection: the subscriber makes a
// new one, subscribes again, and names the channels to Resumed.
func TestSubscriberResumed(t *testing.T) {
	r := redistest.Start(t)
	noLeaks(t)
	k := &sink{}
	s := startSubscriber(t, subscriberConfig{Addrs: []string{addrOf(r)}}, k)
	chs := []string{"a2c:{o1}:ev", "a2c:{o2}:ev", "a2c:{n1}:ch"}
	if err := s.Subscribe(context.Background(), chs...); err != nil {
		t.Fatal(err)
	}
	if n, err := r.Do("CLIENT", "KILL", "TYPE", "pubsub"); err != nil || n != "1" {
		t.Fatalf("CLIENT KILL: %q %v", n, err)
	}
	redistest.WaitFor(t, 3*time.Second, "Resumed", func() bool { return k.resumedAll(chs...) })
	if got := k.resumes(); len(got) != 1 || len(got[0]) != 3 {
		t.Fatalf("Resumed calls: %v, want one with the 3 channels", got)
	}
	for _, ch := range chs {
		if publish(t, r, ch, "after") != 1 {
			t.Fatalf("%s not subscribed again", ch)
		}
	}
	redistest.WaitFor(t, 2*time.Second, "delivery after resume", func() bool {
		return k.has(chs[0], "after") && k.has(chs[1], "after") && k.has(chs[2], "after")
	})
}

// Subscribe while Redis is down fails within OpTimeout, and the channel
// is subscribed when Redis is back (and named to Resumed).
func TestSubscriberOutage(t *testing.T) {
	r := redistest.Start(t)
	noLeaks(t)
	k := &sink{}
	s := startSubscriber(t, subscriberConfig{Addrs: []string{addrOf(r)}, OpTimeout: 300 * time.Millisecond}, k)
	if err := s.Subscribe(context.Background(), "a"); err != nil {
		t.Fatal(err)
	}
	r.Stop()
	start := time.Now()
	err := s.Subscribe(context.Background(), "b")
	if !errors.Is(err, ErrUnavailable) || time.Since(start) > time.Second {
		t.Fatalf("Subscribe during an outage: %v after %v", err, time.Since(start))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := s.Subscribe(ctx, "c"); !errors.Is(err, ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Subscribe with a context done: %v", err)
	}
	s.Unsubscribe("c")
	r.Restart()
	redistest.WaitFor(t, 5*time.Second, "Resumed", func() bool { return k.resumedAll("a", "b") })
	if k.resumedAll("c") {
		t.Fatal("an unsubscribed channel resumed")
	}
	publish(t, r, "a", "1")
	publish(t, r, "b", "2")
	redistest.WaitFor(t, 2*time.Second, "delivery", func() bool { return k.has("a", "1") && k.has("b", "2") })
	if publish(t, r, "c", "3") != 0 {
		t.Fatal("unsubscribed channel subscribed")
	}
}

// proxy forwards TCP to a Redis, and can hold every byte (a Redis, or a
// network, that stops answering without closing).
type proxy struct {
	l      net.Listener
	to     string
	paused atomic.Bool
	mu     sync.Mutex
	conns  []net.Conn
	wg     sync.WaitGroup
}

func startProxy(t *testing.T, to string) *proxy {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{l: l, to: to}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			u, err := net.Dial("tcp", to)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, u)
			p.mu.Unlock()
			p.wg.Add(2)
			go p.pipe(c, u)
			go p.pipe(u, c)
		}
	}()
	t.Cleanup(func() {
		p.paused.Store(false)
		l.Close()
		p.mu.Lock()
		for _, c := range p.conns {
			c.Close()
		}
		p.mu.Unlock()
		p.wg.Wait()
	})
	return p
}

func (p *proxy) pipe(from, to net.Conn) {
	defer p.wg.Done()
	defer to.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := from.Read(buf)
		for n > 0 && p.paused.Load() {
			time.Sleep(5 * time.Millisecond)
		}
		if n > 0 {
			if _, err := to.Write(buf[:n]); err != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *proxy) addr() string { return p.l.Addr().String() }

// A quiet link is kept alive by PINGs; a link that stops answering is
// found broken within the silence bound, and made again once the network
// is back.
func TestSubscriberSilent(t *testing.T) {
	r := redistest.Start(t)
	noLeaks(t)
	p := startProxy(t, addrOf(r))
	k := &sink{}
	s := startSubscriber(t, subscriberConfig{Addrs: []string{p.addr()}, OpTimeout: 300 * time.Millisecond}, k)
	s.pingAfter, s.deadAfter = 100*time.Millisecond, 600*time.Millisecond
	if err := s.Subscribe(context.Background(), "a"); err != nil {
		t.Fatal(err)
	}
	// Quiet for three silence bounds: pings keep it up.
	time.Sleep(3 * s.deadAfter)
	if s.Conns() != 1 || len(k.resumes()) != 0 {
		t.Fatalf("a quiet link was dropped: %d connections, resumed %v", s.Conns(), k.resumes())
	}
	if pings := r.CommandStats()["ping"]; pings < 5 {
		t.Fatalf("%d pings in %v of silence", pings, 3*s.deadAfter)
	}

	p.paused.Store(true)
	start := time.Now()
	redistest.WaitFor(t, 3*time.Second, "broken link found", func() bool { return s.Conns() == 0 })
	if d := time.Since(start); d > s.deadAfter+200*time.Millisecond {
		t.Fatalf("broken link found after %v, bound %v", d, s.deadAfter)
	}
	p.paused.Store(false)
	redistest.WaitFor(t, 5*time.Second, "Resumed", func() bool { return k.resumedAll("a") })
	redistest.WaitFor(t, 2*time.Second, "delivery", func() bool { publish(t, r, "a", "x"); return k.has("a", "x") })
}

// Close waits for a Deliver under way: nothing of the subscriber runs
// after Close returns, and its connection is closed (on a loop: its
// descriptor is let go only after its watch ended).
func TestSubscriberCloseWaits(t *testing.T) {
	r := redistest.Start(t)
	noLeaks(t)
	in, release := make(chan struct{}), make(chan struct{})
	var after atomic.Bool
	loop := loopIfOn(t)
	s := newSubscriber(subscriberConfig{Addrs: []string{addrOf(r)}, OpTimeout: 2 * time.Second, Poller: loop,
		Deliver: func(string, []byte) {
			close(in)
			<-release
			time.Sleep(20 * time.Millisecond)
			after.Store(true)
		}})
	if err := s.Subscribe(context.Background(), "a"); err != nil {
		t.Fatal(err)
	}
	publish(t, r, "a", "1")
	<-in
	closed := make(chan struct{})
	go func() { _ = s.Close(); close(closed) }()
	select {
	case <-closed:
		t.Fatal("Close returned during a Deliver")
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	<-closed
	if !after.Load() {
		t.Fatal("Close returned before Deliver did")
	}
	if loop, ok := loop.(*testLoop); ok && loop.live() != 0 {
		t.Fatal("a watch outlived Close")
	}
	redistest.WaitFor(t, 2*time.Second, "Redis sees the link closed", func() bool {
		n, err := r.Do("PUBLISH", "a", "2")
		return err == nil && n == "0"
	})
}

// Close returns at once while the subscriber waits on a Redis that
// accepts and never answers, or on a port where nobody listens.
func TestSubscriberCloseUnreachable(t *testing.T) {
	noLeaks(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var held []net.Conn
	var mu sync.Mutex
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
		}
	}()
	defer func() {
		l.Close()
		<-done
		mu.Lock()
		for _, c := range held {
			c.Close()
		}
		mu.Unlock()
	}()
	closed, _ := net.Listen("tcp", "127.0.0.1:0")
	closedAddr := closed.Addr().String()
	closed.Close()

	for _, addr := range []string{l.Addr().String(), closedAddr} {
		k := &sink{}
		s := startSubscriber(t, subscriberConfig{Addrs: []string{addr}, OpTimeout: 10 * time.Second}, k)
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		err := s.Subscribe(ctx, "a")
		cancel()
		if !errors.Is(err, ErrUnavailable) {
			t.Fatalf("%s: Subscribe: %v", addr, err)
		}
		start := time.Now()
		_ = s.Close()
		if d := time.Since(start); d > 200*time.Millisecond {
			t.Fatalf("%s: Close took %v", addr, d)
		}
	}
}

func TestSubscriberAuth(t *testing.T) {
	r := redistest.Start(t)
	noLeaks(t)
	for _, cmd := range [][]string{
		{"ACL", "SETUSER", "sub", "on", ">pw", "~*", "&*", "+@all"},
		{"ACL", "SETUSER", "nochan", "on", ">pw", "~*", "resetchannels", "&allowed", "+@all"},
	} {
		if _, err := r.Do(cmd...); err != nil {
			t.Fatal(err)
		}
	}
	k := &sink{}
	s := startSubscriber(t, subscriberConfig{Addrs: []string{addrOf(r)}, Username: "sub", Password: "pw"}, k)
	if err := s.Subscribe(context.Background(), "a"); err != nil {
		t.Fatal(err)
	}
	publish(t, r, "a", "1")
	redistest.WaitFor(t, 2*time.Second, "delivery", func() bool { return k.has("a", "1") })
	if list, _ := r.Do("CLIENT", "LIST"); !strings.Contains(list, "name=a2c-test-sub") || !strings.Contains(list, "user=sub") {
		t.Fatalf("the subscription connection is not named, or not user sub: %s", list)
	}

	bad := startSubscriber(t, subscriberConfig{Addrs: []string{addrOf(r)}, Username: "sub", Password: "wrong", OpTimeout: 300 * time.Millisecond}, &sink{})
	if err := bad.Subscribe(context.Background(), "a"); !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "WRONGPASS") {
		t.Fatalf("wrong password: %v", err)
	}
	_ = bad.Close()

	// A channel the ACL refuses is dropped at once, with Redis's error
	// (with the other channels of its command: Redis refuses the whole
	// command); a channel allowed is subscribed on its own.
	k2 := &sink{}
	limited := startSubscriber(t, subscriberConfig{Addrs: []string{addrOf(r)}, Username: "nochan", Password: "pw"}, k2)
	start := time.Now()
	err := limited.Subscribe(context.Background(), "forbidden", "allowed")
	if !errors.Is(err, errReply) || !strings.Contains(err.Error(), "NOPERM") || time.Since(start) > time.Second {
		t.Fatalf("refused channel: %v after %v", err, time.Since(start))
	}
	if err := limited.Subscribe(context.Background(), "allowed"); err != nil {
		t.Fatal(err)
	}
	if publish(t, r, "allowed", "ok") != 1 || publish(t, r, "forbidden", "no") != 0 {
		t.Fatal("ACL-limited subscriptions")
	}
	redistest.WaitFor(t, 2*time.Second, "delivery", func() bool { return k2.has("allowed", "ok") })
}

// TestSubscriberTLS runs against a redis-server listening with TLS only,
// with a self-signed certificate made here.
func TestSubscriberTLS(t *testing.T) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("redis-server not installed")
	}
	dir := t.TempDir()
	pool := writeSelfSigned(t, dir)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	var out bytes.Buffer
	cmd := exec.Command("redis-server", "--port", "0", "--tls-port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--tls-cert-file", filepath.Join(dir, "cert.pem"), "--tls-key-file", filepath.Join(dir, "key.pem"),
		"--tls-ca-cert-file", filepath.Join(dir, "cert.pem"), "--tls-auth-clients", "no",
		"--save", "", "--appendonly", "no", "--dir", dir)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-exited })
	tlsCfg := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	pub := redis.NewClient(&redis.Options{Addr: addr, TLSConfig: tlsCfg})
	defer pub.Close()
	deadline := time.Now().Add(5 * time.Second)
	for pub.Ping(context.Background()).Err() != nil {
		select {
		case <-exited:
			if strings.Contains(strings.ToLower(out.String()), "tls") {
				t.Skipf("redis-server without TLS support: %s", bytes.TrimSpace(out.Bytes()))
			}
			t.Fatalf("redis-server exited: %s", out.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("TLS redis-server did not answer: %s", out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	k := &sink{}
	s := startSubscriber(t, subscriberConfig{Addrs: []string{addr}, TLS: tlsCfg}, k)
	// Bounds short enough to pass several times below, long enough for a
	// PONG on a machine loaded by the whole suite under -race.
	s.pingAfter, s.deadAfter = 150*time.Millisecond, 1500*time.Millisecond
	if err := s.Subscribe(context.Background(), "a"); err != nil {
		t.Fatal(err)
	}
	// Quiet past the silence bound: deadlines that fire on a TLS link do
	// not break it (a ping every pingAfter keeps it live).
	time.Sleep(2 * s.deadAfter)
	if err := pub.Publish(context.Background(), "a", "over tls").Err(); err != nil {
		t.Fatal(err)
	}
	redistest.WaitFor(t, 2*time.Second, "delivery", func() bool { return k.has("a", "over tls") })
	if len(k.resumes()) != 0 {
		t.Fatalf("TLS link dropped: %v", k.resumes())
	}
	// A client that does not trust the certificate is refused.
	// The refusal comes with the handshake, well within OpTimeout (a
	// shorter one could end a slow handshake first, with another error).
	bad := startSubscriber(t, subscriberConfig{Addrs: []string{addr}, TLS: &tls.Config{MinVersion: tls.VersionTLS12}, OpTimeout: 2 * time.Second}, &sink{})
	if err := bad.Subscribe(context.Background(), "a"); !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("untrusted certificate: %v", err)
	}
}

// writeSelfSigned writes cert.pem and key.pem (for 127.0.0.1) in dir and
// returns a pool that trusts the certificate.
func writeSelfSigned(t *testing.T, dir string) *x509.CertPool {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "a2c test redis"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	if err := os.WriteFile(filepath.Join(dir, "cert.pem"), certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "key.pem"), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(certPEM)
	return pool
}

// clusterAddrs turns StartCluster's URL list into host:port addresses.
func clusterAddrs(urls string) []string {
	var out []string
	for u := range strings.SplitSeq(urls, ",") {
		out = append(out, strings.TrimPrefix(u, "redis://"))
	}
	return out
}

func TestSubscriberCluster(t *testing.T) {
	addrs := clusterAddrs(redistest.StartCluster(t))
	noLeaks(t)
	rc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	defer rc.Close()
	k := &sink{}
	s := startSubscriber(t, subscriberConfig{Addrs: addrs[:1], Cluster: true}, k)
	var chs []string
	slots := map[int]bool{}
	for i := range 60 {
		chs = append(chs, officeChannel(fmt.Sprintf("o%d", i)))
		slots[keySlot(chs[len(chs)-1])] = true
	}
	chs = append(chs, nodeChannel("n1"), nodeChannel("n2"))
	ctx := context.Background()
	if err := s.Subscribe(ctx, chs...); err != nil {
		t.Fatal(err)
	}
	if n := s.Conns(); n < 2 || n > 3 {
		t.Fatalf("%d connections for %d channels in %d slots on 3 masters", n, len(chs), len(slots))
	}
	for _, ch := range chs {
		if n, err := rc.SPublish(ctx, ch, "m-"+ch).Result(); err != nil || n != 1 {
			t.Fatalf("SPUBLISH %s: %d receivers, %v", ch, n, err)
		}
	}
	redistest.WaitFor(t, 3*time.Second, "delivery from every shard", func() bool {
		for _, ch := range chs {
			if !k.has(ch, "m-"+ch) {
				return false
			}
		}
		return true
	})
	// Each master carries the channels of its slots, on one connection.
	var seen atomic.Int64
	err := rc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
		n, err := c.PubSubShardChannels(ctx, "*").Result()
		seen.Add(int64(len(n)))
		return err
	})
	if err != nil || seen.Load() != int64(len(chs)) {
		t.Fatalf("shard channels on the masters: %d, want %d (%v)", seen.Load(), len(chs), err)
	}
	s.Unsubscribe(chs[:30]...)
	redistest.WaitFor(t, 2*time.Second, "unsubscribed", func() bool {
		// Asked without publishing: a probe message published before the
		// unsubscribe took effect would be delivered and counted below.
		n, err := rc.PubSubShardNumSub(ctx, chs[0]).Result()
		return err == nil && n[chs[0]] == 0
	})
	if n, _ := rc.SPublish(ctx, chs[0], "late").Result(); n != 0 {
		t.Fatalf("SPUBLISH after unsubscribe reached %d subscribers", n)
	}
	rc.SPublish(ctx, chs[40], "after")
	redistest.WaitFor(t, 2*time.Second, "delivery after unsubscribe", func() bool { return k.has(chs[40], "after") })
	if k.count(chs[0]) != 1 || len(k.resumes()) != 0 {
		t.Fatalf("after unsubscribe: %d messages, resumed %v", k.count(chs[0]), k.resumes())
	}
}

// A slot that moves to another master: the old one sends sunsubscribe,
// the subscriber reads the map again, subscribes on the new owner and
// names the channel to Resumed.
func TestSubscriberSlotMigration(t *testing.T) {
	addrs := clusterAddrs(redistest.StartCluster(t))
	noLeaks(t)
	ctx := context.Background()
	rc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	defer rc.Close()
	k := &sink{}
	s := startSubscriber(t, subscriberConfig{Addrs: addrs, Cluster: true}, k)
	moving, staying := officeChannel("move-me"), ""
	slot := keySlot(moving)

	nodes := map[string]*redis.Client{} // addr -> client
	ids := map[string]string{}
	for _, a := range addrs {
		c := redis.NewClient(&redis.Options{Addr: a})
		defer c.Close()
		nodes[a] = c
		id, err := c.Do(ctx, "CLUSTER", "MYID").Text()
		if err != nil {
			t.Fatal(err)
		}
		ids[a] = id
	}
	owner := ownerOf(t, rc, moving)
	target := ""
	for _, a := range addrs {
		if a != owner {
			target = a
			break
		}
	}
	// A channel of the same master that does not move: never resumed.
	for i := 0; staying == ""; i++ {
		ch := officeChannel(fmt.Sprintf("stay%d", i))
		if o := ownerOf(t, rc, ch); o == owner && keySlot(ch) != slot {
			staying = ch
		}
	}
	if err := s.Subscribe(ctx, moving, staying); err != nil {
		t.Fatal(err)
	}
	t.Logf("moving slot %d from %s to %s", slot, owner, target)
	steps := []struct {
		at   string
		args []any
	}{
		{target, []any{"CLUSTER", "SETSLOT", slot, "IMPORTING", ids[owner]}},
		{owner, []any{"CLUSTER", "SETSLOT", slot, "MIGRATING", ids[target]}},
		{target, []any{"CLUSTER", "SETSLOT", slot, "NODE", ids[target]}},
		{owner, []any{"CLUSTER", "SETSLOT", slot, "NODE", ids[target]}},
	}
	for _, st := range steps {
		if err := nodes[st.at].Do(ctx, st.args...).Err(); err != nil {
			t.Fatalf("%v on %s: %v", st.args, st.at, err)
		}
	}
	for _, a := range addrs {
		if a != owner && a != target {
			_ = nodes[a].Do(ctx, "CLUSTER", "SETSLOT", slot, "NODE", ids[target]).Err()
		}
	}
	redistest.WaitFor(t, 5*time.Second, "Resumed after the move", func() bool { return k.resumedAll(moving) })
	if k.resumedAll(staying) {
		t.Fatalf("a channel that did not move was resumed: %v", k.resumes())
	}
	redistest.WaitFor(t, 3*time.Second, "subscribed on the new owner", func() bool {
		n, _ := nodes[target].SPublish(ctx, moving, "moved").Result()
		return n == 1
	})
	redistest.WaitFor(t, 2*time.Second, "delivery after the move", func() bool { return k.has(moving, "moved") })
	if err := nodes[owner].SPublish(ctx, staying, "stayed").Err(); err != nil {
		t.Fatal(err)
	}
	redistest.WaitFor(t, 2*time.Second, "delivery on the old owner", func() bool { return k.has(staying, "stayed") })
}

// ownerOf is the address of the master that serves key's slot.
func ownerOf(t *testing.T, rc *redis.ClusterClient, key string) string {
	t.Helper()
	c, err := rc.MasterForKey(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	return c.Options().Addr
}

// benchRedis starts a redis-server for a benchmark (redistest needs a
// *testing.T).
func benchRedis(b *testing.B) string {
	b.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		b.Skip("redis-server not installed")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd := exec.Command("redis-server", "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "",
		"--appendonly", "no", "--dir", b.TempDir(), "--client-output-buffer-limit", "pubsub 0 0 0")
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	for range 500 {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return addr
		}
		time.Sleep(10 * time.Millisecond)
	}
	b.Fatal("redis-server did not start")
	return ""
}

// benchCounter counts the messages received and wakes the publisher
// every benchWake of them (a wake per message would be most of the cost
// measured).
type benchCounter struct {
	n    atomic.Int64
	wake chan struct{}
}

const benchWake = 256

func newBenchCounter() *benchCounter { return &benchCounter{wake: make(chan struct{}, 1)} }

func (c *benchCounter) add() {
	if c.n.Add(1)%benchWake == 0 {
		select {
		case c.wake <- struct{}{}:
		default:
		}
	}
}

// benchPublish publishes n messages of a 200-byte payload on ch, in
// pipelined batches, keeping at most 4096 ahead of what was received,
// and reports the process's CPU time per message.
func benchPublish(b *testing.B, addr, ch string, n int, received *benchCounter) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	go func() { _, _ = io.Copy(io.Discard, c) }()
	// The CPU time of this process per message: the receiving client's
	// cost, plus the publishing loop's (the same in both benchmarks).
	// ns/op is mostly Redis's time on a small machine.
	cpu0 := processCPU()
	defer func() { b.ReportMetric(float64(processCPU()-cpu0)/float64(n), "cpu-ns/msg") }()
	one := appendCommand(nil, "PUBLISH", ch, strings.Repeat("p", 200))
	const batch = 64
	buf := bytes.Repeat(one, batch)
	t := time.NewTicker(time.Millisecond)
	defer t.Stop()
	for sent := 0; sent < n; {
		for int64(sent)-received.n.Load() > 4096 {
			select {
			case <-received.wake:
			case <-t.C:
			}
		}
		k := min(batch, n-sent)
		if _, err := c.Write(buf[:k*len(one)]); err != nil {
			b.Fatal(err)
		}
		sent += k
	}
	for received.n.Load() < int64(n) {
		select {
		case <-received.wake:
		case <-t.C:
		}
	}
}

// BenchmarkSubscriberReceive: one op is one message published on a real
// Redis and delivered by the subscriber.
func BenchmarkSubscriberReceive(b *testing.B) {
	addr := benchRedis(b)
	received := newBenchCounter()
	s := newSubscriber(subscriberConfig{Addrs: []string{addr}, OpTimeout: 2 * time.Second,
		Deliver: func(ch string, p []byte) { received.add() }})
	defer s.Close()
	if err := s.Subscribe(context.Background(), "a2c:{n1}:ch"); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	benchPublish(b, addr, "a2c:{n1}:ch", b.N, received)
}

// BenchmarkSubscriberReceiveGoRedis is the same through go-redis's
// PubSub.Receive.
func BenchmarkSubscriberReceiveGoRedis(b *testing.B) {
	addr := benchRedis(b)
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	ctx := context.Background()
	ps := rdb.Subscribe(ctx, "a2c:{n1}:ch")
	defer ps.Close()
	if _, err := ps.Receive(ctx); err != nil { // the confirmation
		b.Fatal(err)
	}
	received := newBenchCounter()
	go func() {
		for {
			msg, err := ps.Receive(ctx)
			if err != nil {
				return
			}
			if _, ok := msg.(*redis.Message); ok {
				received.add()
			}
		}
	}()
	b.ReportAllocs()
	b.ResetTimer()
	benchPublish(b, addr, "a2c:{n1}:ch", b.N, received)
}

// processCPU is the user and system CPU time of this process, in ns.
func processCPU() int64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Utime.Nano() + ru.Stime.Nano()
}
