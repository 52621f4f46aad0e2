package caddymodule

import (
	"runtime/debug"
	"strings"
	"sync"
)

// modulePath is palmgate's Go module.
const modulePath = "github.com/palmgate/palmgate"

// Version is palmgate's version, as the binary's build information records it:
// the version of the palmgate module the binary was built with (such as v1.2.0,
// or a pseudo-version), or "(devel)" for a build of palmgate's own source tree,
// with the commit and whether the tree was modified when the build recorded
// them (vcs.revision=… vcs.modified=…). `caddy palmgate version` prints it, the app logs it at start and the
// admin API's stats and health probes show it.
var Version = sync.OnceValue(func() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown (no build information)"
	}
	return versionOf(info)
})

// versionOf is Version for info: the palmgate module's version if it is a
// dependency of the binary (what xcaddy builds), else the main module's (what
// `go build ./cmd/caddy` in palmgate's tree builds).
func versionOf(info *debug.BuildInfo) string {
	version := ""
	if info.Main.Path == modulePath {
		version = info.Main.Version
	} else {
		for _, dep := range info.Deps {
			if dep.Path != modulePath {
				continue
			}
			version = dep.Version
			if dep.Replace != nil { // a replace directive: a local tree has no version
				version = dep.Replace.Version
			}
			break
		}
	}
	if version != "" && version != "(devel)" {
		return version
	}
	parts := []string{"(devel)"}
	if info.Main.Path != modulePath {
		return parts[0] // the VCS settings are of another module's tree
	}
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			parts = append(parts, "vcs.revision="+s.Value)
		case "vcs.modified":
			parts = append(parts, "vcs.modified="+s.Value)
		}
	}
	return strings.Join(parts, " ")
}
