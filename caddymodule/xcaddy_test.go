package caddymodule_test

import (
	"encoding/json"
	"os/exec"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"

	// Only what xcaddy.json names, as `xcaddy build --with` would import it.
	_ "github.com/palmgate/palmgate/caddymodule"
	"github.com/palmgate/palmgate/internal/testserver"
)

// TestXcaddyBuildsEveryModule: importing the plugin package xcaddy.json names
// registers every palmgate module that bin/caddy (go build ./cmd/caddy) lists, so
// `xcaddy build --with github.com/palmgate/palmgate/caddymodule` builds a Caddy
// that runs Caddyfile.example (palmgate_demo included).
func TestXcaddyBuildsEveryModule(t *testing.T) {
	var ours []string
	for _, id := range caddy.Modules() {
		info, err := caddy.GetModule(id)
		if err != nil {
			t.Fatal(err)
		}
		typ := reflect.TypeOf(info.New())
		for typ.Kind() == reflect.Pointer {
			typ = typ.Elem()
		}
		if strings.HasPrefix(typ.PkgPath(), "github.com/palmgate/palmgate/") {
			ours = append(ours, id)
		}
	}
	out, err := exec.Command(testserver.Binary(t), "list-modules", "--skip-standard", "--json").Output()
	if err != nil {
		t.Fatalf("caddy list-modules: %v", err)
	}
	var listed []struct {
		Name string `json:"module_name"`
	}
	if err := json.Unmarshal(out, &listed); err != nil {
		t.Fatalf("caddy list-modules --json: %v\n%s", err, out)
	}
	var binary []string
	for _, m := range listed {
		binary = append(binary, m.Name)
	}
	slices.Sort(ours)
	slices.Sort(binary)
	if !slices.Equal(ours, binary) || !slices.Contains(ours, "http.handlers.palmgate_demo") {
		t.Errorf("modules registered by importing caddymodule: %v\nnon-standard modules of bin/caddy: %v\nwant the same, palmgate_demo included", ours, binary)
	}
}
