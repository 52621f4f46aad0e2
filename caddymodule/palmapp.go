package caddymodule

import (
	"fmt"
	"net/url"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

// parsePalmAppURL reads `palm_app_url <url>`: where a person gets the palm app.
func parsePalmAppURL(d *caddyfile.Dispenser, target *string) error {
	args := d.RemainingArgs()
	if len(args) != 1 {
		return d.Errf("palm_app_url: expected `palm_app_url <url>` (where a person gets the palm app), got %d arguments", len(args))
	}
	*target = args[0]
	return nil
}

// validatePalmAppURL checks palm_app_url: an absolute https URL (http in dev
// mode), since the page of a phone without the app links to it.
func (a *App) validatePalmAppURL() error {
	if a.PalmAppURL == "" {
		return nil
	}
	u, err := url.Parse(a.PalmAppURL)
	if err != nil || u.Host == "" || u.User != nil || (u.Scheme != "https" && (u.Scheme != "http" || !a.Dev)) {
		return fmt.Errorf("palm_app_url: must be an absolute https URL (where a person gets the palm app), got %q", a.PalmAppURL)
	}
	return nil
}
