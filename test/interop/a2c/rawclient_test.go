package a2c

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/a2c-smcp/a2c-go/smcp"
)

// The raw clients below speak Engine.IO 4 / Socket.IO 5 straight from the
// wire format, with no Socket.IO library: the churn, memory and ordering
// tests need to own the TCP connection (to drop it without any close
// handshake), to hold a thousand idle sessions cheaply, and to decide
// exactly when a polling session upgrades. They understand only what
// those tests use: text packets of the /smcp namespace, acks, ping/pong.

// rawDeadline bounds every single network wait of the raw clients.
const rawDeadline = 20 * time.Second

// engineQuery is the query of every request of a raw client.
func engineQuery(transport, sid string) string {
	q := url.Values{"EIO": {"4"}, "transport": {transport}, smcp.QueryVersion: {smcp.ProtocolVersion}}
	if sid != "" {
		q.Set("sid", sid)
	}
	return q.Encode()
}

// eventPacket is the Socket.IO EVENT packet text of /smcp for event with
// one argument, asking for an ack when id >= 0.
func eventPacket(event string, arg any, id int) string {
	b, err := json.Marshal([]any{event, arg})
	if err != nil {
		panic(err) // only test-built values are encoded
	}
	ack := ""
	if id >= 0 {
		ack = strconv.Itoa(id)
	}
	return "42" + smcp.Namespace + "," + ack + string(b)
}

// ackArgs returns the arguments of p when it is the ack of id in /smcp.
func ackArgs(p string, id int) ([]json.RawMessage, bool) {
	prefix := "43" + smcp.Namespace + "," + strconv.Itoa(id) + "["
	if !strings.HasPrefix(p, prefix) {
		return nil, false
	}
	var args []json.RawMessage
	if json.Unmarshal([]byte(p[len(prefix)-1:]), &args) != nil {
		return nil, false
	}
	return args, true
}

// eventOf decodes an EVENT packet of /smcp into its name and first argument.
func eventOf(p string) (name string, arg json.RawMessage, ok bool) {
	prefix := "42" + smcp.Namespace + ","
	if !strings.HasPrefix(p, prefix) {
		return "", nil, false
	}
	rest := strings.TrimLeft(p[len(prefix):], "0123456789")
	var args []json.RawMessage
	if json.Unmarshal([]byte(rest), &args) != nil || len(args) == 0 || json.Unmarshal(args[0], &name) != nil {
		return "", nil, false
	}
	if len(args) > 1 {
		arg = args[1]
	}
	return name, arg, true
}

// joinedOK reports whether a server:join_office ack is (true, null).
func joinedOK(args []json.RawMessage) bool {
	return len(args) == 2 && string(args[0]) == "true" && string(args[1]) == "null"
}

// rawWS is one Socket.IO session over a WebSocket opened directly
// (transport=websocket). Writes are serialised by mu (gorilla allows one
// writer); reads belong to whoever calls read, or to the goroutine of
// serve once it runs.
type rawWS struct {
	ws    *websocket.Conn
	tcp   *net.TCPConn
	mu    sync.Mutex
	acked int
}

// dialRawWS opens a WebSocket session to addr and connects it to /smcp.
func dialRawWS(ctx context.Context, addr string) (*rawWS, error) {
	c, err := openRawWS(ctx, addr)
	if err != nil {
		return nil, err
	}
	err = c.write(nsConnectPacket)
	if err == nil {
		err = c.connected()
	}
	if err != nil {
		c.ws.Close()
		return nil, err
	}
	return c, nil
}

// nsConnectPacket asks to connect to /smcp.
const nsConnectPacket = "40" + smcp.Namespace + ","

// openRawWS opens the Engine.IO session of a WebSocket to addr (the open
// packet is read) without connecting to any namespace.
func openRawWS(ctx context.Context, addr string) (*rawWS, error) {
	c := &rawWS{}
	d := websocket.Dialer{
		HandshakeTimeout: rawDeadline,
		NetDialContext: func(ctx context.Context, network, a string) (net.Conn, error) {
			conn, err := (&net.Dialer{}).DialContext(ctx, network, a)
			if err == nil {
				c.tcp = conn.(*net.TCPConn)
			}
			return conn, err
		},
	}
	ws, resp, err := d.DialContext(ctx, "ws://"+addr+"/socket.io/?"+engineQuery("websocket", ""), nil)
	if resp != nil && resp.Body != nil {
		resp.Body.Close()
	}
	if err != nil {
		return nil, fmt.Errorf("dial: %w", err)
	}
	c.ws = ws
	if p, err := c.read(); err != nil || !strings.HasPrefix(p, "0{") {
		ws.Close()
		return nil, fmt.Errorf("engine open: %q %w", p, err)
	}
	return c, nil
}

// connected reads until the server's answer to nsConnectPacket.
func (c *rawWS) connected() error {
	for {
		p, err := c.read()
		if err != nil {
			return fmt.Errorf("namespace connect: %w", err)
		}
		if strings.HasPrefix(p, "40"+smcp.Namespace+",{") {
			return nil
		}
		if strings.HasPrefix(p, "44") {
			return fmt.Errorf("namespace connect refused: %s", p)
		}
	}
}

func (c *rawWS) write(p string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	_ = c.ws.SetWriteDeadline(time.Now().Add(rawDeadline))
	return c.ws.WriteMessage(websocket.TextMessage, []byte(p))
}

// read returns the next packet that is not a ping (pings are answered).
func (c *rawWS) read() (string, error) {
	for {
		_ = c.ws.SetReadDeadline(time.Now().Add(rawDeadline))
		_, b, err := c.ws.ReadMessage()
		if err != nil {
			return "", err
		}
		if string(b) == "2" {
			if err := c.write("3"); err != nil {
				return "", err
			}
			continue
		}
		return string(b), nil
	}
}

// emit sends event without asking for an ack.
func (c *rawWS) emit(event string, arg any) error { return c.write(eventPacket(event, arg, -1)) }

// send sends event asking for an ack and returns the ack's id.
func (c *rawWS) send(event string, arg any) (int, error) {
	c.acked++
	return c.acked, c.write(eventPacket(event, arg, c.acked))
}

// call sends event and reads until its ack, dropping other packets.
func (c *rawWS) call(event string, arg any) ([]json.RawMessage, error) {
	id, err := c.send(event, arg)
	if err != nil {
		return nil, err
	}
	return c.ack(event, id)
}

// ack reads until the ack of id, dropping other packets.
func (c *rawWS) ack(event string, id int) ([]json.RawMessage, error) {
	for {
		p, err := c.read()
		if err != nil {
			return nil, fmt.Errorf("waiting for the ack of %s: %w", event, err)
		}
		if args, ok := ackArgs(p, id); ok {
			return args, nil
		}
	}
}

// join joins office as role under name and fails unless acked (true, null).
func (c *rawWS) join(role, name, office string) error {
	args, err := c.call("server:join_office", map[string]string{"role": role, "name": name, "office_id": office})
	if err != nil {
		return err
	}
	if !joinedOK(args) {
		return fmt.Errorf("join %s %s in %s: ack %s", role, name, office, args)
	}
	return nil
}

// serve answers pings and drops every other packet until the connection
// ends; the caller runs it on a goroutine it waits for after close.
func (c *rawWS) serve() {
	for {
		_ = c.ws.SetReadDeadline(time.Time{})
		_, b, err := c.ws.ReadMessage()
		if err != nil {
			return
		}
		if string(b) == "2" && c.write("3") != nil {
			return
		}
	}
}

// vanish drops the TCP connection with no WebSocket or Engine.IO close:
// with rst, SO_LINGER 0 makes the kernel send a reset instead of a FIN.
func (c *rawWS) vanish(rst bool) {
	if rst {
		_ = c.tcp.SetLinger(0)
	}
	_ = c.tcp.Close()
}

// close ends the session politely (a WebSocket close frame, then TCP).
func (c *rawWS) close() {
	c.mu.Lock()
	_ = c.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
	c.mu.Unlock()
	_ = c.ws.Close()
}

// rawPolling is one Socket.IO session over HTTP long-polling that can
// upgrade to a WebSocket when its owner says so.
type rawPolling struct {
	addr string
	sid  string
	hc   *http.Client
}

// openPolling opens a polling session to addr and connects it to /smcp;
// packets that arrive before the namespace's CONNECT are returned.
func openPolling(ctx context.Context, addr string) (*rawPolling, []string, error) {
	c := &rawPolling{addr: addr, hc: &http.Client{Timeout: rawDeadline, Transport: &http.Transport{Proxy: nil}}}
	ps, err := c.get(ctx)
	if err != nil {
		return nil, nil, err
	}
	var open struct {
		SID string `json:"sid"`
	}
	if len(ps) == 0 || !strings.HasPrefix(ps[0], "0{") || json.Unmarshal([]byte(ps[0][1:]), &open) != nil || open.SID == "" {
		return nil, nil, fmt.Errorf("engine open: %q", ps)
	}
	c.sid = open.SID
	if err := c.post(ctx, nsConnectPacket); err != nil {
		return nil, nil, err
	}
	for {
		ps, err := c.get(ctx)
		if err != nil {
			return nil, nil, fmt.Errorf("namespace connect: %w", err)
		}
		for i, p := range ps {
			if strings.HasPrefix(p, "40"+smcp.Namespace+",{") {
				return c, ps[i+1:], nil
			}
		}
	}
}

func (c *rawPolling) url() string {
	return "http://" + c.addr + "/socket.io/?" + engineQuery("polling", c.sid)
}

// get is one long-poll; it returns the packets of the payload in order.
func (c *rawPolling) get(ctx context.Context) ([]string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.url(), nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET: HTTP %d: %s", resp.StatusCode, b)
	}
	return strings.Split(string(b), "\x1e"), nil
}

// post sends packets in one payload.
func (c *rawPolling) post(ctx context.Context, packets ...string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url(), strings.NewReader(strings.Join(packets, "\x1e")))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "text/plain;charset=UTF-8")
	resp, err := c.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("POST: HTTP %d: %s", resp.StatusCode, b)
	}
	return nil
}

// probe opens the upgrade WebSocket of the session and exchanges the
// probe ping and pong; the session still runs on polling afterwards.
func (c *rawPolling) probe(ctx context.Context) (*rawWS, error) {
	d := websocket.Dialer{HandshakeTimeout: rawDeadline}
	ws, resp, err := d.DialContext(ctx, "ws://"+c.addr+"/socket.io/?"+engineQuery("websocket", c.sid), nil)
	if resp != nil && resp.Body != nil {
		resp.Body.Close()
	}
	if err != nil {
		return nil, fmt.Errorf("upgrade dial: %w", err)
	}
	w := &rawWS{ws: ws}
	if err := w.write("2probe"); err != nil {
		ws.Close()
		return nil, err
	}
	_ = ws.SetReadDeadline(time.Now().Add(rawDeadline))
	_, b, err := ws.ReadMessage()
	if err != nil || string(b) != "3probe" {
		ws.Close()
		return nil, fmt.Errorf("probe answer %q: %v", b, err)
	}
	return w, nil
}

// serverMetrics reads the server's /metrics and sums each metric's
// samples over their labels (e.g. a2c_office_members over roles).
func serverMetrics(ctx context.Context, baseURL string) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, baseURL+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := (&http.Client{Timeout: rawDeadline, Transport: &http.Transport{Proxy: nil}}).Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("/metrics: HTTP %d", resp.StatusCode)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		name, value, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		if i := strings.IndexByte(name, '{'); i >= 0 {
			name = name[:i]
		}
		v, err := strconv.ParseFloat(strings.Fields(value)[0], 64)
		if err == nil {
			out[name] += v
		}
	}
	return out, sc.Err()
}

// rssKiB is the resident set of process pid, from /proc/PID/status.
func rssKiB(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range bytes.Lines(b) {
		if rest, ok := bytes.CutPrefix(line, []byte("VmRSS:")); ok {
			f := strings.Fields(string(rest))
			if len(f) == 0 {
				break
			}
			return strconv.ParseInt(f[0], 10, 64)
		}
	}
	return 0, errors.New("no VmRSS in /proc status")
}

// eventually polls cond every 50 ms until it holds or the deadline passes
// (then the test fails with what and cond's last complaint).
func eventually(t *testing.T, deadline time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	end := time.Now().Add(deadline)
	for {
		ok, why := cond()
		if ok {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("%s: not within %s: %s", what, deadline, why)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
