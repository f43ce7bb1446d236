package server

import (
	"strings"
	"testing"
	"time"

	"github.com/a2c-smcp/a2c-go/server/cluster"
	"github.com/a2c-smcp/a2c-go/smcp"
)

// TestProvisionCluster: two nodes. The Agent's join on node A waits for
// the sandbox's Computer that joins on node B (its arrival reaches A as
// a cluster event). When the Agent has left A and another Agent sits in
// the office on B, A's idle timer releases nothing (the cluster's view
// of the office has an Agent); once that one has left B too, B releases
// the office, and so would A.
// provisionedPair is two nodes of a cluster on url with provisioners
// (node B's office idle after idleB), and office o1 as an Agent's join on
// node A makes it: the join waits for the sandbox's Computer, which joins
// on node B, and then succeeds.
type provisionedPair struct {
	sa     *Server
	fa, fb *fakeProv
	urlB   string
	agent  *peer      // the Agent, on node A
	sbox   *peer      // the sandbox's Computer, on node B
	joined joinAnswer // the Agent's join answer
}

func newProvisionedPair(t *testing.T, url string, idleB time.Duration) *provisionedPair {
	t.Helper()
	p := &provisionedPair{fa: newFakeProv(), fb: newFakeProv()}
	var urlA string
	p.sa, urlA = newTestServer(t, Config{Cluster: cluster.Config{URL: url, NodeID: "na"}, Provisioner: p.fa, ProvisionWait: time.Minute, OfficeIdle: time.Hour})
	_, p.urlB = newTestServer(t, Config{Cluster: cluster.Config{URL: url, NodeID: "nb"}, Provisioner: p.fb, ProvisionWait: time.Minute, OfficeIdle: idleB})
	p.agent = connect(t, urlA, nil)
	ans := p.agent.joinAsync(smcp.RoleAgent, "a", "o1")
	recv(t, "Ensure on node A", p.fa.called)
	p.sbox = connect(t, p.urlB, echo)
	if got := p.sbox.join(smcp.RoleComputer, "sandbox", "o1"); got != "true,null" {
		t.Fatal(got)
	}
	if p.joined = recv(t, "the join's answer", ans); p.joined.ack != "true,null" {
		t.Fatal(p.joined.ack)
	}
	return p
}

func TestProvisionCluster(t *testing.T) {
	url := rvRedis(t)
	p := newProvisionedPair(t, url, 50*time.Millisecond)
	sa, fa, fb, urlB, a := p.sa, p.fa, p.fb, p.urlB, p.agent
	if got := p.joined; !strings.Contains(got.entered, `"computer":"sandbox"`) {
		t.Fatalf("join answered %q with notifications %q", got.ack, got.entered)
	}

	if r := a.call(smcp.EventLeaveOffice, smcp.LeaveOfficeReq{OfficeID: "o1"}); strings.Join(r, ",") != "true,null" {
		t.Fatal(r)
	}
	gen := idleGen(t, sa, "o1")
	b := connect(t, urlB, nil)
	if got := b.join(smcp.RoleAgent, "b", "o1"); got != "true,null" { // the sandbox is in: at once
		t.Fatal(got)
	}
	// Node A's timer runs out now (A follows the office no more: it
	// asks Redis).
	sa.prov.fire("o1", gen)
	select {
	case <-fa.released:
		t.Fatal("node A released an office whose Agent sits on node B")
	default:
	}

	b.sock.Disconnect()
	if got := recv(t, "node B's Release", fb.released); got != "o1" {
		t.Fatal(got)
	}
	// An Agent on A again, then gone: with no Agent anywhere, A's timer
	// releases the office.
	if got := a.join(smcp.RoleAgent, "a", "o1"); got != "true,null" {
		t.Fatal(got)
	}
	if r := a.call(smcp.EventLeaveOffice, smcp.LeaveOfficeReq{OfficeID: "o1"}); strings.Join(r, ",") != "true,null" {
		t.Fatal(r)
	}
	gen = idleGen(t, sa, "o1")
	sa.prov.fire("o1", gen)
	if got := recv(t, "node A's Release", fa.released); got != "o1" {
		t.Fatal(got)
	}
}
