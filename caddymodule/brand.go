package caddymodule

import (
	"fmt"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/palmgate/palmgate/internal/brand"
)

// parseBrand reads
//
//	brand {
//		name <display name>
//		logo_url <https URL>
//		color <#rrggbb>
//	}
func parseBrand(d *caddyfile.Dispenser) (*brand.Brand, error) {
	if d.NextArg() {
		return nil, d.Errf("brand: expected a block `brand { name ...; logo_url ...; color ... }`, got %q", d.Val())
	}
	b := &brand.Brand{}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		option := d.Val()
		var target *string
		switch option {
		case "name":
			target = &b.Name
		case "logo_url":
			target = &b.LogoURL
		case "color":
			target = &b.Color
		default:
			return nil, d.Errf("brand: unknown option %q (name, logo_url or color)", option)
		}
		if *target != "" {
			return nil, d.Errf("brand: %s given twice", option)
		}
		if option == "color" && d.CountRemainingArgs() == 0 { // the lexer dropped `#0b5fff` as a comment
			return nil, d.Errf(`brand: color needs its value quoted, as # starts a comment: color "#0b5fff"`)
		}
		if err := singleArg(d, target); err != nil {
			return nil, err
		}
		if *target == "" {
			return nil, d.Errf("brand: %s must not be empty", option)
		}
	}
	return b, nil
}

// brand is the configured brand, or palmgate's own.
func (a *App) brand() brand.Brand {
	if a.Brand == nil {
		return brand.Brand{}
	}
	return *a.Brand
}

// validateBrand checks the brand: an http logo only on a loopback host or in dev
// mode.
func (a *App) validateBrand() error {
	if a.Brand == nil {
		return nil
	}
	if err := a.Brand.Validate(a.Dev); err != nil {
		return fmt.Errorf("brand: %w", err)
	}
	return nil
}
