package desktop

import (
	"bytes"
	"image"
	"image/png"
	"sync"
)

// The PNG encoder is set for speed: BestSpeed deflate (which also skips
// the per-row filter search) and its work buffers reused across
// screenshots, so a capture allocates little besides the X reply.
var (
	encBuffers encoderPool
	pngEncoder = png.Encoder{CompressionLevel: png.BestSpeed, BufferPool: &encBuffers}
	outBuffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}
)

type encoderPool struct{ p sync.Pool }

func (e *encoderPool) Get() *png.EncoderBuffer {
	b, _ := e.p.Get().(*png.EncoderBuffer)
	return b
}

func (e *encoderPool) Put(b *png.EncoderBuffer) { e.p.Put(b) }

// encodePNG encodes img into a pooled buffer; the caller hands it back
// with releaseBuffer once written.
func encodePNG(img image.Image) (*bytes.Buffer, error) {
	buf := outBuffers.Get().(*bytes.Buffer)
	buf.Reset()
	if err := pngEncoder.Encode(buf, img); err != nil {
		releaseBuffer(buf)
		return nil, err
	}
	return buf, nil
}

// releaseBuffer returns an encodePNG buffer to the pool (very large ones
// are dropped, so one huge screen does not pin its memory).
func releaseBuffer(b *bytes.Buffer) {
	if b.Cap() <= 32<<20 {
		outBuffers.Put(b)
	}
}
