package caddymodule

import (
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"

	"github.com/palmgate/palmgate/core/oidc"
)

func init() {
	httpcaddyfile.RegisterGlobalOption("palmgate", parseGlobalOption)
}

// parseGlobalOption turns the `palmgate { ... }` global option into the palmgate app.
func parseGlobalOption(d *caddyfile.Dispenser, existing any) (any, error) {
	if existing != nil {
		return nil, d.Err("palmgate: the global option is given twice")
	}
	var app App
	if err := app.UnmarshalCaddyfile(d); err != nil {
		return nil, err
	}
	return httpcaddyfile.App{Name: "palmgate", Value: caddyconfig.JSON(app, nil)}, nil
}

// UnmarshalCaddyfile sets up the app from the global option:
//
//	palmgate {
//		issuer <url>
//		storage badger <path>
//		storage postgres <dsn> { max_conns <n>; statement_timeout <d>; connect_timeout <d>; group_commits on|off }
//		dev
//		palm_attestor <name> <public key, base64 DER SPKI>
//		pairwise_secret <secret>
//		access_token_ttl <duration>
//		refresh_token_ttl <duration>
//		auth_code_ttl <duration>
//		login_ttl <duration>
//		rate_limit <requests> <window> | off
//		registration_session_ttl <duration>
//		challenge_max_age <duration>
//		sso_session <duration> | off
//		max_pending_logins <n> | off [{ per_network <n> | off }]
//		max_pending_registrations <n> | off [{ per_network <n> | off }]
//		client <client_id> {
//			secret <secret> | secret_hash <encoded hash> | public
//			allowed_origins <origin> [<origin>...]
//			redirect_uri <uri> [<uri>...]
//			post_logout_redirect_uri <uri> [<uri>...]
//			backchannel_logout_uri <url>
//			name <display name>
//			sector <id>
//			scopes <scope> [<scope>...]
//			resources <uri> [<uri>...]
//			id_token_signed_response_alg RS256 | ES256 | EdDSA
//			access_token_audience base_url | client_id | both
//		}
//		portal off | portal { max_applications <n> }
//		palm_app_url <url>
//		key_rotation <duration> | off
//		registration open | off [{ max_clients <n>|off; per_network <n>|off; unused <duration> }]
//		client_metadata_documents on | off [{ allow_private }]
//		resources <uri> [<uri>...]
//		brand { name <name>; logo_url <url>; color <#hex> }
//	}
func (a *App) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // option name
	if d.NextArg() {
		return d.ArgErr()
	}
	durations := map[string]*caddy.Duration{
		"access_token_ttl":         &a.AccessTokenTTL,
		"refresh_token_ttl":        &a.RefreshTokenTTL,
		"auth_code_ttl":            &a.AuthCodeTTL,
		"login_ttl":                &a.LoginTTL,
		"registration_session_ttl": &a.RegistrationSessionTTL,
		"challenge_max_age":        &a.ChallengeMaxAge,
	}
	for d.NextBlock(0) {
		option := d.Val()
		if target, ok := durations[option]; ok {
			if err := parseDuration(d, target); err != nil {
				return err
			}
			// In JSON an absent (zero) TTL means the default; written out in the
			// Caddyfile, 0 would silently mean the same.
			if *target < caddy.Duration(time.Second) {
				why := ""
				if *target == 0 { // an upgrade's Caddyfile: say what it meant
					why = " (releases before 2026-11-27 read 0 as the default: remove the line to keep it)"
				}
				return d.Errf("%s: must be at least 1s, got %s%s", option, time.Duration(*target), why)
			}
			continue
		}
		switch option {
		case "issuer":
			if err := singleArg(d, &a.Issuer); err != nil {
				return err
			}
		case "storage":
			sc, err := parseStorage(d)
			if err != nil {
				return err
			}
			a.Storage = sc
		case "dev":
			if d.NextArg() {
				return d.Errf("dev: takes no argument")
			}
			a.Dev = true
		case "palm_attestor":
			args := d.RemainingArgs()
			if len(args) != 2 {
				return d.Errf("palm_attestor: expected `palm_attestor <name> <public key>`, got %d arguments", len(args))
			}
			a.PalmAttestors = append(a.PalmAttestors, PalmAttestor{Name: args[0], PublicKey: args[1]})
		case "pairwise_secret":
			if err := singleArg(d, &a.PairwiseSecret); err != nil {
				return err
			}
		case "sso_session":
			if err := parseSSOSession(d, &a.SSOSession); err != nil {
				return err
			}
		case "rate_limit":
			rl, err := parseRateLimit(d)
			if err != nil {
				return err
			}
			a.RateLimit = rl
		case "max_pending_logins", "max_pending_registrations":
			total, perNetwork := &a.MaxPendingLogins, &a.MaxPendingLoginsPerNetwork
			if option == "max_pending_registrations" {
				total, perNetwork = &a.MaxPendingRegistrations, &a.MaxPendingRegistrationsPerNetwork
			}
			if err := parsePendingCap(d, total, perNetwork); err != nil {
				return err
			}
		case "key_rotation":
			if err := parseKeyRotation(d, &a.KeyRotation); err != nil {
				return err
			}
		case "registration":
			rc, err := parseRegistration(d)
			if err != nil {
				return err
			}
			a.Registration = rc
		case "client_metadata_documents":
			mc, err := parseClientMetadataDocuments(d)
			if err != nil {
				return err
			}
			a.ClientMetadataDocuments = mc
		case "brand":
			b, err := parseBrand(d)
			if err != nil {
				return err
			}
			a.Brand = b
		case "portal":
			pc, err := parsePortal(d)
			if err != nil {
				return err
			}
			a.Portal = pc
		case "palm_app_url":
			if err := parsePalmAppURL(d, &a.PalmAppURL); err != nil {
				return err
			}
		case "resources":
			if err := parseResources(d, &a.Resources); err != nil {
				return err
			}
		case "client":
			c, err := parseClient(d)
			if err != nil {
				return err
			}
			a.Clients = append(a.Clients, c)
		default:
			return d.Errf("palmgate: unknown option %q", option)
		}
	}
	return nil
}

// parseStorage reads `storage badger <path>` or
//
//	storage postgres <dsn> {
//		max_conns <n>
//		statement_timeout <duration>
//		connect_timeout <duration>
//		group_commits on|off
//	}
func parseStorage(d *caddyfile.Dispenser) (*StorageConfig, error) {
	args := d.RemainingArgs()
	if len(args) != 2 || (args[0] != "badger" && args[0] != "postgres") {
		return nil, d.Errf("storage: expected `storage badger <path>` or `storage postgres <dsn>`, got %q", args)
	}
	sc := &StorageConfig{Backend: args[0]}
	if sc.Backend == "badger" {
		sc.Path = args[1]
	} else {
		sc.DSN = args[1]
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		if sc.Backend != "postgres" {
			return nil, d.Errf("storage: badger takes no options, got %q", d.Val())
		}
		switch option := d.Val(); option {
		case "max_conns":
			var arg string
			if err := singleArg(d, &arg); err != nil {
				return nil, err
			}
			n, err := strconv.Atoi(arg)
			if err != nil || n < 1 {
				return nil, d.Errf("max_conns: expected a number of at least 1, got %q", arg)
			}
			sc.MaxConns = n
		case "statement_timeout":
			if err := parsePositiveDuration(d, &sc.StatementTimeout); err != nil {
				return nil, err
			}
		case "connect_timeout":
			if err := parsePositiveDuration(d, &sc.ConnectTimeout); err != nil {
				return nil, err
			}
		case "group_commits":
			var arg string
			if err := singleArg(d, &arg); err != nil {
				return nil, err
			}
			switch arg {
			case "on":
				sc.DisableGroupCommits = false
			case "off":
				sc.DisableGroupCommits = true
			default:
				return nil, d.Errf("group_commits: expected on or off, got %q", arg)
			}
		default:
			return nil, d.Errf("storage postgres: unknown option %q (max_conns, statement_timeout, connect_timeout, group_commits)", option)
		}
	}
	return sc, nil
}

// parseCap reads `<option> <n>` (n at least 1) or `<option> off` (-1).
func parseCap(d *caddyfile.Dispenser, target *int) error {
	option := d.Val()
	var arg string
	if err := singleArg(d, &arg); err != nil {
		return err
	}
	if arg == "off" {
		*target = -1
		return nil
	}
	n, err := strconv.Atoi(arg)
	if err != nil || n < 1 {
		return d.Errf("%s: expected a number of at least 1 or `off`, got %q", option, arg)
	}
	*target = n
	return nil
}

// parsePendingCap reads `max_pending_… <n> | off`, with an optional block
// `{ per_network <n> | off }`.
func parsePendingCap(d *caddyfile.Dispenser, total, perNetwork *int) error {
	option := d.Val()
	if err := parseCap(d, total); err != nil {
		return err
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		switch d.Val() {
		case "per_network":
			if err := parseCap(d, perNetwork); err != nil {
				return d.Errf("%s: %v", option, err)
			}
			if *total < 0 && *perNetwork > 0 {
				return d.Errf("%s: per_network needs the global cap, which is off", option)
			}
		default:
			return d.Errf("%s: unknown option %q", option, d.Val())
		}
	}
	return nil
}

func singleArg(d *caddyfile.Dispenser, target *string) error {
	option := d.Val()
	args := d.RemainingArgs()
	if len(args) != 1 {
		return d.Errf("%s: expected one argument, got %d", option, len(args))
	}
	*target = args[0]
	return nil
}

func parseDuration(d *caddyfile.Dispenser, target *caddy.Duration) error {
	option := d.Val()
	var s string
	if err := singleArg(d, &s); err != nil {
		return err
	}
	dur, err := caddy.ParseDuration(s)
	if err != nil {
		return d.Errf("%s: %q is not a duration: %v", option, s, err)
	}
	*target = caddy.Duration(dur)
	return nil
}

// parsePositiveDuration is parseDuration for an option whose zero (in JSON, its
// absence) means its default: written out as 0 in the Caddyfile, it is refused
// rather than silently meaning the default.
func parsePositiveDuration(d *caddyfile.Dispenser, target *caddy.Duration) error {
	option := d.Val()
	if err := parseDuration(d, target); err != nil {
		return err
	}
	if *target <= 0 {
		return d.Errf("%s: must be more than 0, got %s", option, time.Duration(*target))
	}
	return nil
}

// parseSSOSession reads `sso_session <duration>` or `sso_session off` (0).
func parseSSOSession(d *caddyfile.Dispenser, target *caddy.Duration) error {
	var s string
	if err := singleArg(d, &s); err != nil {
		return err
	}
	if s == "off" {
		*target = 0
		return nil
	}
	dur, err := caddy.ParseDuration(s)
	if err != nil || dur <= 0 {
		return d.Errf("sso_session: %q is not a positive duration or off", s)
	}
	*target = caddy.Duration(dur)
	return nil
}

func parseRateLimit(d *caddyfile.Dispenser) (*RateLimit, error) {
	args := d.RemainingArgs()
	if len(args) == 1 && args[0] == "off" {
		return &RateLimit{Off: true}, nil
	}
	if len(args) != 2 {
		return nil, d.Errf("rate_limit: expected `rate_limit <requests> <window>` or `rate_limit off`")
	}
	n, err := strconv.Atoi(args[0])
	if err != nil || n < 1 {
		return nil, d.Errf("rate_limit: %q is not a positive number of requests", args[0])
	}
	window, err := caddy.ParseDuration(args[1])
	if err != nil {
		return nil, d.Errf("rate_limit: %q is not a duration: %v", args[1], err)
	}
	return &RateLimit{Requests: n, Window: caddy.Duration(window)}, nil
}

func parseClient(d *caddyfile.Dispenser) (Client, error) {
	var c Client
	if !d.NextArg() {
		return c, d.Errf("client: expected `client <client_id> { ... }`")
	}
	c.ID = d.Val()
	if d.NextArg() {
		return c, d.Errf("client %s: unexpected argument %q before the block", c.ID, d.Val())
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		switch option := d.Val(); option {
		case "secret":
			if err := singleArg(d, &c.Secret); err != nil {
				return c, err
			}
		case "secret_hash":
			if err := singleArg(d, &c.SecretHash); err != nil {
				return c, err
			}
		case "redirect_uri":
			uris := d.RemainingArgs()
			if len(uris) == 0 {
				return c, d.Errf("client %s: redirect_uri needs at least one URI", c.ID)
			}
			c.RedirectURIs = append(c.RedirectURIs, uris...)
		case "post_logout_redirect_uri":
			uris := d.RemainingArgs()
			if len(uris) == 0 {
				return c, d.Errf("client %s: post_logout_redirect_uri needs at least one URI", c.ID)
			}
			c.PostLogoutRedirectURIs = append(c.PostLogoutRedirectURIs, uris...)
		case "backchannel_logout_uri":
			if err := singleArg(d, &c.BackchannelLogoutURI); err != nil {
				return c, err
			}
			if err := oidc.CheckBackchannelLogoutURI(c.BackchannelLogoutURI, true); err != nil {
				return c, d.Errf("client %s: %v", c.ID, err)
			}
		case "name":
			if err := singleArg(d, &c.Name); err != nil {
				return c, err
			}
		case "sector":
			if err := singleArg(d, &c.Sector); err != nil {
				return c, err
			}
		case "id_token_signed_response_alg":
			if err := singleArg(d, &c.IDTokenSignedResponseAlg); err != nil {
				return c, err
			}
			if !slices.Contains(oidc.IDTokenAlgs, c.IDTokenSignedResponseAlg) {
				return c, d.Errf("client %s: id_token_signed_response_alg %q must be one of %s", c.ID, c.IDTokenSignedResponseAlg, strings.Join(oidc.IDTokenAlgs, ", "))
			}
		case "access_token_audience":
			if err := singleArg(d, &c.AccessTokenAudience); err != nil {
				return c, err
			}
			if !slices.Contains(oidc.AccessTokenAudiences, c.AccessTokenAudience) {
				return c, d.Errf("client %s: access_token_audience %q must be one of %s", c.ID, c.AccessTokenAudience, strings.Join(oidc.AccessTokenAudiences, ", "))
			}
		case "public":
			if d.NextArg() {
				return c, d.Errf("client %s: public takes no argument", c.ID)
			}
			c.Public = true
		case "allowed_origins":
			origins := d.RemainingArgs()
			if len(origins) == 0 {
				return c, d.Errf("client %s: allowed_origins needs at least one origin", c.ID)
			}
			c.AllowedOrigins = append(c.AllowedOrigins, origins...)
		case "scopes", "resources":
			args := d.RemainingArgs()
			if len(args) == 0 {
				return c, d.Errf("client %s: %s needs at least one value", c.ID, option)
			}
			if option == "scopes" {
				c.Scopes = append(c.Scopes, args...)
			} else {
				c.Resources = append(c.Resources, args...)
			}
		default:
			return c, d.Errf("client %s: unknown option %q", c.ID, option)
		}
	}
	return c, nil
}

// Interface guard
var _ caddyfile.Unmarshaler = (*App)(nil)

// parsePortal reads `portal off` or `portal { max_applications <n> }`.
func parsePortal(d *caddyfile.Dispenser) (*PortalConfig, error) {
	pc := &PortalConfig{}
	args := d.RemainingArgs()
	switch {
	case len(args) == 1 && args[0] == "off":
		pc.Off = true
		return pc, nil
	case len(args) != 0:
		return nil, d.Errf("portal: expected `portal off` or a block, got %q", args)
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		switch d.Val() {
		case "max_applications":
			var v string
			if err := singleArg(d, &v); err != nil {
				return nil, err
			}
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				return nil, d.Errf("portal: max_applications must be a positive number, got %q", v)
			}
			pc.MaxApplications = n
		default:
			return nil, d.Errf("portal: unknown option %q", d.Val())
		}
	}
	return pc, nil
}
