package caddymodule

import (
	"runtime/debug"
	"testing"
)

// TestVersionOf: palmgate's version comes from its module, whether it is the
// main module or a dependency (replaced or not), with the VCS settings for a
// development build.
func TestVersionOf(t *testing.T) {
	vcs := []debug.BuildSetting{{Key: "-trimpath", Value: "true"}, {Key: "vcs.revision", Value: "48c6a3f0"}, {Key: "vcs.modified", Value: "true"}}
	for _, c := range []struct {
		name string
		info debug.BuildInfo
		want string
	}{
		{"main module, tagged", debug.BuildInfo{Main: debug.Module{Path: modulePath, Version: "v1.4.0"}}, "v1.4.0"},
		{"main module, devel, vcs", debug.BuildInfo{Main: debug.Module{Path: modulePath, Version: "(devel)"}, Settings: vcs},
			"(devel) vcs.revision=48c6a3f0 vcs.modified=true"},
		{"main module, devel, no vcs", debug.BuildInfo{Main: debug.Module{Path: modulePath, Version: "(devel)"}}, "(devel)"},
		{"dependency (xcaddy)", debug.BuildInfo{Main: debug.Module{Path: "caddy", Version: "(devel)"}, Settings: vcs,
			Deps: []*debug.Module{{Path: "github.com/caddyserver/caddy/v2", Version: "v2.11.9"}, {Path: modulePath, Version: "v1.5.0"}}}, "v1.5.0"},
		{"dependency replaced by a tagged module", debug.BuildInfo{Main: debug.Module{Path: "caddy"},
			Deps: []*debug.Module{{Path: modulePath, Version: "v1.5.0", Replace: &debug.Module{Path: "example.com/fork", Version: "v1.5.1"}}}}, "v1.5.1"},
		{"dependency replaced by a local tree", debug.BuildInfo{Main: debug.Module{Path: "caddy"},
			Deps: []*debug.Module{{Path: modulePath, Version: "v1.5.0", Replace: &debug.Module{Path: "../palmgate"}}}}, "(devel)"},
		{"dependency replaced by a local tree, vcs of the main module", debug.BuildInfo{Main: debug.Module{Path: "caddy"}, Settings: vcs,
			Deps: []*debug.Module{{Path: modulePath, Version: "v1.5.0", Replace: &debug.Module{Path: "../palmgate"}}}}, "(devel)"},
	} {
		if got := versionOf(&c.info); got != c.want {
			t.Errorf("%s: versionOf = %q, want %q", c.name, got, c.want)
		}
	}
}
