package caddymodule

import (
	"encoding/json"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// adaptBearers runs the real Caddyfile adapter and returns the JSON of every
// palmgate_bearer handler of the http app, in the order they appear.
func adaptBearers(t *testing.T, caddyfile string) []json.RawMessage {
	t.Helper()
	raw, _, err := adaptAll(caddyfile)
	if err != nil {
		t.Fatalf("adapting: %v", err)
	}
	var cfg any
	if err := json.Unmarshal(raw, &cfg); err != nil {
		t.Fatal(err)
	}
	var found []json.RawMessage
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if v["handler"] == "palmgate_bearer" {
				b, _ := json.Marshal(v)
				found = append(found, b)
				return
			}
			keys := make([]string, 0, len(v))
			for k := range v {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			for _, k := range keys {
				walk(v[k])
			}
		case []any:
			for _, e := range v {
				walk(e)
			}
		}
	}
	walk(cfg)
	return found
}

// jsonPaths are the paths of every key of the JSON value v ("clients[].name").
func jsonPaths(v any, prefix string, into map[string]bool) {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			into[prefix+k] = true
			jsonPaths(e, prefix+k+".", into)
		}
	case []any:
		for _, e := range v {
			jsonPaths(e, strings.TrimSuffix(prefix, ".")+"[].", into)
		}
	}
}

// fieldPaths are the paths of every JSON field of type t, as jsonPaths names
// them, through its struct, pointer and slice fields.
func fieldPaths(t reflect.Type, prefix string, into map[string]bool) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if !f.IsExported() || name == "-" || name == "" {
			continue
		}
		into[prefix+name] = true
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		switch {
		case ft.Kind() == reflect.Struct:
			fieldPaths(ft, prefix+name+".", into)
		case ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct:
			fieldPaths(ft.Elem(), prefix+name+"[].", into)
		}
	}
}

// readJSONPaths are the key paths of the JSON files (each an object, or an array
// of objects whose keys are taken at the top).
func readJSONPaths(t *testing.T, files ...string) map[string]bool {
	t.Helper()
	paths := map[string]bool{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var v any
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if arr, ok := v.([]any); ok {
			for _, e := range arr {
				jsonPaths(e, "", paths)
			}
			continue
		}
		jsonPaths(v, "", paths)
	}
	return paths
}

// TestGoldenCoversEveryOption: the golden adapt test (TestCaddyfileGolden) pins
// every option of the palmgate app and of palmgate_bearer: each JSON field of App
// (and of what it holds) is set by testdata/full.caddyfile or postgres.caddyfile,
// and each field of Bearer by a palmgate_bearer block of full.caddyfile. A new
// option without a line there fails here.
func TestGoldenCoversEveryOption(t *testing.T) {
	for _, tc := range []struct {
		what  string
		typ   reflect.Type
		files []string
	}{
		{"the palmgate app", reflect.TypeOf(App{}), []string{"testdata/full.json", "testdata/postgres.json"}},
		{"palmgate_bearer", reflect.TypeOf(Bearer{}), []string{"testdata/full.bearer.json"}},
	} {
		want := map[string]bool{}
		fieldPaths(tc.typ, "", want)
		have := readJSONPaths(t, tc.files...)
		var missing []string
		for p := range want {
			if !have[p] {
				missing = append(missing, p)
			}
		}
		slices.Sort(missing)
		if len(missing) > 0 {
			t.Errorf("%s: options the golden Caddyfiles do not set (add them to testdata/*.caddyfile, then regenerate the JSON): %s",
				tc.what, strings.Join(missing, ", "))
		}
		for p := range have {
			if !want[p] && !strings.HasPrefix(p, "handler") {
				t.Errorf("%s: %s in %v is no field", tc.what, p, tc.files)
			}
		}
	}
}

// TestFullCaddyfileValidates: the golden full.caddyfile, the fuzz target's first
// seed, adapts into an App that decodes strictly and passes Validate, so the seed
// explores from a configuration that works rather than one refused at once.
func TestFullCaddyfileValidates(t *testing.T) {
	t.Setenv("DEMO_SECRET", "a-demo-secret-of-some-length") // client demo's {env.DEMO_SECRET}
	in, err := os.ReadFile("testdata/full.caddyfile")
	if err != nil {
		t.Fatal(err)
	}
	raw, err := adapt(t, string(in))
	if err != nil || raw == nil {
		t.Fatalf("adapting testdata/full.caddyfile: %v", err)
	}
	var app App
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&app); err != nil {
		t.Fatal(err)
	}
	app.setDefaults()
	if err := app.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
}
