package desktop

import (
	"bytes"
	"compress/flate"
	"encoding/binary"
	"hash/adler32"
	"hash/crc32"
	"runtime"
	"sync"
)

// The screenshot encoder writes a PNG (8-bit RGB, filter None) straight
// from the X server's BGRX pixels, compressing horizontal strips of the
// image in parallel, the way pigz does: each strip is an independent
// deflate stream ended by a sync flush (byte-aligned, not final) except
// the last, which ends the stream; their concatenation is one valid
// zlib stream whose Adler-32 is combined from the strips'. BestSpeed
// deflate and no filter search keep it within the benchmark's budget
// (≤ 1.5× the bare X capture); the buffers are pooled.

// frame is a captured screen: BGRX pixels, 4 bytes each, rows stride
// bytes apart.
type frame struct {
	pix           []byte
	width, height int
	stride        int
}

// minStripRows is the smallest strip worth a goroutine.
const minStripRows = 64

var (
	outBuffers   = sync.Pool{New: func() any { return new(bytes.Buffer) }}
	stripBuffers = sync.Pool{New: func() any { return new(strip) }}
)

// strip is one strip's work space: the raw (filtered) rows, the
// compressed output and a deflate writer, all reused.
type strip struct {
	raw       []byte
	prev, cur []byte // RGB rows for the Up filter
	out       bytes.Buffer
	zw        *flate.Writer
	sum       uint32 // Adler-32 of raw
	err       error
}

// encodePNG encodes f into a pooled buffer; the caller hands it back
// with releaseBuffer once written.
func encodePNG(f frame) (*bytes.Buffer, error) {
	n := max(1, min(runtime.GOMAXPROCS(0), f.height/minStripRows))
	strips := make([]*strip, n)
	var wg sync.WaitGroup
	for i := range n {
		s := stripBuffers.Get().(*strip)
		strips[i] = s
		y0, y1 := f.height*i/n, f.height*(i+1)/n
		last := i == n-1
		if last {
			s.compress(f, y0, y1, true) // this goroutine takes one strip
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.compress(f, y0, y1, false)
		}()
	}
	wg.Wait()
	defer func() {
		for _, s := range strips {
			stripBuffers.Put(s)
		}
	}()
	size := 0
	for _, s := range strips {
		if s.err != nil {
			return nil, s.err
		}
		size += s.out.Len()
	}
	buf := outBuffers.Get().(*bytes.Buffer)
	buf.Reset()
	buf.Grow(size + 128)
	buf.WriteString("\x89PNG\r\n\x1a\n")
	var ihdr [13]byte
	binary.BigEndian.PutUint32(ihdr[0:], uint32(f.width))
	binary.BigEndian.PutUint32(ihdr[4:], uint32(f.height))
	ihdr[8], ihdr[9] = 8, 2 // 8-bit RGB; compression, filter, interlace 0
	writeChunk(buf, "IHDR", ihdr[:])
	// IDAT: the zlib header (deflate, 32K window, fastest), the strips,
	// the Adler-32 of all raw rows.
	var hdr [8]byte
	binary.BigEndian.PutUint32(hdr[0:], uint32(2+size+4))
	copy(hdr[4:], "IDAT")
	buf.Write(hdr[:])
	start := buf.Len() - 4
	buf.Write([]byte{0x78, 0x01})
	sum := uint32(1)
	for i, s := range strips {
		buf.Write(s.out.Bytes())
		y0, y1 := f.height*i/n, f.height*(i+1)/n
		sum = adler32Combine(sum, s.sum, (y1-y0)*(1+3*f.width))
	}
	binary.BigEndian.PutUint32(hdr[:4], sum)
	buf.Write(hdr[:4])
	binary.BigEndian.PutUint32(hdr[:4], crc32.ChecksumIEEE(buf.Bytes()[start:]))
	buf.Write(hdr[:4])
	writeChunk(buf, "IEND", nil)
	return buf, nil
}

// compress turns rows y0..y1 of f into PNG rows (filter byte 0, then
// RGB) and deflates them; last ends the deflate stream, the others end
// with a sync flush.
func (s *strip) compress(f frame, y0, y1 int, last bool) {
	rowLen := 1 + 3*f.width
	need := (y1 - y0) * rowLen
	if cap(s.raw) < need {
		s.raw = make([]byte, need)
	}
	raw := s.raw[:need]
	if cap(s.prev) < 3*f.width {
		s.prev, s.cur = make([]byte, 3*f.width), make([]byte, 3*f.width)
	}
	prev, cur := s.prev[:3*f.width], s.cur[:3*f.width]
	clear(prev)
	if y0 > 0 {
		bgrxToRGB(prev, f.pix[(y0-1)*f.stride:(y0-1)*f.stride+4*f.width])
	}
	for y := y0; y < y1; y++ {
		dst := raw[(y-y0)*rowLen : (y-y0+1)*rowLen]
		dst[0] = 2 // filter Up
		bgrxToRGB(cur, f.pix[y*f.stride:y*f.stride+4*f.width])
		up(dst[1:], cur, prev)
		prev, cur = cur, prev
	}
	s.sum = adler32.Checksum(raw)
	s.out.Reset()
	if s.zw == nil {
		s.zw, s.err = flate.NewWriter(&s.out, flate.BestSpeed)
		if s.err != nil {
			return
		}
	} else {
		s.zw.Reset(&s.out)
	}
	if _, s.err = s.zw.Write(raw); s.err != nil {
		return
	}
	if last {
		s.err = s.zw.Close()
	} else {
		s.err = s.zw.Flush()
	}
}

// up is PNG's Up filter: each byte minus the one above it.
func up(dst, cur, prev []byte) {
	for i := range cur {
		dst[i] = cur[i] - prev[i]
	}
}

// bgrxToRGB converts one row of BGRX pixels into RGB.
func bgrxToRGB(dst, src []byte) {
	for i, j := 0, 0; j+3 < len(src) && i+2 < len(dst); i, j = i+3, j+4 {
		dst[i], dst[i+1], dst[i+2] = src[j+2], src[j+1], src[j]
	}
}

// adler32Combine is the Adler-32 of A followed by B, from their sums and
// B's length (the rule zlib's adler32_combine implements).
func adler32Combine(a, b uint32, lenB int) uint32 {
	const base = 65521
	rem := uint32(lenB % base)
	s1 := a & 0xffff
	s2 := (rem * s1) % base
	s1 += (b & 0xffff) + base - 1
	s2 += (a >> 16) + (b >> 16) + base - rem
	if s1 >= base {
		s1 -= base
	}
	if s1 >= base {
		s1 -= base
	}
	if s2 >= 2*base {
		s2 -= 2 * base
	}
	if s2 >= base {
		s2 -= base
	}
	return s1 | s2<<16
}

func writeChunk(buf *bytes.Buffer, typ string, data []byte) {
	var b [8]byte
	binary.BigEndian.PutUint32(b[:4], uint32(len(data)))
	copy(b[4:], typ)
	buf.Write(b[:])
	buf.Write(data)
	crc := crc32.NewIEEE()
	crc.Write(b[4:])
	crc.Write(data)
	binary.BigEndian.PutUint32(b[:4], crc.Sum32())
	buf.Write(b[:4])
}

// releaseBuffer returns an encodePNG buffer to the pool (very large ones
// are dropped, so one huge screen does not pin its memory).
func releaseBuffer(b *bytes.Buffer) {
	if b.Cap() <= 32<<20 {
		outBuffers.Put(b)
	}
}
