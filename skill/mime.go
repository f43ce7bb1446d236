package skill

import (
	"path"
	"strings"
)

// DefaultMIME is the type of a file whose extension the built-in map does
// not know (or that has none): binary, so it is served by handle.
const DefaultMIME = "application/octet-stream"

// mimeByExt is the built-in extension map. It never consults the host's
// MIME registry, so the answer is the same on every machine. Its rows are
// the seven the specification requires plus common binary types; they
// are the rows of the reference Python SDK, so that both SDKs give one
// file the same mime_type. Any other extension is [DefaultMIME].
var mimeByExt = map[string]string{
	// The specification's minimum map (skill.md §6.4).
	".md":       "text/markdown",
	".markdown": "text/markdown",
	".txt":      "text/plain",
	".json":     "application/json",
	".xml":      "application/xml",
	".yaml":     "application/yaml",
	".yml":      "application/yaml",
	".toml":     "application/toml",
	".rst":      "text/x-rst",
	// Common binary types (and SVG, which is XML text).
	".png":   "image/png",
	".jpg":   "image/jpeg",
	".jpeg":  "image/jpeg",
	".gif":   "image/gif",
	".webp":  "image/webp",
	".bmp":   "image/bmp",
	".ico":   "image/vnd.microsoft.icon",
	".svg":   "image/svg+xml",
	".pdf":   "application/pdf",
	".zip":   "application/zip",
	".gz":    "application/gzip",
	".tar":   "application/x-tar",
	".wasm":  "application/wasm",
	".woff":  "font/woff",
	".woff2": "font/woff2",
	".ttf":   "font/ttf",
	".otf":   "font/otf",
	".mp3":   "audio/mpeg",
	".wav":   "audio/wav",
	".mp4":   "video/mp4",
	".webm":  "video/webm",
}

// MIMEType returns the media type of a file from the extension of the
// last element of its POSIX path, compared without regard to case.
func MIMEType(p string) string {
	if t, ok := mimeByExt[strings.ToLower(path.Ext(p))]; ok {
		return t
	}
	return DefaultMIME
}

// textEssences are the application/* types the specification counts as
// text.
var textEssences = map[string]bool{
	"application/json": true, "application/xml": true, "application/yaml": true,
	"application/toml": true, "application/javascript": true,
}

// IsText is the specification's text predicate: the top-level type is
// text, or the structured-syntax suffix is +json, +xml or +yaml, or the
// essence is application/json, xml, yaml, toml or javascript. Parameters
// after ';' are ignored, and so is case.
func IsText(mime string) bool {
	essence, _, _ := strings.Cut(mime, ";")
	essence = strings.ToLower(strings.TrimSpace(essence))
	return strings.HasPrefix(essence, "text/") || strings.HasSuffix(essence, "+json") ||
		strings.HasSuffix(essence, "+xml") || strings.HasSuffix(essence, "+yaml") || textEssences[essence]
}
