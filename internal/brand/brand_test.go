package brand

import "testing"

// TestImgSrcAndAccent: the CSP source is the logo's origin alone (no path, no
// query), the accent rule exists only for a valid colour, and the zero Brand is
// palmgate's own.
func TestImgSrcAndAccent(t *testing.T) {
	b := Brand{Name: "Acme", LogoURL: "https://cdn.acme.example:8443/img/logo.svg?v=2", Color: "#0b5fff"}
	if got := b.ImgSrc(); got != "https://cdn.acme.example:8443" {
		t.Errorf("ImgSrc = %q, want the origin", got)
	}
	if got := b.WithImgSrc("data:"); got != "data: https://cdn.acme.example:8443" {
		t.Errorf("WithImgSrc = %q", got)
	}
	if got := b.AccentCSS(); got != ":root{--accent:#0b5fff}" {
		t.Errorf("AccentCSS = %q", got)
	}
	if got := (Brand{Color: "red;x:y"}).AccentCSS(); got != "" {
		t.Errorf("AccentCSS of an invalid colour = %q, want none", got)
	}
	var zero Brand
	if zero.DisplayName() != "palmgate" || zero.ImgSrc() != "" || zero.WithImgSrc("") != "" || zero.AccentCSS() != "" || zero.Validate(false) != nil {
		t.Error("the zero Brand is not palmgate's own")
	}
}
