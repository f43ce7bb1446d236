package skill

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// writer writes the files of one package being staged, enforcing the
// limits and the path rules, and keeps a digest of what it wrote.
type writer struct {
	root   string
	limits Limits
	total  int64
	files  int
	sums   map[string]string // rel -> sha256 of content
}

func (w *writer) count() error {
	if w.files++; w.files > w.limits.MaxFiles {
		return fmt.Errorf("more than %d files", w.limits.MaxFiles)
	}
	return nil
}

func (w *writer) dir(rel string) error {
	clean, err := safeRel(rel)
	if err != nil {
		return err
	}
	if err := w.count(); err != nil {
		return err
	}
	return os.MkdirAll(filepath.Join(w.root, filepath.FromSlash(clean)), 0o755)
}

// file writes data at rel (a second write of one path replaces it).
func (w *writer) file(rel string, data []byte, mode fs.FileMode) error {
	return w.copy(rel, bytes.NewReader(data), mode)
}

// copy writes what r yields at rel, within the file and total limits.
func (w *writer) copy(rel string, r io.Reader, mode fs.FileMode) error {
	clean, err := safeRel(rel)
	if err != nil {
		return err
	}
	if err := w.count(); err != nil {
		return err
	}
	dst := filepath.Join(w.root, filepath.FromSlash(clean))
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	// The parent must still lie inside the package (no earlier entry may
	// have made a link on the way; none can, but check the invariant).
	if real, err := filepath.EvalSymlinks(filepath.Dir(dst)); err != nil || !within(w.root, real) {
		return fmt.Errorf("path %q leaves the package", rel)
	}
	f, err := os.OpenFile(dst, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, mode.Perm()|0o600)
	if err != nil {
		return err
	}
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(f, h), io.LimitReader(r, w.limits.MaxFile+1))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", clean, err)
	}
	if n > w.limits.MaxFile {
		return fmt.Errorf("file %s is larger than %d bytes", clean, w.limits.MaxFile)
	}
	if w.total += n; w.total > w.limits.MaxTotal {
		return fmt.Errorf("package is larger than %d bytes", w.limits.MaxTotal)
	}
	if w.sums == nil {
		w.sums = map[string]string{}
	}
	w.sums[clean] = hex.EncodeToString(h.Sum(nil))
	return nil
}

// digest is a sha256 over the paths and contents written.
func (w *writer) digest() string {
	keys := make([]string, 0, len(w.sums))
	for k := range w.sums {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	h := sha256.New()
	for _, k := range keys {
		fmt.Fprintf(h, "%s\x00%s\n", k, w.sums[k])
	}
	return hex.EncodeToString(h.Sum(nil))
}

// mounted is mode A: copy the directory _meta.mount_dir (absolute, on
// this host; a server not on this host is refused, see
// [MCPSource.SameHost]) into the staging folder. The package is copied rather than
// linked, so that it stays whole and inside the staging folder; symbolic
// links inside mount_dir are not followed (skipped, with a warning).
func (m *MCPSource) mounted(r Root, w *writer) error {
	if !m.SameHost {
		return errors.New("mode mounted: only a server on this host may mount a folder")
	}
	dir, _ := r.Meta["mount_dir"].(string)
	if dir == "" || !filepath.IsAbs(dir) {
		return errors.New("mode mounted: mount_dir is missing or not an absolute path")
	}
	src := filepath.Clean(dir)
	if st, err := os.Stat(src); err != nil || !st.IsDir() {
		return fmt.Errorf("mode mounted: mount_dir %s is not a directory", src)
	}
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == src {
			return nil
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			m.log.Warn("skill: mode mounted: symbolic link not copied", "bundle_id", m.BundleID, "uri", r.URI, "path", rel)
			return nil
		case d.IsDir():
			return w.dir(rel)
		case !d.Type().IsRegular():
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		return w.copy(rel, f, info.Mode())
	})
}

// archive is mode B: download _meta.archive_uri (http or https, within
// the download limit and timeout), check _meta.archive_sha256 when
// given, and unpack it (tar.gz or zip). Entries that are links, that
// leave the package or that exceed a limit fail the whole skill.
func (m *MCPSource) archive(ctx context.Context, r Root, w *writer) error {
	uri, _ := r.Meta["archive_uri"].(string)
	format, _ := r.Meta["archive_format"].(string)
	if format != "tar.gz" && format != "zip" {
		return fmt.Errorf("mode archive: archive_format must be tar.gz or zip, not %q", format)
	}
	if !strings.HasPrefix(uri, "http://") && !strings.HasPrefix(uri, "https://") {
		return errors.New("mode archive: archive_uri must be an http or https URL")
	}
	cctx, cancel := context.WithTimeout(ctx, m.limits.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(cctx, http.MethodGet, uri, nil)
	if err != nil {
		return errors.New("mode archive: archive_uri is not a valid URL")
	}
	resp, err := m.client.Do(req)
	if err != nil {
		return fmt.Errorf("mode archive: download failed: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("mode archive: download answered HTTP %d", resp.StatusCode)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, m.limits.MaxDownload+1))
	if err != nil {
		return fmt.Errorf("mode archive: download failed: %w", err)
	}
	if int64(len(data)) > m.limits.MaxDownload {
		return fmt.Errorf("mode archive: archive larger than %d bytes", m.limits.MaxDownload)
	}
	if want, _ := r.Meta["archive_sha256"].(string); want != "" {
		sum := sha256.Sum256(data)
		if !strings.EqualFold(hex.EncodeToString(sum[:]), want) {
			return errors.New("mode archive: archive_sha256 does not match the download")
		}
	}
	if format == "zip" {
		return unzip(data, w)
	}
	return untar(data, w)
}

func untar(data []byte, w *writer) error {
	gz, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("mode archive: not gzip: %w", err)
	}
	defer gz.Close()
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("mode archive: bad tar: %w", err)
		}
		name := strings.TrimPrefix(h.Name, "./")
		switch h.Typeflag {
		case tar.TypeDir:
			if name = strings.TrimSuffix(name, "/"); name == "" || name == "." {
				continue
			}
			if err := w.dir(name); err != nil {
				return fmt.Errorf("mode archive: %w", err)
			}
		case tar.TypeReg:
			if err := w.copy(name, tr, h.FileInfo().Mode()); err != nil {
				return fmt.Errorf("mode archive: %w", err)
			}
		case tar.TypeXGlobalHeader, tar.TypeXHeader:
		default:
			return fmt.Errorf("mode archive: entry %q is a link or special file", h.Name)
		}
	}
}

func unzip(data []byte, w *writer) error {
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return fmt.Errorf("mode archive: bad zip: %w", err)
	}
	if len(zr.File) > w.limits.MaxFiles {
		return fmt.Errorf("mode archive: more than %d entries", w.limits.MaxFiles)
	}
	for _, f := range zr.File {
		name := strings.TrimPrefix(f.Name, "./")
		mode := f.Mode()
		switch {
		case mode&fs.ModeSymlink != 0 || (!mode.IsRegular() && !mode.IsDir()):
			return fmt.Errorf("mode archive: entry %q is a link or special file", f.Name)
		case mode.IsDir() || strings.HasSuffix(name, "/"):
			if name = strings.TrimSuffix(name, "/"); name == "" || name == "." {
				continue
			}
			if err := w.dir(name); err != nil {
				return fmt.Errorf("mode archive: %w", err)
			}
			continue
		}
		rc, err := f.Open()
		if err != nil {
			return fmt.Errorf("mode archive: %w", err)
		}
		err = w.copy(name, rc, mode)
		rc.Close()
		if err != nil {
			return fmt.Errorf("mode archive: %w", err)
		}
	}
	return nil
}
