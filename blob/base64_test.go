package blob

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"testing"
)

// checkDecode holds decodeBase64 to encoding/base64 on src.
func checkDecode(t *testing.T, src []byte) {
	t.Helper()
	if bytes.ContainsAny(src, "\r\n") {
		return // refused by the landing before decoding; encoding/base64 skips them
	}
	want, werr := base64.StdEncoding.DecodeString(string(src))
	got := make([]byte, decodedLen(len(src)))
	n, ok := decodeBase64(got, src)
	if ok != (werr == nil) {
		t.Fatalf("decodeBase64(%q) ok = %v, encoding/base64 error %v", src, ok, werr)
	}
	if ok && !bytes.Equal(got[:n], want) {
		t.Fatalf("decodeBase64(%q) = %x, want %x", src, got[:n], want)
	}
}

func TestDecodeBase64(t *testing.T) {
	for _, s := range []string{
		"", "QQ==", "QUI=", "QUJD", "QUJDRA==", "QUJDREU=", "QUJDREVG", "QUJDREVGRw==",
		"QR==", "QUJ=", // unused bits set: accepted (not strict)
		"Q", "QQ", "QQ=", "QUJ", "QUJDR", // lengths that are no multiple of 4
		"====", "Q===", "QQ=Q", "=QQQ", "QUJD====", "QQ==QUJD", "QUJ=QUJD", "QU=D",
		"QUJD QUJD", "QUJD\x00JD", "QUJD\xffJD", "QUJD-_JD", "QUJDQUJ@", "QUJDQUJ.",
		"+/+/", "////", "++==",
	} {
		checkDecode(t, []byte(s))
	}
	for n := 0; n < 100; n++ {
		b := make([]byte, n)
		_, _ = rand.Read(b)
		enc := []byte(base64.StdEncoding.EncodeToString(b))
		checkDecode(t, enc)
		for i := range enc { // every position, every byte value
			for c := 0; c < 256; c += 7 {
				mut := bytes.Clone(enc)
				mut[i] = byte(c)
				checkDecode(t, mut)
			}
		}
	}
}

func FuzzDecodeBase64(f *testing.F) {
	for _, s := range []string{"", "QQ==", "QUI=", "QUJD", "QUJDRA==", "Q===", "QQ=Q", "QUJD\xff"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, src []byte) { checkDecode(t, src) })
}

func BenchmarkDecodeBase64(b *testing.B) {
	raw := make([]byte, 256<<10)
	_, _ = rand.Read(raw)
	src := []byte(base64.StdEncoding.EncodeToString(raw))
	dst := make([]byte, decodedLen(len(src)))
	b.Run("decodeBase64", func(b *testing.B) {
		b.SetBytes(int64(len(src)))
		for b.Loop() {
			if _, ok := decodeBase64(dst, src); !ok {
				b.Fatal("refused")
			}
		}
	})
	b.Run("encoding/base64", func(b *testing.B) {
		b.SetBytes(int64(len(src)))
		for b.Loop() {
			if _, err := base64.StdEncoding.Decode(dst, src); err != nil {
				b.Fatal(err)
			}
		}
	})
}
