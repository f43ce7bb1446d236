package desktop

import (
	"bytes"
	"hash/adler32"
	"image/png"
	"math/rand/v2"
	"os"
	"testing"
)

// TestEncodePNG: the parallel encoder's PNG decodes (image/png checks
// the CRCs and the Adler-32) to the captured pixels, for sizes that make
// one strip, several, and uneven ones.
func TestEncodePNG(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, sz := range [][2]int{{1, 1}, {3, 1}, {7, 63}, {64, 64}, {130, 129}, {333, 517}, {1280, 800}} {
		w, h := sz[0], sz[1]
		stride := w*4 + 8 // rows need not be packed
		f := frame{pix: make([]byte, stride*h), width: w, height: h, stride: stride}
		for y := range h {
			for x := range w {
				i := y*stride + x*4
				if (x/5+y/3)%4 == 0 { // noise and flat areas
					f.pix[i], f.pix[i+1], f.pix[i+2] = byte(rng.IntN(256)), byte(rng.IntN(256)), byte(rng.IntN(256))
				} else {
					f.pix[i], f.pix[i+1], f.pix[i+2] = byte(x), byte(y), 7
				}
				f.pix[i+3] = 0x5a // X leaves the pad byte undefined
			}
		}
		buf, err := encodePNG(f)
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(bytes.NewReader(buf.Bytes()))
		if err != nil {
			t.Fatalf("%dx%d: %v", w, h, err)
		}
		if b := img.Bounds(); b.Dx() != w || b.Dy() != h {
			t.Fatalf("%dx%d: decoded %v", w, h, b)
		}
	check:
		for y := range h {
			for x := range w {
				i := y*stride + x*4
				r, g, b, a := img.At(x, y).RGBA()
				if byte(r>>8) != f.pix[i+2] || byte(g>>8) != f.pix[i+1] || byte(b>>8) != f.pix[i] || a != 0xffff {
					t.Errorf("%dx%d: pixel (%d,%d) = %d %d %d %d", w, h, x, y, r>>8, g>>8, b>>8, a>>8)
					break check
				}
			}
		}
		releaseBuffer(buf)
	}
}

func TestAdler32Combine(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, n := range [][2]int{{0, 0}, {0, 5}, {5, 0}, {1, 1}, {65520, 65521}, {100000, 300000}} {
		a, b := make([]byte, n[0]), make([]byte, n[1])
		for i := range a {
			a[i] = byte(rng.IntN(256))
		}
		for i := range b {
			b[i] = 0xff
		}
		want := adler32.Checksum(append(append([]byte{}, a...), b...))
		if got := adler32Combine(adler32.Checksum(a), adler32.Checksum(b), len(b)); got != want {
			t.Errorf("%v: %08x, want %08x", n, got, want)
		}
	}
}

// BenchmarkEncodePNG encodes a real desktop (the README's screenshot).
func BenchmarkEncodePNG(b *testing.B) {
	raw, err := os.ReadFile("../../docs/img/desktop.png")
	if err != nil {
		b.Skip(err)
	}
	img, err := png.Decode(bytes.NewReader(raw))
	if err != nil {
		b.Fatal(err)
	}
	w, h := img.Bounds().Dx(), img.Bounds().Dy()
	f := frame{pix: make([]byte, w*h*4), width: w, height: h, stride: w * 4}
	for y := range h {
		for x := range w {
			r, g, bl, _ := img.At(x, y).RGBA()
			i := y*w*4 + x*4
			f.pix[i], f.pix[i+1], f.pix[i+2] = byte(bl>>8), byte(g>>8), byte(r>>8)
		}
	}
	b.SetBytes(int64(len(f.pix)))
	for b.Loop() {
		buf, err := encodePNG(f)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(buf.Len()), "png-bytes")
		releaseBuffer(buf)
	}
}
