package settings

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
)

// Layer is one scope's settings as read and checked.
type Layer struct {
	Scope Scope
	// Files are the files it was read from (policy may have several).
	Files []string
	// Values are what is left once bad keys and items are dropped
	// (unknown keys included).
	Values map[string]any
	// Committed is set for a local scope whose file git tracks: it is
	// read as the project's, and vouches for nothing (see committed.go).
	Committed bool
}

// Merged is every layer and their merge.
type Merged struct {
	Layers []Layer        // lowest first
	Values map[string]any // the merge (see the package comment)
	Errors []Error        // every layer's, in scope order
}

// Load reads every scope's settings from p, checks and merges them. Its
// error is for what makes the settings unreadable as a whole (none of a
// layer's own problems is: they are Merged.Errors).
func Load(p Paths) (*Merged, error) {
	m := &Merged{Values: map[string]any{}}
	for _, s := range Scopes {
		var files []string
		if s == Policy {
			files = p.PolicyFiles()
		} else if f := p.SettingsFile(s); f != "" {
			files = []string{f}
		}
		l := Layer{Scope: s, Values: map[string]any{}}
		for _, f := range files {
			v, err := readObject(f)
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			l.Files = append(l.Files, f)
			if err != nil {
				m.Errors = append(m.Errors, Error{Scope: s, Field: "<file>", Reason: err.Error(), SourcePath: f})
				continue
			}
			as := s
			if s == Local && gitTracked(f) {
				// A committed "local" file is the repository's.
				l.Committed, as = true, Project
				m.Errors = append(m.Errors, Error{Scope: s, Field: "<file>", Reason: "git tracks this file: it is read as the project's settings (keep it git-ignored)", SourcePath: f})
			}
			errs := checkLayer(as, f, v)
			for i := range errs {
				errs[i].Scope = s
			}
			m.Errors = append(m.Errors, errs...)
			merge(l.Values, v)
		}
		m.Layers = append(m.Layers, l)
		merge(m.Values, clone(l.Values))
	}
	return m, nil
}

// Layer returns scope s's layer.
func (m *Merged) Layer(s Scope) Layer {
	for _, l := range m.Layers {
		if l.Scope == s {
			return l
		}
	}
	return Layer{Scope: s, Values: map[string]any{}}
}

// readObject reads a JSON object from path. An error that is not
// fs.ErrNotExist says why it is not one (its text is the Error's
// reason: no Go error text beyond it).
func readObject(path string) (map[string]any, error) {
	b, err := ReadFile(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		return nil, errors.New("cannot be read")
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return map[string]any{}, nil
	}
	var v map[string]any
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber() // a number is written back as it was read, whatever its size
	if err := d.Decode(&v); err != nil || v == nil || d.More() {
		return nil, fmt.Errorf("not a JSON object: the layer is left out, the file untouched")
	}
	return v, nil
}

// merge merges src into dst, src being the higher: objects key by key,
// lists concatenated without duplicates (dst's first), any other value
// src's.
func merge(dst, src map[string]any) {
	for k, v := range src {
		switch sv := v.(type) {
		case map[string]any:
			if dv, ok := dst[k].(map[string]any); ok {
				merge(dv, sv)
				continue
			}
		case []any:
			if dv, ok := dst[k].([]any); ok {
				dst[k] = concat(dv, sv)
				continue
			}
		}
		dst[k] = v
	}
}

// concat is a then b without duplicates (by their JSON form).
func concat(a, b []any) []any {
	seen := map[string]bool{}
	out := make([]any, 0, len(a)+len(b))
	for _, x := range append(append([]any{}, a...), b...) {
		k, _ := json.Marshal(x)
		if seen[string(k)] {
			continue
		}
		seen[string(k)] = true
		out = append(out, x)
	}
	return out
}

// clone is a deep copy of a decoded JSON object.
func clone(m map[string]any) map[string]any {
	b, _ := json.Marshal(m)
	var out map[string]any
	_ = json.Unmarshal(b, &out)
	if out == nil {
		out = map[string]any{}
	}
	return out
}
