package settings

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"time"
)

// DerivedHeader is the first line of every derived file in the SKILL
// home: they are the Computer's, never hand-edited. Read strips it.
const DerivedHeader = "// Maintained automatically by a2c-computer. DO NOT EDIT."

// The derived files, in the SKILL home.
const (
	KnownMarketplacesFile = "known_marketplaces.json"
	InstalledPluginsFile  = "installed_plugins.json"
	KeptServersFile       = "kept_servers.json"
)

// Marketplace is a known_marketplaces.json record: a marketplace's
// clone.
type Marketplace struct {
	Source          Source `json:"source"`
	InstallLocation string `json:"installLocation"` // absolute
	LastUpdated     string `json:"lastUpdated"`     // UTC, RFC 3339; moves only on a real clone or pull
	CommitSHA       string `json:"commitSha"`       // 40 hex
	AutoUpdate      bool   `json:"autoUpdate,omitempty"`
}

// Source is where a marketplace comes from: a git remote.
type Source struct {
	Type string `json:"type"` // "git"
	URL  string `json:"url"`
}

// KnownMarketplaces is known_marketplaces.json.
type KnownMarketplaces struct {
	Version      int                    `json:"version"`
	Marketplaces map[string]Marketplace `json:"marketplaces"`
}

// PluginRecord is an installed_plugins.json record: one scope's
// install of a plugin.
type PluginRecord struct {
	Scope       Scope  `json:"scope"`
	InstallPath string `json:"installPath"`
	ProjectPath string `json:"projectPath,omitempty"` // project and local only
	Version     string `json:"version"`
	CommitSHA   string `json:"commitSha"`
	InstalledAt string `json:"installedAt"`
	LastUpdated string `json:"lastUpdated"`
	// MCPServers are the bundle_ids of the servers the plugin brings,
	// always present (reclaim reads them, even once installPath is gone).
	MCPServers []string `json:"mcpServers"`
}

// InstalledPlugins is installed_plugins.json: each "<plugin>@<mp>"'s
// records, one per scope.
type InstalledPlugins struct {
	Version int                       `json:"version"`
	Plugins map[string][]PluginRecord `json:"plugins"`
}

// KeptServers is kept_servers.json: the bundle_ids `plugin uninstall
// --keep-servers` kept mounted in a running Computer. A boot removes it
// (kept servers last until the Computer ends).
type KeptServers struct {
	Version int      `json:"version"`
	Servers []string `json:"servers"`
}

// derivedVersion is the version the derived files are written with.
const derivedVersion = 1

// ReadDerived reads the derived file path into v (a pointer to
// [KnownMarketplaces], [InstalledPlugins] or [KeptServers]). A file that is not there
// leaves v as it is (empty). A file that cannot be parsed is set aside
// as <name>.corrupt-<UTC time>.bak and read as empty. A wrong version or
// an unknown key is logged (the next write makes the file right). It
// reports whether the file should be written again.
func ReadDerived(path string, v any, log *slog.Logger) (rewrite bool, err error) {
	b, err := ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("settings: %s: %w", path, err)
	}
	body := bytes.TrimPrefix(b, []byte(DerivedHeader))
	var probe map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&probe); err != nil || probe == nil || dec.More() || json.Unmarshal(body, v) != nil {
		aside := path + ".corrupt-" + time.Now().UTC().Format("20060102T150405Z") + ".bak"
		if err := os.Rename(path, aside); err != nil {
			return false, fmt.Errorf("settings: setting the corrupt %s aside: %w", path, err)
		}
		log.Warn("settings: a derived file was corrupt; set aside and read as empty", "file", path, "aside", aside)
		return true, nil
	}
	var ver int
	_ = json.Unmarshal(probe["version"], &ver)
	known := map[string]bool{"version": true, "marketplaces": true, "plugins": true, "servers": true}
	for k := range probe {
		if !known[k] {
			log.Warn("settings: a derived file has an unknown key; it will be written again without it", "file", path, "key", k)
			rewrite = true
		}
	}
	if ver != derivedVersion {
		log.Warn("settings: a derived file has another version; it will be written again", "file", path, "version", ver)
		rewrite = true
	}
	return rewrite, nil
}

// WriteDerived writes v to the derived file path, under its lock,
// atomically, with the header and version 1.
func WriteDerived(path string, v any) error {
	switch d := v.(type) {
	case *KnownMarketplaces:
		d.Version = derivedVersion
		if d.Marketplaces == nil {
			d.Marketplaces = map[string]Marketplace{}
		}
	case *InstalledPlugins:
		d.Version = derivedVersion
		if d.Plugins == nil {
			d.Plugins = map[string][]PluginRecord{}
		}
		for id, recs := range d.Plugins {
			for i := range recs {
				if recs[i].MCPServers == nil {
					d.Plugins[id][i].MCPServers = []string{}
				}
			}
		}
	case *KeptServers:
		d.Version = derivedVersion
		if d.Servers == nil {
			d.Servers = []string{}
		}
	default:
		return fmt.Errorf("settings: %T is not a derived file", v)
	}
	unlock, err := lockMaking(path)
	if err != nil {
		return err
	}
	defer unlock()
	return writeJSON(path, DerivedHeader, v)
}
