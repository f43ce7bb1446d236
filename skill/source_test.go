package skill

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func skillMD(name, desc string) string {
	return "---\nname: " + name + "\ndescription: " + desc + "\n---\n# " + name + "\n"
}

func names(pkgs []Package) string {
	var s []string
	for _, p := range pkgs {
		s = append(s, p.Ref.Name)
	}
	return strings.Join(s, ",")
}

func TestScanUser(t *testing.T) {
	root := t.TempDir()
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	writeTree(t, root, map[string]string{
		"b-skill/SKILL.md":         skillMD("b-skill", "B"),
		"a-skill/SKILL.md":         skillMD("a-skill", "A"),
		"a-skill/scripts/x.py":     "x",
		"mismatch/SKILL.md":        skillMD("other", "M"),
		"no-front/SKILL.md":        "# no frontmatter\n",
		"bad-desc/SKILL.md":        "---\nname: bad-desc\n---\n",
		"Upper/SKILL.md":           skillMD("Upper", "U"),
		"no-skill/README.md":       "x",
		".hidden/SKILL.md":         skillMD("hidden", "H"),
		"nested/deep/SKILL.md":     skillMD("deep", "D"),
		"file.txt":                 "x",
		"c-skill/SKILL.md":         "---\r\nname: c-skill\r\ndescription: C\r\ntags: [one, two]\r\n---\r\nbody",
		"d-skill/SKILL.md":         "---\nname: d-skill\ndescription: D\ntags: 3\n---\n",
		"e-skill/SKILL.md":         "\xef\xbb\xbf" + skillMD("e-skill", "E"),
		"f-skill/SKILL.md/foo.txt": "a directory named SKILL.md",
	})
	pkgs := ScanUser(root, log)
	if got := names(pkgs); got != "a-skill,b-skill,c-skill,d-skill,e-skill" {
		t.Fatalf("names = %s\n%s", got, logs.String())
	}
	real, _ := filepath.EvalSymlinks(root)
	a := pkgs[0]
	if a.Ref.Source != "user" || a.Ref.Path != filepath.Join(real, "a-skill") || a.Root != a.Ref.Path || a.Ref.Description != "A" || a.Ref.URI != "" || a.Ref.Version != "" {
		t.Errorf("ref = %+v", a)
	}
	if tags := pkgs[2].Ref.Tags; len(tags) != 2 || tags[1] != "two" {
		t.Errorf("c-skill tags = %v", tags)
	}
	if pkgs[3].Ref.Tags != nil {
		t.Errorf("d-skill tags = %v", pkgs[3].Ref.Tags)
	}
	for _, want := range []string{"mismatch", "no-front", "bad-desc", "Upper", "f-skill"} {
		if !strings.Contains(logs.String(), "level=ERROR") || !strings.Contains(logs.String(), want) {
			t.Errorf("no ERROR log about %s:\n%s", want, logs.String())
		}
	}
	if ScanUser(filepath.Join(root, "missing"), nil) != nil || ScanUser("", nil) != nil {
		t.Error("a missing folder has skills")
	}

	// Fingerprint: stable, and changed by a deep edit, a new skill, a removal.
	fp := Fingerprint(root)
	if fp == "" || fp != Fingerprint(root) {
		t.Fatal("fingerprint not stable")
	}
	old := pkgs[0].Digest
	time.Sleep(10 * time.Millisecond)
	writeTree(t, root, map[string]string{"a-skill/scripts/x.py": "xy"})
	if Fingerprint(root) == fp || ScanUser(root, nil)[0].Digest == old {
		t.Error("a script's change is not seen")
	}
	if Fingerprint(filepath.Join(root, "missing")) != "" {
		t.Error("missing folder fingerprint")
	}
}

func TestRegistry(t *testing.T) {
	var logs bytes.Buffer
	r := NewRegistry(slog.New(slog.NewTextHandler(&logs, nil)))
	p := func(name, digest string) Package {
		return Package{Ref: Meta{Name: "x", Description: "d"}.Ref(name, "s", "/p/"+name), Root: "/p/" + name, Digest: digest}
	}
	if !r.Set("user", []Package{p("zeta", "1"), p("alpha", "1"), p("zeta", "2"), p("Bad", "1")}) {
		t.Fatal("first set unchanged")
	}
	if !strings.Contains(logs.String(), "level=ERROR") || !strings.Contains(logs.String(), "zeta") || !strings.Contains(logs.String(), "Bad") {
		t.Errorf("duplicate and invalid not logged: %s", logs.String())
	}
	if r.Set("user", []Package{p("zeta", "1"), p("alpha", "1")}) {
		t.Error("same set reported as a change")
	}
	r.Set("mcp:b", []Package{p("mcp:b:zeta", "1"), p("mcp:b:alpha", "1")})
	r.Set("mcp:a", []Package{p("mcp:a:x", "1")})
	var got []string
	for _, ref := range r.Refs() {
		got = append(got, ref.Name)
	}
	// Discovery order, no sorting.
	if strings.Join(got, ",") != "zeta,alpha,mcp:b:zeta,mcp:b:alpha,mcp:a:x" {
		t.Fatalf("refs = %v", got)
	}
	if !r.Set("user", []Package{p("zeta", "2"), p("alpha", "1")}) {
		t.Error("a digest change is no change")
	}
	if !r.SetOrphan("mcp:b", true) || r.SetOrphan("mcp:b", true) {
		t.Error("orphan change")
	}
	if _, ok := r.Lookup("mcp:b:zeta"); ok {
		t.Error("an orphan is found")
	}
	if len(r.Refs()) != 3 || len(r.Packages("mcp:b")) != 2 {
		t.Error("orphans are listed, or lost")
	}
	if r.Set("mcp:b", []Package{p("mcp:b:zeta", "9")}) {
		t.Error("a change hidden by the orphan is reported")
	}
	if !r.SetOrphan("mcp:b", false) {
		t.Error("un-orphan is no change")
	}
	if pk, ok := r.Lookup("mcp:b:zeta"); !ok || pk.Digest != "9" {
		t.Errorf("lookup = %+v %v", pk, ok)
	}
	if r.SetOrphan("nobody", true) {
		t.Error("unknown source")
	}
}

// fakeServer is an MCP server's resources, with pages and counted reads.
type fakeServer struct {
	mu        sync.Mutex
	resources []*mcp.Resource
	contents  map[string]mcp.ResourceContents
	pageSize  int
	reads     map[string]int
	listErr   error
}

func (f *fakeServer) ListResources(_ context.Context, cursor string) (*mcp.ListResourcesResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.listErr != nil {
		return nil, f.listErr
	}
	start := 0
	if cursor != "" {
		start = int(cursor[0] - '0')
	}
	end := min(start+f.pageSize, len(f.resources))
	res := &mcp.ListResourcesResult{Resources: f.resources[start:end]}
	if end < len(f.resources) {
		res.NextCursor = string(rune('0' + end))
	}
	return res, nil
}

func (f *fakeServer) ReadResource(_ context.Context, uri string) (*mcp.ReadResourceResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.reads == nil {
		f.reads = map[string]int{}
	}
	f.reads[uri]++
	c, ok := f.contents[uri]
	if !ok {
		return nil, errors.New("no such resource")
	}
	c.URI = uri
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{&c}}, nil
}

func res(uri string, meta map[string]any) *mcp.Resource {
	return &mcp.Resource{URI: uri, Name: uri, Meta: meta}
}

func TestMCPSourceResources(t *testing.T) {
	const h = "skill://com.example.skills/"
	f := &fakeServer{pageSize: 2, resources: []*mcp.Resource{
		res(h+"csv-tool", map[string]any{"source": "resources", "version": "1.2.0"}),
		res(h+"csv-tool/SKILL.md", nil),
		res("window://x/y", nil),
		res(h+"csv-tool/scripts/run%20me.py", nil),
		res(h+"csv-tool/assets/logo.png", nil),
		res(h+"nomode", nil),
		res(h+"dup", map[string]any{"source": "resources"}),
		res(h+"dup/SKILL.md", nil),
		res(h+"evil", map[string]any{"source": "resources"}),
		res(h+"evil/SKILL.md", nil),
		res(h+"evil/a/..%2F..%2Fx", nil),
		res(h+"nofile", map[string]any{"source": "resources"}),
		res(h+"misplaced", map[string]any{"source": "resources"}),
		res(h+"misplaced/sub/SKILL.md", nil),
		res("file:///etc/passwd", map[string]any{"source": "resources"}),
	}, contents: map[string]mcp.ResourceContents{
		h + "csv-tool":                     {Text: "index, never read"},
		h + "csv-tool/SKILL.md":            {Text: skillMD("csv-tool", "CSV") + "tags: x\n"},
		h + "csv-tool/scripts/run%20me.py": {Text: "print(1)"},
		h + "csv-tool/assets/logo.png":     {Blob: []byte{0x89, 'P', 'N', 'G'}},
		h + "dup/SKILL.md":                 {Text: skillMD("csv-tool", "same name")},
		h + "evil/SKILL.md":                {Text: skillMD("evil", "E")},
		h + "evil/a/..%2F..%2Fx":           {Text: "x"},
		h + "misplaced/sub/SKILL.md":       {Text: skillMD("misplaced", "M")},
	}}
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	staging := t.TempDir()
	m := NewMCPSource("my_api", staging, Limits{}, nil, log)
	pkgs, changed, err := m.Sync(context.Background(), f, nil, true)
	if err != nil || !changed {
		t.Fatal(err)
	}
	if got := names(pkgs); got != "mcp:my_api:csv-tool" {
		t.Fatalf("names = %s\n%s", got, logs.String())
	}
	p := pkgs[0]
	real, _ := filepath.EvalSymlinks(staging)
	if p.Ref.Source != "mcp:my_api" || p.Ref.URI != h+"csv-tool" || p.Ref.Version != "1.2.0" || p.Ref.Path != filepath.Join(real, "my_api", "csv-tool") {
		t.Errorf("ref = %+v", p.Ref)
	}
	if b, _ := os.ReadFile(filepath.Join(p.Root, "scripts", "run me.py")); string(b) != "print(1)" {
		t.Errorf("run me.py = %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(p.Root, "assets", "logo.png")); string(b) != "\x89PNG" {
		t.Errorf("logo = %q", b)
	}
	if f.reads[h+"csv-tool"] != 0 {
		t.Error("the root was read")
	}
	st, _ := os.Stat(filepath.Join(staging, "my_api"))
	if st.Mode().Perm() != 0o700 {
		t.Errorf("staging mode %o", st.Mode().Perm())
	}
	for _, want := range []string{"nomode", "taken by another skill", "evil", "nofile", "misplaced"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("no log about %s:\n%s", want, logs.String())
		}
	}
	if _, err := os.Stat(filepath.Join(real, "x")); err == nil {
		t.Error("a traversal wrote outside")
	}
	if entries, _ := os.ReadDir(filepath.Join(staging, "my_api")); len(entries) != 1 {
		t.Errorf("staging has %d entries (temporary folders left?)", len(entries))
	}

	// Unchanged listing: nothing read again, no change.
	reads := f.reads[h+"csv-tool/SKILL.md"]
	if _, changed, err := m.Sync(context.Background(), f, nil, false); err != nil || changed || f.reads[h+"csv-tool/SKILL.md"] != reads {
		t.Errorf("unchanged sync: changed=%v err=%v", changed, err)
	}
	// A forced root is read again; its content change shows in the digest.
	f.contents[h+"csv-tool/scripts/run%20me.py"] = mcp.ResourceContents{Text: "print(2)"}
	pkgs2, _, _ := m.Sync(context.Background(), f, map[string]bool{h + "csv-tool": true}, false)
	if len(pkgs2) != 1 || pkgs2[0].Digest == p.Digest {
		t.Error("forced re-materialisation not seen")
	}
	if r, ok := m.Root(h + "csv-tool/SKILL.md"); !ok || r.URI != h+"csv-tool" {
		t.Error("Root lookup")
	}
	// The skill goes from the list: its staged copy goes too.
	f.resources = f.resources[:0]
	pkgs3, _, _ := m.Sync(context.Background(), f, nil, false)
	if len(pkgs3) != 0 {
		t.Fatal(pkgs3)
	}
	if _, err := os.Stat(p.Root); !os.IsNotExist(err) {
		t.Error("staged copy of a removed skill kept")
	}
	f.listErr = errors.New("down")
	if _, _, err := m.Sync(context.Background(), f, nil, true); err == nil {
		t.Error("list error not returned")
	}
}

func TestMCPSourceMounted(t *testing.T) {
	mount := t.TempDir()
	writeTree(t, mount, map[string]string{"SKILL.md": skillMD("mounted-one", "M"), "references/r.md": "r"})
	_ = os.Symlink("/etc/passwd", filepath.Join(mount, "passwd"))
	f := &fakeServer{pageSize: 10, resources: []*mcp.Resource{
		res("skill://h/mounted-one", map[string]any{"source": "mounted", "mount_dir": mount}),
		res("skill://h/relative", map[string]any{"source": "mounted", "mount_dir": "rel/dir"}),
	}}
	// A server not on this host may not mount a folder of this host.
	remote := NewMCPSource("b", t.TempDir(), Limits{}, nil, nil)
	if pkgs, _, err := remote.Sync(context.Background(), f, nil, true); err != nil || len(pkgs) != 0 {
		t.Fatalf("remote server's mount: %v %v", names(pkgs), err)
	}
	m := NewMCPSource("b", t.TempDir(), Limits{}, nil, nil)
	m.SameHost = true
	pkgs, _, err := m.Sync(context.Background(), f, nil, true)
	if err != nil || names(pkgs) != "mcp:b:mounted-one" {
		t.Fatalf("%v %v", names(pkgs), err)
	}
	if b, _ := os.ReadFile(filepath.Join(pkgs[0].Root, "references", "r.md")); string(b) != "r" {
		t.Error("not copied")
	}
	if _, err := os.Lstat(filepath.Join(pkgs[0].Root, "passwd")); err == nil {
		t.Error("a link was copied")
	}
}

func TestMCPSourceArchive(t *testing.T) {
	tgz := func(entries ...*tar.Header) []byte {
		var buf bytes.Buffer
		gz := gzip.NewWriter(&buf)
		tw := tar.NewWriter(gz)
		for _, h := range entries {
			body := h.Linkname
			if h.Typeflag == tar.TypeReg {
				h.Size = int64(len(body))
				h.Linkname = ""
			}
			_ = tw.WriteHeader(h)
			if h.Typeflag == tar.TypeReg {
				_, _ = tw.Write([]byte(body))
			}
		}
		tw.Close()
		gz.Close()
		return buf.Bytes()
	}
	reg := func(name, body string) *tar.Header {
		return &tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o755, Linkname: body}
	}
	zipOf := func(files map[string]string) []byte {
		var buf bytes.Buffer
		zw := zip.NewWriter(&buf)
		for n, b := range files {
			w, _ := zw.Create(n)
			_, _ = w.Write([]byte(b))
		}
		zw.Close()
		return buf.Bytes()
	}
	archives := map[string][]byte{
		"/good.tgz":    tgz(&tar.Header{Name: "pkg/", Typeflag: tar.TypeDir, Mode: 0o755}, reg("pkg/SKILL.md", skillMD("arch-tar", "T")), reg("pkg/scripts/x.sh", "echo")),
		"/good.zip":    zipOf(map[string]string{"SKILL.md": skillMD("arch-zip", "Z"), "a/b.txt": "b"}),
		"/evil.tgz":    tgz(reg("SKILL.md", skillMD("evil-tar", "E")), reg("../escape", "x")),
		"/link.tgz":    tgz(reg("SKILL.md", skillMD("link-tar", "L")), &tar.Header{Name: "l", Typeflag: tar.TypeSymlink, Linkname: "/etc"}),
		"/evil.zip":    zipOf(map[string]string{"SKILL.md": skillMD("evil-zip", "E"), "../../x": "x"}),
		"/big.tgz":     tgz(reg("SKILL.md", skillMD("big-tar", "B")), reg("big", strings.Repeat("x", 5000))),
		"/sha.tgz":     tgz(reg("SKILL.md", skillMD("sha-tar", "S"))),
		"/notgzip.tgz": []byte("nope"),
	}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, ok := archives[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write(b)
	}))
	defer ts.Close()
	good := hexSum(archives["/good.tgz"])
	arch := func(path, format, sha string) map[string]any {
		m := map[string]any{"source": "archive", "archive_uri": ts.URL + path, "archive_format": format}
		if sha != "" {
			m["archive_sha256"] = sha
		}
		return m
	}
	f := &fakeServer{pageSize: 100, resources: []*mcp.Resource{
		res("skill://h/arch-tar", arch("/good.tgz", "tar.gz", strings.ToUpper(good))),
		res("skill://h/arch-zip", arch("/good.zip", "zip", "")),
		res("skill://h/evil-tar", arch("/evil.tgz", "tar.gz", "")),
		res("skill://h/link-tar", arch("/link.tgz", "tar.gz", "")),
		res("skill://h/evil-zip", arch("/evil.zip", "zip", "")),
		res("skill://h/big-tar", arch("/big.tgz", "tar.gz", "")),
		res("skill://h/sha-tar", arch("/sha.tgz", "tar.gz", good)),
		res("skill://h/notgzip", arch("/notgzip.tgz", "tar.gz", "")),
		res("skill://h/missing", arch("/missing.tgz", "tar.gz", "")),
		res("skill://h/rar", arch("/good.tgz", "rar", "")),
		res("skill://h/file", map[string]any{"source": "archive", "archive_uri": "file:///etc/passwd", "archive_format": "zip"}),
	}}
	var logs bytes.Buffer
	m := NewMCPSource("b", t.TempDir(), Limits{MaxFile: 4096}, nil, slog.New(slog.NewTextHandler(&logs, nil)))
	pkgs, _, err := m.Sync(context.Background(), f, nil, true)
	if err != nil || names(pkgs) != "mcp:b:arch-tar,mcp:b:arch-zip" {
		t.Fatalf("%v %v\n%s", names(pkgs), err, logs.String())
	}
	if st, err := os.Stat(filepath.Join(pkgs[0].Root, "scripts", "x.sh")); err != nil || st.Mode().Perm()&0o100 == 0 {
		t.Errorf("tar file mode: %v %v", st, err)
	}
	if b, _ := os.ReadFile(filepath.Join(pkgs[1].Root, "a", "b.txt")); string(b) != "b" {
		t.Error("zip content")
	}
	for _, want := range []string{"evil-tar", "link or special", "evil-zip", "big-tar", "sha256 does not match", "not gzip", "HTTP 404", "rar", "http or https"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("no log about %q", want)
		}
	}
}
