package caddymodule

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/palmgate/palmgate/internal/brand"
)

// TestCaddyfileBrand: the brand block adapts to the JSON `brand` object, and each
// malformed one is refused at adapt time naming what is wrong.
func TestCaddyfileBrand(t *testing.T) {
	raw, err := adapt(t, "{\n\tpalmgate {\n\t\tbrand {\n\t\t\tname \"Acme ID\"\n\t\t\tlogo_url https://acme.example/logo.svg\n\t\t\tcolor \"#0b5fff\"\n\t\t}\n\t}\n}\n:8080 {\n\tpalmgate\n}\n")
	if err != nil {
		t.Fatalf("adapting the brand: %v", err)
	}
	var got struct {
		Brand brand.Brand `json:"brand"`
	}
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	if want := (brand.Brand{Name: "Acme ID", LogoURL: "https://acme.example/logo.svg", Color: "#0b5fff"}); got.Brand != want {
		t.Errorf("brand = %+v, want %+v", got.Brand, want)
	}
	for _, tc := range []struct{ name, block, want string }{
		{"with an argument", "brand acme", "brand: expected a block"},
		{"unknown option", "brand {\n\tfont Comic\n}", `brand: unknown option "font"`},
		{"name twice", "brand {\n\tname a\n\tname b\n}", "brand: name given twice"},
		{"name without value", "brand {\n\tname\n}", "name: expected one argument"},
		{"color with two values", "brand {\n\tcolor \"#fff\" red\n}", "color: expected one argument"},
		{"empty name", "brand {\n\tname \"\"\n}", "brand: name must not be empty"},
		{"unquoted colour", "brand {\n\tcolor #0b5fff\n}", `brand: color needs its value quoted, as # starts a comment: color "#0b5fff"`}, // fourth review
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := adapt(t, "{\n\tpalmgate {\n\t\t"+tc.block+"\n\t}\n}\n:8080 {\n\tpalmgate\n}\n")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error = %v, want one naming %q", err, tc.want)
			}
		})
	}
}

// TestValidateBrand: a brand that could inject markup or CSS, or load a logo
// over plain http from the network, is refused by Validate (JSON configs too),
// each error naming brand and the field; http on loopback, or in dev, is fine.
func TestValidateBrand(t *testing.T) {
	valid := func(b brand.Brand) *App {
		a := &App{Issuer: "https://id.example.com", PalmAttestors: []PalmAttestor{{Name: "engine", PublicKey: "k"}}, Brand: &b}
		a.setDefaults()
		return a
	}
	for _, tc := range []struct {
		name string
		b    brand.Brand
		want string
	}{
		{"colour with CSS", brand.Brand{Color: "#fff;background:url(https://evil.example/x)"}, "brand: color"},
		{"colour by name", brand.Brand{Color: "red"}, "brand: color"},
		{"colour closing the style", brand.Brand{Color: "#fff}</style><script>"}, "brand: color"},
		{"colour of five digits", brand.Brand{Color: "#12345"}, "brand: color"},
		{"name too long", brand.Brand{Name: strings.Repeat("x", brand.MaxNameRunes+1)}, "brand: name"},
		{"name with a newline", brand.Brand{Name: "Acme\nID"}, "brand: name"},
		{"name with a control character", brand.Brand{Name: "Acme\x1bID"}, "brand: name"},
		{"name of invalid UTF-8", brand.Brand{Name: "Acme \xff"}, "brand: name"},
		{"name with spaces around", brand.Brand{Name: " Acme"}, "brand: name"},
		{"logo over http", brand.Brand{LogoURL: "http://acme.example/logo.svg"}, "brand: logo_url"},
		{"logo relative", brand.Brand{LogoURL: "/logo.svg"}, "brand: logo_url"},
		{"logo javascript", brand.Brand{LogoURL: "javascript:alert(1)"}, "brand: logo_url"},
		{"logo data", brand.Brand{LogoURL: "data:image/svg+xml,<svg/>"}, "brand: logo_url"},
		{"logo with credentials", brand.Brand{LogoURL: "https://u:p@acme.example/logo.svg"}, "brand: logo_url"},
		{"logo with a quote", brand.Brand{LogoURL: "https://acme.example/a'b.svg"}, "brand: logo_url"},
		{"logo with a semicolon", brand.Brand{LogoURL: "https://acme.example/a;b.svg"}, "brand: logo_url"},
		{"logo too long", brand.Brand{LogoURL: "https://acme.example/" + strings.Repeat("a", brand.MaxLogoURLBytes)}, "brand: logo_url"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := valid(tc.b).Validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate() = %v, want an error naming %q", err, tc.want)
			}
		})
	}
	for _, b := range []brand.Brand{
		{Name: "Acme ID · Société", LogoURL: "https://cdn.acme.example:8443/logo.svg?v=2", Color: "#0B5FFF"},
		{Color: "#05f"},
		{LogoURL: "http://127.0.0.1:9000/logo.png"},
		{LogoURL: "http://localhost/logo.png"},
	} {
		if err := valid(b).Validate(); err != nil {
			t.Errorf("brand %+v refused: %v", b, err)
		}
	}
	a := valid(brand.Brand{LogoURL: "http://dev.internal/logo.png"})
	a.Dev = true
	if err := a.Validate(); err != nil {
		t.Errorf("an http logo in dev refused: %v", err)
	}
}
