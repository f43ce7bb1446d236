package market

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/a2c-smcp/a2c-go/computer/settings"
)

// CatalogFile is a marketplace's catalog, relative to its repository.
const CatalogFile = ".tfrobot-plugin/marketplace.json"

// Catalog is a marketplace's marketplace.json, as far as the Computer
// reads it.
type Catalog struct {
	Name     string `json:"name"`
	Metadata struct {
		PluginRoot string `json:"pluginRoot"`
	} `json:"metadata"`
	Plugins []Entry `json:"plugins"`
}

// Entry is one plugin of a catalog.
type Entry struct {
	Name        string          `json:"name"`
	Source      json.RawMessage `json:"source"`
	Description string          `json:"description,omitempty"`
	Version     string          `json:"version,omitempty"`
	Strict      *bool           `json:"strict,omitempty"`
}

// ReadCatalog reads the catalog of the marketplace cloned at dir.
func ReadCatalog(dir string) (*Catalog, error) {
	b, err := settings.ReadFile(filepath.Join(dir, CatalogFile))
	if err != nil {
		return nil, fmt.Errorf("the catalog %s cannot be read", CatalogFile)
	}
	var c Catalog
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("the catalog %s is not valid JSON", CatalogFile)
	}
	return &c, nil
}

// localDir is entry's directory inside the clone at dir when its source
// is relative ("./dir", or a bare name under pluginRoot), else "".
func (c *Catalog) localDir(dir string, e Entry) string {
	var s string
	if json.Unmarshal(e.Source, &s) != nil || s == "" {
		return ""
	}
	rel := s
	if !strings.HasPrefix(s, "./") {
		root := c.Metadata.PluginRoot
		if root == "" {
			root = "./plugins"
		}
		rel = filepath.Join(root, s)
	}
	clean := filepath.Clean(rel)
	if filepath.IsAbs(clean) || clean == ".." || strings.HasPrefix(clean, "../") {
		return "" // never outside the clone
	}
	return filepath.Join(dir, clean)
}

// SkillCount counts the skills the catalog's local plugins bring, as an
// enabled plugin's are served (PluginSkills: one level below skills/, a
// skill without a description left out).
func (c *Catalog) SkillCount(dir string) int {
	n := 0
	for _, e := range c.Plugins {
		if pd := c.localDir(dir, e); pd != "" {
			n += len(PluginSkills(pd, e.Name+"@"+c.Name, "", "", nil))
		}
	}
	return n
}
