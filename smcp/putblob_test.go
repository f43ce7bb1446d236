package smcp

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

const (
	testUpload = "0123456789abcdef0123456789abcdef"
	testSum    = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
)

func decodePut(t *testing.T, s string) *PutBlobReq {
	t.Helper()
	var r PutBlobReq
	if err := DecodePutBlob([]byte(s), &r); err != nil {
		t.Fatalf("DecodePutBlob(%s) = %v", s, err)
	}
	return &r
}

func TestPutBlobDecodeLenient(t *testing.T) {
	call := `"agent":"a","req_id":"r","computer":"c"`
	tests := []struct {
		name    string
		payload string
		bad     []string // Malformed fields
		check   func(r *PutBlobReq) bool
	}{
		{"first chunk", `{` + call + `,"chunk_offset":0,"eof":true,"total_size":3,"sha256":"` + testSum + `","name_hint":"a b","blob":"YWJj"}`, nil,
			func(r *PutBlobReq) bool {
				return r.First() && *r.ChunkOffset == 0 && *r.EOF && *r.TotalSize == 3 && *r.SHA256 == testSum && *r.NameHint == "a b" && *r.Blob == "YWJj"
			}},
		{"total_size string", `{` + call + `,"total_size":"x"}`, []string{"total_size"}, func(r *PutBlobReq) bool { return r.TotalSize == nil }},
		{"total_size float", `{` + call + `,"total_size":1.5}`, []string{"total_size"}, nil},
		{"total_size exponent", `{` + call + `,"total_size":1e3}`, []string{"total_size"}, nil},
		{"total_size overflow", `{` + call + `,"total_size":99999999999999999999}`, []string{"total_size"}, nil},
		{"blob number", `{` + call + `,"blob":5}`, []string{"blob"}, func(r *PutBlobReq) bool { return r.Blob == nil }},
		{"blob object", `{` + call + `,"blob":{"a":[1,"}"]}}`, []string{"blob"}, nil},
		{"eof string", `{` + call + `,"eof":"true"}`, []string{"eof"}, nil},
		{"chunk_offset bool", `{` + call + `,"chunk_offset":true}`, []string{"chunk_offset"}, nil},
		{"sha256 array", `{` + call + `,"sha256":[]}`, []string{"sha256"}, nil},
		{"name_hint number", `{` + call + `,"name_hint":1}`, []string{"name_hint"}, nil},
		{"upload_id number", `{` + call + `,"upload_id":7}`, []string{"upload_id"}, func(r *PutBlobReq) bool { return !r.First() }},
		{"null is absent", `{` + call + `,"upload_id":null,"total_size":null,"blob":null,"eof":null}`, nil,
			func(r *PutBlobReq) bool { return r.First() && r.TotalSize == nil && r.Blob == nil && r.EOF == nil }},
		{"last duplicate wins", `{` + call + `,"total_size":"x","total_size":4}`, nil, func(r *PutBlobReq) bool { return *r.TotalSize == 4 }},
		{"folded key ignored", `{` + call + `,"Total_Size":4,"BLOB":"x"}`, nil, func(r *PutBlobReq) bool { return r.TotalSize == nil && r.Blob == nil }},
		{"escaped key and value", `{` + call + `,"blo\u0062":"YW\u004aj"}`, nil, func(r *PutBlobReq) bool { return *r.Blob == "YWJj" }},
		{"unknown fields", `{` + call + `,"etag":{"x":[1,2,{"y":null}]},"content_encoding":"gzip","n":-1.5e3}`, nil, nil},
		{"white space", " {\n\t" + call + " , \"eof\" : false } \n", nil, func(r *PutBlobReq) bool { return !*r.EOF }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := decodePut(t, tt.payload)
			for _, f := range putBlobFields {
				want := false
				for _, b := range tt.bad {
					want = want || b == f
				}
				if r.Malformed(f) != want {
					t.Errorf("Malformed(%s) = %v", f, !want)
				}
			}
			if r.Agent != "a" || r.ReqID != "r" || r.Computer != "c" {
				t.Errorf("call data = %q %q %q", r.Agent, r.ReqID, r.Computer)
			}
			if tt.check != nil && !tt.check(r) {
				t.Errorf("decoded %+v", r)
			}
		})
	}
}

// TestPutBlobDecodeRefused: what a server refuses with 400 (the call data
// and the payload's shape are its to judge), with the messages of Decode.
func TestPutBlobDecodeRefused(t *testing.T) {
	tests := []struct{ payload, msg string }{
		{`[]`, "invalid payload: must be a JSON object"},
		{`null`, "invalid payload: must be a JSON object"},
		{`"x"`, "invalid payload: must be a JSON object"},
		{`{"agent":"a"`, "invalid payload: malformed JSON"},
		{`{"agent":"a",}`, "invalid payload: malformed JSON"},
		{`{"agent":"a"} x`, "invalid payload: malformed JSON"},
		{`{"blob":"a` + "\x01" + `"}`, "invalid payload: malformed JSON"},
		{`{"blob":"\q"}`, "invalid payload: malformed JSON"},
		{`{"blob":01}`, "invalid payload: malformed JSON"},
		{`{"agent":5,"req_id":"r","computer":"c"}`, `invalid payload: field "agent" must be string`},
		{`{"agent":"a","req_id":["r"],"computer":"c"}`, `invalid payload: field "req_id" must be string`},
		{`{"agent":"a","req_id":"r","computer":{}}`, `invalid payload: field "computer" must be string`},
		{`{"agent":"a","req_id":"r"}`, `invalid payload: field "computer" must not be empty`},
		{`{"agent":"","req_id":"r","computer":"c","total_size":"x"}`, `invalid payload: field "agent" must not be empty`},
	}
	for _, tt := range tests {
		t.Run(tt.payload, func(t *testing.T) {
			var r PutBlobReq
			err := DecodePutBlob([]byte(tt.payload), &r)
			var pe *Error
			if !errors.As(err, &pe) || pe.Code != CodeBadRequest || pe.Message != tt.msg {
				t.Errorf("DecodePutBlob = %v, want 400 %q", err, tt.msg)
			}
			// The generic path (a server's DecodeRequest) answers the same.
			gen := DecodeRequest([]byte(tt.payload), NewClientRequest(EventPutBlob))
			if !errors.As(gen, &pe) || pe.Message != tt.msg {
				t.Errorf("DecodeRequest = %v, want 400 %q", gen, tt.msg)
			}
		})
	}
}

func TestPutBlobCheck(t *testing.T) {
	first := func(mod string) string {
		return `{"agent":"a","req_id":"r","computer":"c","chunk_offset":0,"eof":false,"total_size":3,"sha256":"` + testSum + `","blob":"YWJj"` + mod + `}`
	}
	later := func(mod string) string {
		return `{"agent":"a","req_id":"r","computer":"c","upload_id":"` + testUpload + `","chunk_offset":3,"eof":true,"blob":"YWJj"` + mod + `}`
	}
	decl := `{"code":4019,"message":"Blob write failed","details":{"reason":"invalid_declaration"}}`
	declID := `{"code":4019,"message":"Blob write failed","details":{"reason":"invalid_declaration","upload_id":"` + testUpload + `"}}`
	tests := []struct{ name, payload, want string }{
		{"first ok", first(``), ``},
		{"first with name_hint", first(`,"name_hint":"x.txt"`), ``},
		{"first upper-case sha256", strings.Replace(first(``), testSum, strings.ToUpper(testSum), 1), ``},
		{"later ok", later(``), ``},
		{"total_size missing", strings.Replace(first(``), `"total_size":3,`, ``, 1), decl},
		{"total_size zero", strings.Replace(first(``), `"total_size":3`, `"total_size":0`, 1), decl},
		{"total_size negative", strings.Replace(first(``), `"total_size":3`, `"total_size":-1`, 1), decl},
		{"total_size string", strings.Replace(first(``), `"total_size":3`, `"total_size":"3"`, 1), decl},
		{"sha256 missing", strings.Replace(first(``), `"sha256":"`+testSum+`",`, ``, 1), decl},
		{"sha256 short", strings.Replace(first(``), testSum, testSum[:63], 1), decl},
		{"sha256 not hex", strings.Replace(first(``), testSum, "g"+testSum[1:], 1), decl},
		{"sha256 number", strings.Replace(first(``), `"`+testSum+`"`, `5`, 1), decl},
		{"name_hint number", first(`,"name_hint":5`), decl},
		{"blob missing", strings.Replace(first(``), `,"blob":"YWJj"`, ``, 1), decl},
		{"blob number", strings.Replace(first(``), `"YWJj"`, `5`, 1), decl},
		{"eof missing", strings.Replace(first(``), `"eof":false,`, ``, 1), decl},
		{"chunk_offset missing", strings.Replace(first(``), `"chunk_offset":0,`, ``, 1), decl},
		{"first chunk_offset not 0", strings.Replace(first(``), `"chunk_offset":0`, `"chunk_offset":5`, 1),
			`{"code":4019,"message":"Blob write failed","details":{"chunk_offset":0,"reason":"range"}}`},
		{"upload_id malformed", strings.Replace(later(``), testUpload, "nope", 1),
			`{"code":4019,"message":"Blob write failed","details":{"reason":"invalid_upload","upload_id":"nope"}}`},
		{"upload_id upper-case", strings.Replace(later(``), testUpload, strings.ToUpper(testUpload), 1),
			`{"code":4019,"message":"Blob write failed","details":{"reason":"invalid_upload","upload_id":"` + strings.ToUpper(testUpload) + `"}}`},
		{"upload_id empty", strings.Replace(later(``), testUpload, "", 1),
			`{"code":4019,"message":"Blob write failed","details":{"reason":"invalid_upload","upload_id":""}}`},
		{"upload_id number", strings.Replace(later(``), `"`+testUpload+`"`, `12`, 1),
			`{"code":4019,"message":"Blob write failed","details":{"reason":"invalid_upload"}}`},
		{"later total_size", later(`,"total_size":3`), declID},
		{"later sha256", later(`,"sha256":"` + testSum + `"`), declID},
		{"later name_hint", later(`,"name_hint":"x"`), declID},
		{"later malformed total_size", later(`,"total_size":"x"`), declID},
		{"later null declaration", later(`,"total_size":null,"sha256":null,"name_hint":null`), ``},
		{"later blob missing", strings.Replace(later(``), `,"blob":"YWJj"`, ``, 1), declID},
		{"later eof wrong type", strings.Replace(later(``), `"eof":true`, `"eof":1`, 1), declID},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := decodePut(t, tt.payload).Check()
			got := ""
			if err != nil {
				got = string(Encode(err))
			}
			if got != tt.want {
				t.Errorf("Check() = %s\nwant      %s", got, tt.want)
			}
		})
	}
}

func TestPutBlobEncode(t *testing.T) {
	off, eof, size, sum, blob := int64(0), true, int64(3), testSum, "YWJj"
	b, err := json.Marshal(PutBlobReq{Agent: "a", ReqID: "r", Computer: "c", ChunkOffset: &off, EOF: &eof, TotalSize: &size, SHA256: &sum, Blob: &blob})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"agent":"a","req_id":"r","computer":"c","chunk_offset":0,"eof":true,"total_size":3,"sha256":"` + testSum + `","blob":"YWJj"}`
	if string(b) != want {
		t.Errorf("encoded %s", b)
	}
	n := int64(3)
	ret, _ := json.Marshal(PutBlobRet{UploadID: testUpload, ChunkOffset: 0, LandingPath: "/r/x", TotalSize: &n, SHA256: testSum, ReqID: "r"})
	if want := `{"upload_id":"` + testUpload + `","chunk_offset":0,"landing_path":"/r/x","total_size":3,"sha256":"` + testSum + `","req_id":"r"}`; string(ret) != want {
		t.Errorf("ret %s", ret)
	}
}

// FuzzPutBlobDecode holds DecodePutBlob (the path Decode and
// DecodeRequest take for a *PutBlobReq) to the generic decoder, which
// validates the payload with encoding/json first: both accept and refuse
// the same payloads with the same answer, and a decoded string field
// equals what encoding/json reads (for valid UTF-8).
func FuzzPutBlobDecode(f *testing.F) {
	for _, s := range []string{
		`{"agent":"a","req_id":"r","computer":"c","chunk_offset":0,"eof":false,"total_size":3,"sha256":"x","blob":"YWJj"}`,
		`{"agent":"a","req_id":"r","computer":"c","upload_id":"` + testUpload + `","chunk_offset":3,"eof":true,"blob":"YWJj"}`,
		`{"total_size":"x","blob":5,"eof":null,"upload_id":[1]}`, `{"Blob":"x","bl\u006fb":"\u00e9"}`, `{"agent":1}`,
		`[]`, `null`, `{`, `{"a":"\ud800"}`, `{"blob":"` + "\xff" + `"}`, ` { } `, `{"x":{"y":[1,{"z":"}"}]}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		var r PutBlobReq
		err := DecodePutBlob(raw, &r)
		gen := NewClientRequest(EventPutBlob).(*PutBlobReq)
		gerr := decodeSlow(raw, gen)
		if gerr == nil {
			gerr = gen.Validate()
		}
		var viaDecode PutBlobReq
		if derr := DecodeRequest(raw, &viaDecode); fmt.Sprint(derr) != fmt.Sprint(err) || !reflect.DeepEqual(&r, &viaDecode) {
			t.Fatalf("%q: DecodeRequest = %v, DecodePutBlob = %v", raw, derr, err)
		}
		if fmt.Sprint(err) != fmt.Sprint(gerr) {
			t.Fatalf("%q: DecodePutBlob = %v, DecodeRequest = %v", raw, err, gerr)
		}
		if err != nil {
			var pe *Error
			if !errors.As(err, &pe) || pe.Code != CodeBadRequest || len(pe.Message) > 200 {
				t.Fatalf("error %v", err)
			}
			return
		}
		if !reflect.DeepEqual(&r, gen) {
			t.Fatalf("paths differ: %+v vs %+v", r, *gen)
		}
		var m map[string]any
		if json.Unmarshal(raw, &m) != nil {
			t.Fatalf("accepted what encoding/json refuses: %q", raw)
		}
		for key, p := range map[string]*string{"upload_id": r.UploadID, "sha256": r.SHA256, "name_hint": r.NameHint, "blob": r.Blob} {
			s, isString := m[key].(string)
			switch {
			case isString && p == nil, !isString && p != nil:
				t.Fatalf("%s: %v vs %v", key, m[key], p)
			case isString && strings.ToValidUTF8(*p, "\uFFFD") != s:
				t.Fatalf("%s = %q, encoding/json %q", key, *p, s)
			}
			if bad := m[key] != nil && !isString; bad != r.Malformed(key) {
				t.Fatalf("Malformed(%s) = %v for %v", key, r.Malformed(key), m[key])
			}
		}
	})
}

// chunkPayload is a client:put_blob payload carrying n random bytes.
func chunkPayload(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return []byte(`{"agent":"a","req_id":"r","computer":"c","upload_id":"` + testUpload + `","chunk_offset":0,"eof":false,"blob":"` +
		base64.StdEncoding.EncodeToString(b) + `"}`)
}

// BenchmarkPutBlobDecode compares the one-pass decoder with the generic
// path (encoding/json validation first) on a 256 KiB chunk.
func BenchmarkPutBlobDecode(b *testing.B) {
	raw := chunkPayload(256 << 10)
	b.Run("DecodePutBlob", func(b *testing.B) {
		b.SetBytes(int64(len(raw)))
		for b.Loop() {
			var r PutBlobReq
			if err := DecodePutBlob(raw, &r); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("generic", func(b *testing.B) {
		b.SetBytes(int64(len(raw)))
		for b.Loop() {
			if err := decodeSlow(raw, NewClientRequest(EventPutBlob)); err != nil {
				b.Fatal(err)
			}
		}
	})
}
