package market

import (
	"context"
	"testing"

	"github.com/a2c-smcp/a2c-go/computer/settings"
)

// BenchmarkResolve is what each change of the files costs a running
// Computer: the settings, the mcp.json scopes, the ledger, the catalogs
// and every enabled plugin's manifests read and resolved (three plugins
// installed, two enabled). BenchmarkFingerprint is what the Projector's
// look at the files costs every WatchInterval when nothing changed.
func BenchmarkResolve(b *testing.B) {
	m := benchManager(b)
	b.ResetTimer()
	for b.Loop() {
		if _, err := m.Resolve(ResolveOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkFingerprint(b *testing.B) {
	p := &Projector{M: benchManager(b)}
	b.ResetTimer()
	for b.Loop() {
		_ = p.fingerprint()
	}
}

func benchManager(b *testing.B) *Manager {
	b.Helper()
	m := testManager(b)
	if _, err := m.Add(context.Background(), AddOptions{URL: wideFixture(b), Name: "acme", Trust: true}); err != nil {
		b.Fatal(err)
	}
	for _, id := range []string{"audit@acme", "lone@acme", "twin@acme"} {
		if _, err := m.Install(context.Background(), InstallOptions{ID: id}); err != nil {
			b.Fatal(err)
		}
	}
	for _, id := range []string{"audit@acme", "lone@acme"} {
		if _, err := m.Enable(context.Background(), id, EnableOptions{Interactive: true}); err != nil {
			b.Fatal(err)
		}
	}
	return m
}

// BenchmarkLoadSettings is the baseline of BenchmarkResolve: the
// settings' layers alone read and merged (one of the things Resolve
// does).
func BenchmarkLoadSettings(b *testing.B) {
	m := benchManager(b)
	b.ResetTimer()
	for b.Loop() {
		if _, err := settings.Load(m.Paths); err != nil {
			b.Fatal(err)
		}
	}
}
