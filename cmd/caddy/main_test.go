package main

import (
	"encoding/json"
	"os"
	"testing"

	"golang.org/x/mod/modfile"
)

// TestXcaddyRecipeMatchesGoMod keeps xcaddy.json's Caddy version equal to the one
// go.mod builds with, so that xcaddy users get the Caddy the tests ran against.
func TestXcaddyRecipeMatchesGoMod(t *testing.T) {
	raw, err := os.ReadFile("../../xcaddy.json")
	if err != nil {
		t.Fatal(err)
	}
	var recipe struct {
		CaddyVersion string `json:"caddy_version"`
		Plugins      []struct {
			ModulePath string `json:"module_path"`
		} `json:"plugins"`
	}
	if err := json.Unmarshal(raw, &recipe); err != nil {
		t.Fatalf("xcaddy.json: %v", err)
	}
	gomod, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	mf, err := modfile.Parse("go.mod", gomod, nil)
	if err != nil {
		t.Fatal(err)
	}
	var caddyVersion string
	for _, r := range mf.Require {
		if r.Mod.Path == "github.com/caddyserver/caddy/v2" {
			caddyVersion = r.Mod.Version
		}
	}
	if caddyVersion == "" || recipe.CaddyVersion != caddyVersion {
		t.Errorf("xcaddy.json caddy_version = %q, go.mod requires %q", recipe.CaddyVersion, caddyVersion)
	}
	if len(recipe.Plugins) != 1 || recipe.Plugins[0].ModulePath != mf.Module.Mod.Path+"/caddymodule" {
		t.Errorf("xcaddy.json plugins = %+v, want the one plugin %s/caddymodule", recipe.Plugins, mf.Module.Mod.Path)
	}
}
