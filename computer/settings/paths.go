package settings

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
)

// Scope names a settings layer.
type Scope string

// The scopes, lowest first (see the package comment).
const (
	User    Scope = "user"
	Project Scope = "project"
	Local   Scope = "local"
	Flag    Scope = "flag"
	Policy  Scope = "policy"
)

// Scopes are the settings scopes, lowest first.
var Scopes = []Scope{User, Project, Local, Flag, Policy}

// Writable reports whether s is a scope [Set] and [Delete] write.
func (s Scope) Writable() bool { return s == User || s == Project || s == Local }

// ParseScope returns the scope named name.
func ParseScope(name string) (Scope, error) {
	for _, s := range Scopes {
		if string(s) == name {
			return s, nil
		}
	}
	return "", fmt.Errorf("unknown scope %q (user, project, local, flag or policy)", name)
}

// Paths are where a Computer's settings and derived files live.
type Paths struct {
	// UserDir is the user scope's directory: $XDG_CONFIG_HOME/a2c when
	// that is absolute, else ~/.config/a2c.
	UserDir string
	// SkillHome is where marketplaces, plugins and the derived files
	// live: $A2C_SKILL_HOME, else $XDG_DATA_HOME/a2c/skills (absolute),
	// else ~/.a2c/skills.
	SkillHome string
	// Cwd anchors the project and local scopes (<Cwd>/.tfrobot).
	Cwd string
	// ManagedDir is the policy scope's directory (on Linux
	// /etc/a2c-computer); tests point it elsewhere.
	ManagedDir string
	// FlagSettings is the flag scope's file (--settings), if any.
	FlagSettings string
}

// DefaultPaths are the paths for the environment getenv reads, the
// home directory home and the working directory cwd. A relative
// XDG_CONFIG_HOME or XDG_DATA_HOME is ignored, as the XDG rules say. A
// SkillHome that is a system directory is refused.
func DefaultPaths(getenv func(string) string, home, cwd string) (Paths, error) {
	if !filepath.IsAbs(home) || !filepath.IsAbs(cwd) {
		return Paths{}, errors.New("settings: the home and working directories must be absolute")
	}
	p := Paths{Cwd: filepath.Clean(cwd), ManagedDir: managedDir()}
	if x := getenv("XDG_CONFIG_HOME"); filepath.IsAbs(x) {
		p.UserDir = filepath.Join(x, "a2c")
	} else {
		p.UserDir = filepath.Join(home, ".config", "a2c")
	}
	switch x := getenv("A2C_SKILL_HOME"); {
	case x != "":
		p.SkillHome = x
	case filepath.IsAbs(getenv("XDG_DATA_HOME")):
		p.SkillHome = filepath.Join(getenv("XDG_DATA_HOME"), "a2c", "skills")
	default:
		p.SkillHome = filepath.Join(home, ".a2c", "skills")
	}
	if !filepath.IsAbs(p.SkillHome) {
		return Paths{}, fmt.Errorf("settings: A2C_SKILL_HOME %q is not an absolute path", p.SkillHome)
	}
	p.SkillHome = filepath.Clean(p.SkillHome)
	if systemDir(p.SkillHome) {
		return Paths{}, fmt.Errorf("settings: the SKILL home %s is a system directory", p.SkillHome)
	}
	return p, nil
}

// managedDir is the policy scope's directory on this system.
func managedDir() string {
	switch runtime.GOOS {
	case "darwin":
		return "/Library/Application Support/A2CComputer"
	case "windows":
		return `C:\Program Files\A2CComputer`
	}
	return "/etc/a2c-computer"
}

// systemDir reports whether dir is a system directory, or the root, that
// a SKILL home must never be (removing a marketplace deletes under it).
func systemDir(dir string) bool {
	switch dir {
	case "/", "/bin", "/boot", "/dev", "/etc", "/lib", "/lib64", "/opt", "/proc", "/root", "/run", "/sbin", "/srv", "/sys",
		"/tmp", "/usr", "/usr/bin", "/usr/lib", "/usr/local", "/usr/share", "/var", "/var/lib", "/home":
		return true
	}
	return false
}

// SettingsFile is scope s's settings file ("" for a flag scope not
// given, and for policy, which is a directory: see [Paths.PolicyFiles]).
func (p Paths) SettingsFile(s Scope) string {
	switch s {
	case User:
		return filepath.Join(p.UserDir, "settings.json")
	case Project:
		return filepath.Join(p.Cwd, ".tfrobot", "settings.json")
	case Local:
		return filepath.Join(p.Cwd, ".tfrobot", "settings.local.json")
	case Flag:
		return p.FlagSettings
	}
	return ""
}

// MCPFile is scope s's mcp.json ("" for flag and policy's own, which
// are given elsewhere).
func (p Paths) MCPFile(s Scope) string {
	switch s {
	case User:
		return filepath.Join(p.UserDir, "mcp.json")
	case Project:
		return filepath.Join(p.Cwd, ".tfrobot", "mcp.json")
	case Local:
		return filepath.Join(p.Cwd, ".tfrobot", "mcp.local.json")
	case Policy:
		return filepath.Join(p.ManagedDir, "managed-mcp.json")
	}
	return ""
}

// PolicyFiles are the policy scope's settings files, in merge order:
// managed-settings.json, then managed-settings.d/*.json by name. Those
// that do not exist are left out.
func (p Paths) PolicyFiles() []string {
	var out []string
	main := filepath.Join(p.ManagedDir, "managed-settings.json")
	if _, err := os.Stat(main); err == nil {
		out = append(out, main)
	}
	more, _ := filepath.Glob(filepath.Join(p.ManagedDir, "managed-settings.d", "*.json"))
	return append(out, more...) // Glob sorts
}

// CurrentPaths are the paths of this process: DefaultPaths for the
// environment getenv reads (HOME, else the account's home directory) and
// the working directory, with flagSettings (--settings; "" for none) as
// the flag scope's file, which must exist.
func CurrentPaths(getenv func(string) string, flagSettings string) (Paths, error) {
	home := getenv("HOME")
	if home == "" {
		h, err := os.UserHomeDir()
		if err != nil {
			return Paths{}, err
		}
		home = h
	}
	cwd, err := os.Getwd()
	if err != nil {
		return Paths{}, err
	}
	p, err := DefaultPaths(getenv, home, cwd)
	if err != nil {
		return Paths{}, err
	}
	if flagSettings != "" {
		if p.FlagSettings, err = filepath.Abs(flagSettings); err != nil {
			return Paths{}, err
		}
		if _, err := os.Stat(p.FlagSettings); err != nil {
			return Paths{}, fmt.Errorf("--settings %s: no such file", flagSettings)
		}
	}
	return p, nil
}
